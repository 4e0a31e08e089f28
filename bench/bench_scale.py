"""StormCloud's headline run at full size, and `cloudbench report` on it as the user runs it.

Generates the raw files the echo worker would leave (8 hosts × 8 peers × 100 rounds/s;
138 M records in all: one 6-hour repetition, or ``--repetitions 2 --hours 3``), written
with numpy in the worker's documented record format (``workers/echo_protocol``: the
generator shares only its constants with cloudbench, none of its reading code; RTTs with
a lognormal body, a slow tail and rare timeouts, records in completion order), and a
manifest with the StormCloud topology's labels (3 regions, 5 zones, 6 subnets), then,
each in a child process so its time and peak RSS are its own:

1. ingest as `cloudbench run` does (`open_echo_file` → `echo_host_table` per chunk →
   `ParquetStream`) at each zstd level asked for: time, peak RSS, bytes per observation;
2. the user's command, ``python -m cloudbench report RUN`` (every table, the per-pair
   spike and step detection on raw RTTs, the figures, report.json, CSVs and
   report/index.html), alternating (A, B, A, B) with
3. the reference: DuckDB's exact `quantile_cont` of the Table-1 percentiles per latency
   group, reading the same Parquet files, 2 threads;
4. apart, the same work in stages, so the budget shows where time goes: the scan (the
   tables, no events), the scan with the per-pair events (events = the difference), the
   section (group level shifts, modes), report.json + CSVs + figures, and the HTML page.

Targets: the command ≤ 2.5 × the reference's time and ≤ 3 GB peak RSS;
ingest ≤ 120 s at 6 h, ≤ 1 GB, ≤ 4 B per observation.

Usage: .venv/bin/python bench/bench_scale.py [--hours 6] [--repetitions 1] [--levels 12]
       [--alternations 2] [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cloudbench.workers.echo_protocol import FLAG_TIMEOUT, MAGIC, RECORD, SCHEMA  # noqa: E402
from cloudbench.workloads.echo.schema import ZSTD_LEVEL  # noqa: E402

HOSTS = 8
RATE = 100.0
T0_NS = 1_000_000_000_000
DISK = np.dtype({"names": ["round", "peer", "flags", "send_ns", "recv_ns", "connect_ns"],
                 "formats": ["<u4", "<u2", "u1", "<i8", "<i8", "<i8"], "offsets": [0, 4, 6, 8, 16, 24],
                 "itemsize": RECORD.size})
ROUNDS_PER_BLOCK = 100_000


# the weather the per-pair detector must find (src host -> (dst id, start as a share of the
# trial, duration in s (None: a step to the end), added ns)): two steps, two spikes
WEATHER: dict[str, tuple[tuple[int, float, float | None, int], ...]] = {
    "h0": ((5, 0.4, None, 1_000_000),),
    "h2": ((7, 0.25, 3.0, 5_000_000),),
    "h3": ((1, 0.7, 0.5, 2_000_000),),
    "h6": ((4, 0.6, None, 300_000),),
}


def generate(directory: Path, hours: float, seed: int = 1) -> list[tuple[str, Path]]:
    """One raw file per host; every (round, peer) once, in completion order within a round block
    (:data:`WEATHER` added to its pairs)."""
    rng = np.random.default_rng(seed)
    rounds = int(hours * 3600 * RATE)
    names = [f"h{i}" for i in range(HOSTS)]
    out: list[tuple[str, Path]] = []
    for host_id, host in enumerate(names):
        header = {"schema": SCHEMA, "worker_version": "bench", "clock": "CLOCK_MONOTONIC", "host": host,
                  "host_id": host_id, "peers": [{"id": i, "name": n} for i, n in enumerate(names)],
                  "rate": RATE, "payload": 1024, "timeout_s": 1.0, "warmup_s": 0.0, "t0_ns": T0_NS}
        head = json.dumps(header).encode()
        path = directory / f"{host}.bin"
        with path.open("wb") as f:
            f.write(MAGIC + len(head).to_bytes(4, "big") + head)
            for start in range(0, rounds, ROUNDS_PER_BLOCK):
                n = min(ROUNDS_PER_BLOCK, rounds - start)
                rnd = np.repeat(np.arange(start, start + n, dtype=np.uint32), HOSTS)
                peer = np.tile(np.arange(HOSTS, dtype=np.uint16), n)
                send = T0_NS + (rnd.astype(np.int64) * int(1e9 / RATE)) + rng.integers(0, 20_000, len(rnd))
                # lognormal body (median ~70 µs), 0.1 % slow tail (+1-20 ms), 1e-5 timeouts
                rtt = rng.lognormal(np.log(70_000), 0.45, len(rnd)).astype(np.int64)
                slow = rng.random(len(rnd)) < 1e-3
                rtt[slow] += rng.integers(1_000_000, 20_000_000, int(slow.sum()))
                for dst, start_frac, dur_s, size_ns in WEATHER.get(host, ()):
                    first = int(start_frac * rounds)
                    last = rounds if dur_s is None else first + int(dur_s * RATE)
                    rtt[(peer == dst) & (rnd >= first) & (rnd < last)] += size_ns
                lost = rng.random(len(rnd)) < 1e-5
                rec = np.zeros(len(rnd), dtype=DISK)
                rec["round"], rec["peer"], rec["send_ns"] = rnd, peer, send
                rec["recv_ns"] = np.where(lost, 0, send + rtt)
                rec["flags"] = np.where(lost, FLAG_TIMEOUT, 0)
                rec["connect_ns"] = -1  # persistent connections
                order = np.argsort(rec["recv_ns"] + lost * (send + 1_000_000_000), kind="stable")
                rec[order].tofile(f)
        out.append((host, path))
    return out


# StormCloud's topology: region 1 has 3 zones, one of them with 2 subnets; 3 regions in all
TOPOLOGY = (("h0", "r1", "r1-a", "s1"), ("h1", "r1", "r1-a", "s1"), ("h2", "r1", "r1-a", "s2"),
            ("h3", "r1", "r1-b", "s3"), ("h4", "r1", "r1-c", "s4"), ("h5", "r2", "r2-a", "s5"),
            ("h6", "r2", "r2-a", "s5"), ("h7", "r3", "r3-a", "s6"))
RUN_ID = "20261124T000000Z-6h00"


def trial_id(rep: int) -> str:
    return f"r{rep:03d}-t00-echo"


QUORUM = {"hosts": ["h0", "h1", "h3", "h5", "h7"], "k": [3]}


def labels() -> dict[str, object]:
    from cloudbench.core.topology import HostSpec

    return {h: HostSpec(h, "netns", r, z, sn, "local") for h, r, z, sn in TOPOLOGY}


def write_manifest(run_dir: Path, rows: list[int], parquets: list[Path]) -> None:
    """One repetition per Parquet file (its trial), in order."""
    from cloudbench.core.files import sha256_file
    from cloudbench.store.manifest import HostRecord, Manifest, RepetitionRecord, TrialRecord, save_manifest

    hosts = [HostRecord(name=h, labels={"provider": "netns", "region": r, "zone": z, "subnet": sn,
                                        "vm_type": "local"}) for h, r, z, sn in TOPOLOGY]
    files = {str(p.relative_to(run_dir)): sha256_file(p) for p in parquets}
    m = Manifest(campaign="scale", run_id=RUN_ID, status="complete",
                 spec={"name": "scale", "workloads": [{"name": "echo", "kind": "echo", "rate": RATE,
                                                        "window": 30.0, "quorums": [QUORUM]}]},
                 repetitions=[RepetitionRecord(index=i, provider="netns", status="ok", hosts=hosts)
                              for i in range(len(parquets))],
                 trials=[TrialRecord(id=trial_id(i), repetition=i, workload="echo", kind="echo", status="ok",
                                     rows=n, files={rel: digest})
                         for i, (n, (rel, digest)) in enumerate(zip(rows, files.items(), strict=True))],
                 files=files)
    save_manifest(run_dir / "manifest.json", m)


def ingest_child(files: list[str], dest: str, level: int, rep: int) -> None:
    """Run in a child: ingest as the echo controller does; print rows and seconds."""
    from cloudbench.store.parquet import ParquetStream
    from cloudbench.workloads.echo.controller import echo_host_table
    from cloudbench.workloads.echo.reader import open_echo_file
    from cloudbench.workloads.echo.schema import ECHO_SCHEMA, ENCODINGS, echo_schema_metadata

    names = {i: f"h{i}" for i in range(HOSTS)}
    hosts = labels()
    t0 = time.perf_counter()
    meta = echo_schema_metadata({h: 1_795_000_000_000_000 + rep * 4 * 3600 * 10**6 for h in names.values()},
                                RUN_ID, trial_id(rep))
    with ParquetStream(Path(dest), ECHO_SCHEMA.with_metadata(meta), "echo", level, **ENCODINGS) as out:
        for path in files:
            f = open_echo_file(Path(path))
            for chunk in f.chunks():
                out.write(echo_host_table(f.header["host"], T0_NS, chunk, names, rep, run_id=RUN_ID,
                                          trial=trial_id(rep), labels=hosts))  # type: ignore[arg-type]
    print(json.dumps({"rows": out.rows, "seconds": time.perf_counter() - t0,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def cli_child(run_dir: str) -> None:
    """Run in a child: the user's command, ``python -m cloudbench report RUN``, as a process of its
    own (its output discarded); its wall time and peak RSS."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "cloudbench", "report", run_dir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, check=False, cwd=ROOT)
    seconds = time.perf_counter() - t0
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"cloudbench report exited {r.returncode}:\n{r.stderr[-3000:]}")
    rep = json.loads((Path(run_dir) / "report" / "report.json").read_bytes())
    sec = rep["workloads"]["echo"]
    print(json.dumps({"seconds": seconds, "cpu_s": use.ru_utime + use.ru_stime, "peak_rss_mb": use.ru_maxrss / 1024,
                      "rows": sec["rows"], "groups": {g["group"]: g["p99.999"] for g in sec["groups"]},
                      "events": len(sec.get("events", [])),
                      "html": (Path(run_dir) / "report" / "index.html").exists()}))


