"""The sides of ``cloudbench compare``: a directory or a time selection of one, read and guarded.

A side is a campaign directory (all its runs), one run directory, or a time selection of one
(``results/x@2026-11-16..2026-11-23``: repetitions measured from the first UTC date or time up to,
not including, the second; either end may be left out; :func:`parse_when` reads the times, and
:func:`windowed` turns ``--since``/``--until`` into such a selection). :func:`read_side` reads it with
:func:`cloudbench.report.confirm.load_values` and applies the time and hour selections;
:func:`make_side` the series filters and the pooling guard.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from cloudbench.analysis.confirm import RepetitionRef, RepetitionValue, SeriesKey
from cloudbench.errors import AnalysisError, UsageError
from cloudbench.report.confirm import load_values
from cloudbench.report.confirm_text import check_pooling
from cloudbench.report.diurnal import repetition_hours, value_times
from cloudbench.store.rundir import find_runs


@dataclass
class Side:
    """One side of a comparison: its values (filtered, guarded) and what it ran."""

    label: str  # "A" or "B"
    spec: str  # as given on the command line
    path: Path
    campaign: str
    runs: list[str]
    values: list[RepetitionValue]
    metadata: dict[str, str]
    kinds: dict[str, str]  # workload name -> kind
    notes: list[str] = field(default_factory=list)
    known: dict[str, set[str]] = field(default_factory=dict)  # workload/metric/group -> names before filters

    def to_json(self) -> SideJSON:
        """The side as ``compare.json`` holds it: what was compared, not its values."""
        return {"path": self.spec, "campaign": self.campaign, "runs": self.runs, "metadata": self.metadata}

    @classmethod
    def from_json(cls, doc: SideJSON, label: str) -> Side:
        """The side back from :meth:`to_json`, without its values (``compare.json`` has none)."""
        return cls(label, doc["path"], Path(doc["path"]), doc["campaign"], list(doc["runs"]), [],
                   dict(doc["metadata"]), {})


class SideJSON(TypedDict):
    """A side in ``compare.json``: as given, its campaign, its runs and its key metadata."""

    path: str
    campaign: str
    runs: list[str]
    metadata: dict[str, str]


_AGO = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
TIME_FORMS = "a UTC date or time (2026-11-16, 2026-11-16T08:00), now, today, or a time ago (7d, 36h, 2w, 90m)"


def parse_when(text: str, where: str, now: datetime | None = None) -> float:
    """UTC epoch seconds of ``text``: an ISO date or time (UTC unless it names an offset), ``now``,
    ``today`` (00:00 UTC), or a span before ``now`` (``7d``, ``-7d``, ``36h``, ``2w``, ``90m``).
    ``where`` names the flag or selection in the :class:`UsageError` for anything else."""
    now = now or datetime.now(UTC)
    word = text.strip().lower()
    if word == "now":
        return now.timestamp()
    if word == "today":
        return now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    span = word.removeprefix("-")
    if len(span) >= 2 and span[-1] in _AGO:
        try:
            amount = float(span[:-1])
        except ValueError:
            amount = math.nan
        if math.isfinite(amount) and amount >= 0:
            return now.timestamp() - amount * _AGO[span[-1]]
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not {TIME_FORMS}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def parse_window(since: str | None, until: str | None, flags: str = "--since/--until",
                 now: datetime | None = None) -> tuple[float | None, float | None]:
    """``--since``/``--until`` as given (either may be absent) -> (since, until) in UTC epoch
    seconds, relative forms resolved against ``now``; a window that ends before it starts is a
    usage error naming ``flags``."""
    lo = parse_when(since, f"--since {since}", now) if since is not None else None
    hi = parse_when(until, f"--until {until}", now) if until is not None else None
    if lo is not None and hi is not None and hi <= lo:
        raise UsageError(f"{flags}: the window {since} .. {until} ends before it starts "
                         f"({_iso(lo)} .. {_iso(hi)} UTC)")
    return lo, hi


def windowed(path: str, since: str | None, until: str | None, flags: str = "--since/--until",
             now: datetime | None = None) -> str:
    """``path`` with a time window (``--since``/``--until`` as given on the command line) as a
    side text ``DIR@SINCE..UNTIL`` in absolute UTC times (relative forms resolved against ``now``),
    so that the side says which window it was; ``path`` unchanged without a window."""
    if since is None and until is None:
        return path
    if "@" in path and not Path(path).exists():
        raise UsageError(f"{path!r}: a time selection DIR@SINCE..UNTIL and {flags} on the same side; give one")
    lo, hi = parse_window(since, until, flags, now)
    return f"{path}@{_iso(lo) if lo is not None else ''}..{_iso(hi) if hi is not None else ''}"


def split_side(text: str) -> tuple[Path, float | None, float | None]:
    """``DIR`` or ``DIR@SINCE..UNTIL`` (UTC; either end may be empty) -> (dir, since, until)."""
    if Path(text).exists() or "@" not in text:
        return Path(text), None, None
    base, _, sel = text.rpartition("@")
    if ".." not in sel:
        raise UsageError(f"{text!r}: a selection is DIR@SINCE..UNTIL (UTC dates or times; e.g. "
                         "results/x@2026-11-16..2026-11-23)")
    lo, _, hi = sel.partition("..")
    since = parse_when(lo, text) if lo else None
    until = parse_when(hi, text) if hi else None
    if since is not None and until is not None and until <= since:
        raise UsageError(f"{text!r}: the selection ends before it starts")
    return Path(base), since, until


def _filter(values: list[RepetitionValue], attr: str, wanted: Sequence[str]) -> list[RepetitionValue]:
    return values if not wanted else [v for v in values if getattr(v, attr) in wanted]


@dataclass
class SideRead:
    """One directory (or time selection) as read, before series filters and the pooling guard."""

    path: Path
    campaign: str
    values: list[RepetitionValue]
    kinds: dict[str, str]  # workload name -> kind
    notes: list[str]
    hours: dict[tuple[str, int, str], int] | None = None


def read_side(text: str, label: str = "", hours: Sequence[int] = (), want_hours: bool = False) -> SideRead:
    """Every repetition value under ``text`` (a directory or ``DIR@SINCE..UNTIL``), the time and
    ``hours`` selections applied."""
    path, since, until = split_side(text)
    ds = load_values(path, allow_mixed=True)
    values = list(ds.values)
    notes = list(ds.notes)
    runs = find_runs(path)
    manifests = {r.run_id: r.manifest() for r in runs}
    kinds: dict[str, str] = {}
    for m in manifests.values():
        for w in m.workloads():
            kinds.setdefault(str(w.get("name", w.get("kind"))), str(w.get("kind", "")))
    if since is not None or until is not None:
        at: dict[tuple[str, int, str], float] = {}
        for run_id, m in manifests.items():
            for (rep, wname), when in value_times(m).items():
                at[(run_id, rep, wname)] = when
        values = [v for v in values
                  if (tv := at.get((v.ref.run_id, v.ref.repetition, v.workload))) is not None
                  and (since is None or tv >= since) and (until is None or tv < until)]
        if not values:
            known = sorted(at.values())
            seen = (f"; its repetitions were measured from {_iso(known[0])} to {_iso(known[-1])} UTC" if known
                    else "; it has no repetition with a time")
            raise UsageError(f"{text}: no repetition was measured in the selected time span (UTC; "
                             f"--since/--until or DIR@SINCE..UNTIL){seen}")
        notes.append(f"side {label or text}: repetitions measured in {text.rpartition('@')[2]} (UTC) only")
    hour_of = repetition_hours(path) if hours or want_hours else None
    if hours:
        if any(not 0 <= h <= 23 for h in hours):
            raise UsageError(f"--hour takes hours 0..23, got {list(hours)}")
        assert hour_of is not None
        values = [v for v in values if hour_of.get((v.ref.run_id, v.ref.repetition, v.workload)) in hours]
        if not values:
            raise AnalysisError(f"{text}: no repetition was measured in hour(s) {sorted(set(hours))}")
    return SideRead(path, ds.campaign, values, kinds, notes, hour_of)


def make_side(label: str, spec: str, read: SideRead, values: list[RepetitionValue], *,
              workloads: Sequence[str] = (), metrics: Sequence[str] = (), groups: Sequence[str] = (),
              allow_mixed: bool = False, ignore: str | None = None) -> Side:
    """Keep the selected series of ``values``, refuse mixed metadata (``ignore``: a key not
    checked, the ``--by`` key), and take the metadata of the first repetition."""
    known = {a: {getattr(v, a) for v in values} for a in ("workload", "metric", "group")}
    values = _filter(values, "workload", workloads)
    values = _filter(values, "metric", metrics)
    values = _filter(values, "group", groups)
    series_refs: dict[SeriesKey, list[RepetitionRef]] = defaultdict(list)
    metas: dict[RepetitionRef, dict[str, str]] = {}
    for v in values:
        series_refs[SeriesKey(v.workload, v.metric, v.group)].append(v.ref)
        metas[v.ref] = {k: x for k, x in v.metadata.items() if k != ignore}
    notes = list(read.notes)
    mixed = check_pooling(Path(spec), series_refs, metas, allow_mixed)
    if mixed:
        notes.append(f"side {label}: repetitions with different key metadata pooled (--allow-mixed)")
    first = min(metas, default=None)
    metadata = dict(values[0].metadata) if values else {}
    if first is not None:
        metadata = dict(next(v.metadata for v in values if v.ref == first))
    used_runs = list(dict.fromkeys(v.ref.run_id for v in values))
    return Side(label, spec, read.path, read.campaign, used_runs, values, metadata, dict(read.kinds), notes, known)


def load_side(label: str, text: str, *, workloads: Sequence[str] = (), metrics: Sequence[str] = (),
              groups: Sequence[str] = (), hours: Sequence[int] = (), allow_mixed: bool = False) -> Side:
    """Read one side, keep the selected repetitions and series, refuse mixed metadata."""
    read = read_side(text, label, hours)
    return make_side(label, text, read, read.values, workloads=workloads, metrics=metrics, groups=groups,
                     allow_mixed=allow_mixed)



def check_names(sides: Sequence[Side], where: str, workloads: Sequence[str], metrics: Sequence[str],
                groups: Sequence[str]) -> None:
    """Raise AnalysisError naming the selected workloads, metrics or groups no side has."""
    for what, wanted in (("workload", workloads), ("metric", metrics), ("group", groups)):
        known = set().union(*(s.known.get(what, set()) for s in sides))
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise AnalysisError(f"unknown {what}(s) {', '.join(map(repr, unknown))} in {where}; "
                                f"known: {', '.join(sorted(known))}")

