"""`cloudbench campaign start|run|status|stop|systemd`: scheduled campaigns, and `cloudbench diurnal`."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

import cloudbench
from cloudbench.cli.app import SpecArg, app, err, guard, out, print_warnings
from cloudbench.core.blocks import print_line
from cloudbench.core.files import utc_stamp
from cloudbench.core.units import fmt_bytes, fmt_duration

campaign_app = typer.Typer(
    help="Scheduled campaigns: the spec's `schedule:` as slots in a journal, run one at a time by a "
    "long-running `campaign run` (under systemd for days), each trial exactly once across crashes.",
    no_args_is_help=True,
)
app.add_typer(campaign_app, name="campaign")

DirArg = Annotated[Path, typer.Argument(help="campaign directory (made by `campaign start`)", show_default=False)]


def _seconds(utc: str) -> str:
    """An ISO UTC time to the second, as the log lines print it (2026-11-26T10:00:00Z)."""
    return utc_stamp(datetime.fromisoformat(utc.replace("Z", "+00:00")))


def _log(msg: str) -> None:
    stamp = utc_stamp()
    print_line(err, f"{stamp} {escape(msg)}", hang=len(stamp) + 1)  # one line when piped (a log to grep)


@campaign_app.command()
@guard
def start(
    spec: SpecArg,
    directory: Annotated[Path | None, typer.Option("--dir", help="campaign directory (default: "
                                                   "<results>/<campaign name>)")] = None,
    results: Annotated[Path, typer.Option(help="result store root")] = Path("results"),
    every: Annotated[str | None, typer.Option(help="schedule.every: slot length (1h, 10m)")] = None,
    count: Annotated[int | None, typer.Option(help="schedule.count: number of slots")] = None,
    until: Annotated[str | None, typer.Option(help="schedule.until: +<duration> or ISO 8601")] = None,
    start_at: Annotated[str | None, typer.Option("--start", help="schedule.start: now, +<duration> or "
                                                 "ISO 8601")] = None,
    spread: Annotated[str | None, typer.Option(help="schedule.spread: random start offset")] = None,
    slip: Annotated[str | None, typer.Option(help="schedule.slip: how late a start may be")] = None,
    cover: Annotated[str | None, typer.Option(help="schedule.cover: hour-of-day, hour-of-week, none")] = None,
    timezone: Annotated[str | None, typer.Option(help="schedule.timezone: IANA name")] = None,
    catch_up: Annotated[str | None, typer.Option("--catch-up", help="schedule.catch_up: skip or once")] = None,
    day: Annotated[str | None, typer.Option(help="schedule.day: length of a (compressed) day")] = None,
    run_now: Annotated[bool, typer.Option(
        "--run", help="start now and run the slots in this process (as `campaign run DIR`)")] = False,
) -> None:
    """Plan a scheduled campaign: the journal of every slot and trial, in a new directory.

    The options override the keys of the spec's `schedule:`. Prints the first slot and the
    directory; then `cloudbench campaign run DIR` (or `campaign systemd DIR --install`), or
    give --run to do both. Without a start in the spec or --start, the first slot is 30 s
    away when the slip is shorter (time to launch `campaign run`).
    """
    s = cloudbench.load_spec(spec)
    print_warnings(s.warnings)
    overrides: dict[str, Any] = {"every": every, "count": count, "until": until, "start": start_at,
                                 "spread": spread, "slip": slip, "cover": cover, "timezone": timezone,
                                 "catch_up": catch_up, "day": day}
    if run_now and start_at is None:
        overrides["start"] = "now"
    overrides = cloudbench.launch_overrides(s, overrides)
    d = cloudbench.create_campaign(spec, directory, results, overrides)
    st = cloudbench.campaign_status(d)
    first = _seconds(st["next"]["planned_utc"]) if st["next"] else "-"
    then = "" if run_now else f"; run `cloudbench campaign run {d}` before then"
    out.print(f"{st['total_slots']} slots, {sum(st['trials'].values())} trials; first at {first}{then}",
              highlight=False, soft_wrap=True)
    sp = st["space"]
    print_line(err, f"disk (estimate): a run peaks at {fmt_bytes(sp['run_peak_bytes'])} and keeps "
                    f"{fmt_bytes(sp['run_final_bytes'])}; all {sp['slots']} slots keep "
                    f"{fmt_bytes(sp['campaign_final_bytes'])}"
                    f"; {fmt_bytes(sp['free_bytes'])} free in {escape(str(d))}")
    if sp["campaign_peak_bytes"] > sp["free_bytes"]:
        print_line(err, f"[yellow]warning: the campaign needs about {fmt_bytes(sp['campaign_peak_bytes'])}, more "
                        f"than the {fmt_bytes(sp['free_bytes'])} free: slots that find too little free space are "
                        "recorded missed[/]", hang=len("warning: "))
    out.print(escape(str(d)), highlight=False, soft_wrap=True)
    if run_now:
        run_(d)


@campaign_app.command("run")
@guard
def run_(directory: DirArg) -> None:
    """Run the campaign's slots as they come due (foreground, a log line per event).

    SIGTERM or Ctrl-C tears the current run's hosts down and exits (130); started
    again, it continues from the journal: what was measured is kept, a trial cut
    off is run again on fresh hosts. A second `campaign run` on the same directory
    refuses while this one is alive. Exits 0 when no slot is left, 4 when some
    slots failed (see `campaign status`).
    """
    counts = cloudbench.CampaignDaemon(directory, log=_log).run()
    if counts.get("failed"):
        raise cloudbench.IncompleteRunError(f"{counts['failed']} slot(s) failed; see `campaign status`")


@campaign_app.command()
@guard
def status(
    directory: DirArg,
    as_json: Annotated[bool, typer.Option("--json", help="print the status as JSON")] = False,
) -> None:
    """Slots and trials by state, the next slot, and the coverage grid (weekday × hour)."""
    st = cloudbench.campaign_status(directory)
    if as_json:
        sys.stdout.write(json.dumps(st, indent=2) + "\n")
        return
    alive = f"runner pid {st['runner_pid']}" if st["runner_pid"] else "no runner"
    out.print(f"campaign {escape(st['name'])} ({st['state']}, {alive})", highlight=False)
    # a path is never cut: on its own line, left to the terminal to wrap
    out.print(f"  in {escape(st['directory'])}", highlight=False, soft_wrap=True)
    out.print("slots:  " + ", ".join(f"{n} {k}" for k, n in sorted(st["slots"].items())), highlight=False)
    out.print("trials: " + ", ".join(f"{n} {k}" for k, n in sorted(st["trials"].items())), highlight=False)
    sp = st["space"]
    planned = (f" of about {fmt_bytes(sp['campaign_final_bytes'])} planned" if "campaign_final_bytes" in sp else "")
    out.print(f"disk:   {fmt_bytes(sp['used_bytes'])} used{planned}, {fmt_bytes(sp['free_bytes'])} free",
              highlight=False)
    if st["next"]:
        out.print(f"next:   slot {st['next']['slot']} at {_seconds(st['next']['planned_utc'])} "
                  f"(in {fmt_duration(max(st['next']['in_s'], 0.0))})", highlight=False)
    tz = st["timezone"]
    out.print(f"coverage ({escape(tz)}), weekday × hour: finished runs", highlight=False)
    out.print("  (. planned, ! missed or failed, x cancelled)", highlight=False)
    day = float((st.get("schedule") or {}).get("day") or 86400.0)
    if day != 86400.0:
        out.print(f"  compressed days of {fmt_duration(day)} (schedule.day): a row is one such day,",
                  highlight=False)
        out.print(f"  a column one 24th of it ({fmt_duration(day / 24)})", highlight=False)
    out.print("     " + "".join(str(h // 10) for h in range(24)), highlight=False)
    out.print("     " + "".join(str(h % 10) for h in range(24)), highlight=False)
    for wd in ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"):
        cells = st["grid"].get(wd, {})
        out.print(f"{wd}  " + "".join(_cell(cells.get(str(h), {})) for h in range(24)), highlight=False)


def _cell(c: dict[str, int]) -> str:
    if c.get("missed") or c.get("failed"):
        return "!"
    if c.get("finished"):
        return str(min(c["finished"], 9))
    if c.get("planned") or c.get("running") or c.get("interrupted"):
        return "."
    return "x" if c.get("cancelled") else " "


@campaign_app.command()
@guard
def stop(directory: DirArg) -> None:
    """Cancel every slot not yet started; a running `campaign run` exits after its current run."""
    n = cloudbench.stop_campaign(directory)
    out.print(f"{n} slot(s) cancelled")


@campaign_app.command()
@guard
def systemd(
    directory: DirArg,
    install: Annotated[bool, typer.Option("--install", help="write it to /etc/systemd/system")] = False,
) -> None:
    """Print a systemd service unit that runs `campaign run DIR` (`--install` writes it)."""
    if install:
        path = cloudbench.install_unit(directory)
        out.print(f"wrote {escape(str(path))}; start it with: systemctl daemon-reload && "
                  f"systemctl enable --now {escape(path.name)}", highlight=False)
    else:
        sys.stdout.write(cloudbench.systemd_unit(directory))


@app.command()
@guard
def diurnal(
    results: Annotated[Path, typer.Argument(help="a campaign directory (its runs)")],
    period: Annotated[str | None, typer.Option(help="period of the cycle (default: the schedule's day, "
                                               "24h or a compressed day such as 60s; 7d for a week); "
                                               "at most what the runs cover")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the analysis as JSON")] = False,
) -> None:
    """Time-of-day analysis of a campaign's runs: each workload's per-run values by hour.

    The run is the unit: each run's repetitions become one value per metric and
    group. Per series: a sinusoid at the period with AR(2) errors between runs
    (the verdict's test), Kruskal-Wallis across hours (with its effect size),
    weekday vs weekend on whole days (from two weeks on), every p-value
    Holm-adjusted over the series; the fitted period and amplitude when the
    runs pin them down, and for a null result the smallest amplitude the runs
    could have detected.
    """
    res = cloudbench.diurnal(results, period)
    if as_json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")
    else:
        cloudbench.render_diurnal(res, out)