def stages_child(run_dir: str, out_dir: str, oracle: bool) -> None:
    """Run in a child: the command's work in stages (see the module docstring), each timed; the
    events found, for the fast path's check against the full detector."""
    from cloudbench.report.build import build_report
    from cloudbench.report.files import write_report
    from cloudbench.report.html import write_html
    from cloudbench.store.rundir import RunDir
    from cloudbench.workloads.echo.aggregates import aggregate_echo
    from cloudbench.workloads.echo.summaries import spec_quorums

    run = RunDir(Path(run_dir))
    manifest = run.manifest()
    params = manifest.workloads()[0]
    quorums = spec_quorums(manifest, params)
    times: dict[str, float] = {}

    def cpu() -> float:
        use = resource.getrusage(resource.RUSAGE_SELF)
        return use.ru_utime + use.ru_stime

    c0 = cpu()
    t0 = time.perf_counter()
    aggregate_echo(run, manifest, "echo", float(params["window"]), quorums)
    times["scan"] = time.perf_counter() - t0
    times["scan CPU"] = cpu() - c0
    c0 = cpu()
    t0 = time.perf_counter()
    agg = aggregate_echo(run, manifest, "echo", float(params["window"]), quorums, round_interval_s=1.0 / RATE)
    times["scan+events"] = time.perf_counter() - t0
    times["scan+events CPU"] = cpu() - c0
    times["events"] = times["scan+events"] - times["scan"]
    times["events CPU"] = times["scan+events CPU"] - times["scan CPU"]
    t0 = time.perf_counter()
    rep = build_report(run)  # the scan with events again, then the sections (group level shifts, modes)
    times["build_report"] = time.perf_counter() - t0
    times["section (build_report − scan+events)"] = times["build_report"] - times["scan+events"]
    out = Path(out_dir)
    t0 = time.perf_counter()
    write_report(run, rep, out)
    times["report.json+CSV+figures"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    write_html(run, rep, out / "index.html")
    times["HTML"] = time.perf_counter() - t0
    same: bool | None = None
    if oracle:  # the full detector as it was (tests/analysis/events_reference.py) on the same run
        from cloudbench.workloads.echo import scan
        from tests.analysis.events_reference import detect_pair_events as reference

        setattr(scan, "detect_pair_events", reference)  # noqa: B010 (the name the scan calls)
        t0 = time.perf_counter()
        full = aggregate_echo(run, manifest, "echo", float(params["window"]), quorums, round_interval_s=1.0 / RATE)
        times["scan+events, the full detector"] = time.perf_counter() - t0
        same = repr(full.events) == repr(agg.events)
    print(json.dumps({"times": times, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "events": agg.events, "same_as_full_detector": same}, default=str))


def reference_child(run_dir: str) -> None:
    """Run in a child: DuckDB's exact Table-1 percentiles per latency group over the same files."""
    import duckdb

    from cloudbench.analysis.latency import PERCENTILES

    con = duckdb.connect(config={"threads": 2})
    qs = ", ".join(str(p / 100) for p in PERCENTILES)
    use0 = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = use0.ru_utime + use0.ru_stime
    t0 = time.perf_counter()
    rows = con.sql(f"SELECT \"group\", quantile_cont(rtt_ns / 1000.0, [{qs}]) AS q "
                   f"FROM read_parquet('{run_dir}/echo/*.parquet') WHERE NOT warmup GROUP BY 1").fetchall()
    seconds = time.perf_counter() - t0
    use = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"seconds": seconds, "cpu_s": use.ru_utime + use.ru_stime - cpu0,
                      "peak_rss_mb": use.ru_maxrss / 1024, "groups": {g: q[-1] for g, q in rows}}))


def child(*args: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"bench child {args[0]} failed:\n{r.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def main() -> int:
    if sys.argv[1:2] == ["--child"]:  # a measured process (see child), tuned as the `cloudbench` command is
        from cloudbench.core.allocator import keep_freed_memory

        keep_freed_memory()
        what, rest = sys.argv[2], sys.argv[3:]
        if what == "ingest":
            ingest_child(json.loads(rest[0]), rest[1], int(rest[2]), int(rest[3]))
        elif what == "cli":
            cli_child(rest[0])
        elif what == "stages":
            stages_child(rest[0], rest[1], rest[2:3] == ["oracle"])
        else:
            reference_child(rest[0])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=6.0, help="length of each repetition (6 h × 1 = 138 M rows)")
    ap.add_argument("--repetitions", type=int, default=1, help="repetitions (trials) of --hours each")
    ap.add_argument("--levels", default=str(ZSTD_LEVEL),
                    help=f"zstd levels to measure, comma-separated (default: cloudbench's, {ZSTD_LEVEL})")
    ap.add_argument("--alternations", type=int, default=2,
                    help="command and reference runs, alternated (default 2 each)")
    ap.add_argument("--dir", type=Path, default=None, help="where to generate (default: a temp dir)")
    ap.add_argument("--run", type=Path, default=None,
                    help="an already generated run directory (from --keep): skip generation and ingest")
    ap.add_argument("--keep", action="store_true", help="keep the generated run (its path is printed)")
    ap.add_argument("--oracle", action="store_true",
                    help="with the stages: run the full detector (tests/analysis/events_reference.py) too and "
                    "compare the event lists")
    ap.add_argument("--stages", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the command's stages apart (scan, events, section, figures, HTML)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        if args.run is not None:
            run_dir = args.run.resolve()
            rows = sum(int(t["rows"]) for t in json.loads((run_dir / "manifest.json").read_text())["trials"])
            ingested: dict[int, dict[str, Any]] = {}
        else:
            run_dir = work / "scale" / RUN_ID
            rows, ingested = generate_run(run_dir, work, args)
        per = rows / 1e6
        refs: list[dict[str, Any]] = []
        cmds: list[dict[str, Any]] = []
        for _ in range(args.alternations):
            refs.append(child("reference", str(run_dir)))
            cmds.append(child("cli", str(run_dir)))
            ratio = cmds[-1]["seconds"] / refs[-1]["seconds"]
            print(f"  A reference (DuckDB quantile_cont per group, 2 threads): {refs[-1]['seconds']:6.1f} s "
                  f"(CPU {refs[-1]['cpu_s']:.1f} s), peak RSS {refs[-1]['peak_rss_mb']:.0f} MB", flush=True)
            print(f"  B cloudbench report RUN (everything):                   {cmds[-1]['seconds']:6.1f} s "
                  f"(CPU {cmds[-1]['cpu_s']:.1f} s, ratio {cmds[-1]['cpu_s'] / refs[-1]['cpu_s']:.2f}), "
                  f"peak RSS {cmds[-1]['peak_rss_mb']:.0f} MB (target ≤ 3072); ratio {ratio:.2f} (target ≤ 2.5); "
                  f"{cmds[-1]['events']} events", flush=True)
        stages: dict[str, Any] = {}
        if args.stages:
            stages = child("stages", str(run_dir), str(work / "stages"), *(["oracle"] if args.oracle else []))
            for k, v in stages["times"].items():
                print(f"    stage {k:40s} {v:6.1f} s")
            print(f"    stages' peak RSS {stages['peak_rss_mb']:.0f} MB; {len(stages['events'])} events"
                  + ("" if stages["same_as_full_detector"] is None else
                     f"; the same as the full detector's: {stages['same_as_full_detector']}"))
        if not cmds:  # --alternations 0: generate (and --keep) only
            print(f"kept: {run_dir}" if args.keep else "nothing timed")
            return 0
        mine: dict[str, float] = cmds[0]["groups"]
        theirs: dict[str, float] = refs[0]["groups"]
        same = all(abs(mine[g] - v) <= 1e-9 * abs(v) for g, v in theirs.items())
        print(f"  p99.999 per group equal to DuckDB's: {same}")
        ratios = [c["seconds"] / r["seconds"] for c, r in zip(cmds, refs, strict=True)]
        print(f"  ratio over {len(ratios)} alternation(s): median {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}; {sum(r <= 2.5 for r in ratios)} of {len(ratios)} ≤ 2.5; "
              "target ≤ 2.5)")
        print(json.dumps({"bench": "scale", "run": str(run_dir), "rows": rows,
                          "million_rows": per, "ingest": {str(k): v for k, v in ingested.items()},
                          "command": [{k: c[k] for k in ("seconds", "cpu_s", "peak_rss_mb", "events")} for c in cmds],
                          "reference": [{k: r[k] for k in ("seconds", "cpu_s", "peak_rss_mb")} for r in refs],
                          "ratios": ratios, "stages": stages.get("times"),
                          "events": stages.get("events")}, default=str))
        if args.keep and args.run is None:
            print(f"kept: {run_dir}")
        return 0 if same and stages.get("same_as_full_detector") is not False else 1
    finally:
        if args.keep and args.run is None:
            shutil.rmtree(work / "stages", ignore_errors=True)
        else:
            shutil.rmtree(work, ignore_errors=True)


def generate_run(run_dir: Path, work: Path, args: argparse.Namespace) -> tuple[int, dict[int, dict[str, Any]]]:
    """Raw files per repetition, ingested into one Parquet file each; the manifest. Rows and
    the ingest's figures per zstd level (measured on the first repetition)."""
    levels = [int(x) for x in args.levels.split(",")]
    results: dict[int, dict[str, Any]] = {}
    parquets: list[Path] = []
    counts: list[int] = []
    scale = 6.0 / args.hours
    for rep in range(args.repetitions):
        t0 = time.perf_counter()
        raw = work / f"raw{rep}"
        raw.mkdir()
        files = generate(raw, args.hours, seed=1 + rep)
        n = int(args.hours * 3600 * RATE) * HOSTS * HOSTS
        print(f"generated {n:,} echo observations ({HOSTS} hosts × {HOSTS} peers × {RATE:g}/s × "
              f"{args.hours:g} h, repetition {rep}) in {time.perf_counter() - t0:.0f} s", flush=True)
        dest = run_dir / "echo" / f"{trial_id(rep)}.parquet"
        dest.parent.mkdir(parents=True, exist_ok=True)
        for level in levels if rep == 0 else levels[-1:]:
            res = child("ingest", json.dumps([str(f) for _, f in files]), str(dest), str(level), str(rep))
            res["bytes_per_row"] = dest.stat().st_size / float(res["rows"])
            secs = float(res["seconds"])
            if rep == 0:
                results[level] = res
                print(f"  ingest, zstd {level:2d}: {secs:7.1f} s ({float(res['rows']) / secs / 1e6:.1f} M rows/s; "
                      f"6 h ≈ {secs * scale:.0f} s, target ≤ 120 s), peak RSS {res['peak_rss_mb']:.0f} MB "
                      f"(target ≤ 1024), {res['bytes_per_row']:.2f} B/row (target ≤ 4; synthetic RTTs)", flush=True)
            if level != levels[-1]:
                dest.unlink()
        shutil.rmtree(raw)
        parquets.append(dest)
        counts.append(n)
    write_manifest(run_dir, counts, parquets)
    return sum(counts), results


if __name__ == "__main__":
    sys.exit(main())
