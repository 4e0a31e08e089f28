"""StormCloud's headline run at full size: 8 hosts × 8 peers × 100 rounds/s × 6 h, ingest and report.

Generates the raw files the echo worker would leave after such a trial (8 files in
the worker's own format, 138 M records at 6 h; RTTs with a lognormal body, a slow
tail and rare timeouts, records in completion order) and a manifest with the
StormCloud topology's labels (3 regions, 5 zones, 6 subnets), then, each in a child
process so its time and peak RSS are its own:

1. ingest as `cloudbench run` does (`open_echo_file` → `echo_host_table` per chunk →
   `ParquetStream`) at each zstd level asked for: time, peak RSS, bytes per observation;
2. the echo report (every table the scale issue lists: groups with the Table-1
   percentiles, quorums, windows, pairs, level shifts, worker health, and the
   per-repetition summaries; plus the figures' aggregates) through cloudbench's
   engine, alternating with
3. the reference: DuckDB's exact `quantile_cont` of the Table-1 percentiles per latency
   group, reading the same Parquet file, 2 threads.

4. once more with the per-pair spike/step detection on raw RTTs, timed apart.

Targets (issue "StormCloud's headline run"): ingest ≤ 120 s, ≤ 1 GB peak RSS,
≤ 4 B per observation; report ≤ 2.5 × the reference's time and ≤ 3 GB peak RSS.

Usage: .venv/bin/python bench/bench_scale.py [--hours 6] [--levels 12] [--alternations 2] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def generate(directory: Path, hours: float, seed: int = 1) -> list[tuple[str, Path]]:
    """One raw file per host; every (round, peer) once, in completion order within a round block."""
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
TRIAL = "r000-t00-echo"
QUORUM = {"hosts": ["h0", "h1", "h3", "h5", "h7"], "k": [3]}


def labels() -> dict[str, object]:
    from cloudbench.core.topology import HostSpec

    return {h: HostSpec(h, "netns", r, z, sn, "local") for h, r, z, sn in TOPOLOGY}


def write_manifest(run_dir: Path, rows: int, parquet: Path) -> None:
    from cloudbench.core.files import sha256_file
    from cloudbench.store.manifest import HostRecord, Manifest, RepetitionRecord, TrialRecord, save_manifest

    rel = str(parquet.relative_to(run_dir))
    digest = sha256_file(parquet)
    hosts = [HostRecord(name=h, labels={"provider": "netns", "region": r, "zone": z, "subnet": sn,
                                        "vm_type": "local"}) for h, r, z, sn in TOPOLOGY]
    m = Manifest(campaign="scale", run_id=RUN_ID, status="complete",
                 spec={"name": "scale", "workloads": [{"name": "echo", "kind": "echo", "rate": RATE,
                                                        "window": 30.0, "quorums": [QUORUM]}]},
                 repetitions=[RepetitionRecord(index=0, provider="netns", status="ok", hosts=hosts)],
                 trials=[TrialRecord(id=TRIAL, repetition=0, workload="echo", kind="echo", status="ok",
                                     rows=rows, files={rel: digest})],
                 files={rel: digest})
    save_manifest(run_dir / "manifest.json", m)


def ingest_child(files: list[str], dest: str, level: int) -> None:
    """Run in a child: ingest as the echo controller does; print rows and seconds."""
    from cloudbench.store.parquet import ParquetStream
    from cloudbench.workloads.echo.controller import echo_host_table
    from cloudbench.workloads.echo.reader import open_echo_file
    from cloudbench.workloads.echo.schema import ECHO_SCHEMA, ENCODINGS, echo_schema_metadata

    names = {i: f"h{i}" for i in range(HOSTS)}
    hosts = labels()
    t0 = time.perf_counter()
    meta = echo_schema_metadata({h: 1_795_000_000_000_000 for h in names.values()}, RUN_ID, TRIAL)
    with ParquetStream(Path(dest), ECHO_SCHEMA.with_metadata(meta), "echo", level, **ENCODINGS) as out:
        for path in files:
            f = open_echo_file(Path(path))
            for chunk in f.chunks():
                out.write(echo_host_table(f.header["host"], T0_NS, chunk, names, 0, run_id=RUN_ID, trial=TRIAL,
                                          labels=hosts))  # type: ignore[arg-type]
    print(json.dumps({"rows": out.rows, "seconds": time.perf_counter() - t0,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def report_child(run_dir: str, events: bool = False) -> None:
    """Run in a child: every table of the echo report section and the summaries, as `cloudbench report` does."""
    from cloudbench.store.rundir import RunDir
    from cloudbench.workloads.echo import report
    from cloudbench.workloads.echo.aggregates import aggregate_echo
    from cloudbench.workloads.echo.summaries import echo_summaries, spec_quorums

    run = RunDir(Path(run_dir))
    t0 = time.perf_counter()
    manifest = run.manifest()
    params = manifest.workloads()[0]
    agg = aggregate_echo(run, manifest, "echo", float(params["window"]), spec_quorums(manifest, params),
                         round_interval_s=1.0 / RATE if events else None)
    section = report.section_of(agg, manifest, params, run)
    summaries = echo_summaries(run, agg, "echo")
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "rows": section["rows"], "groups": {g["group"]: g["p99.999"] for g in section["groups"]},
                      "tables": {k: len(v) for k, v in section.items() if isinstance(v, list)},
                      "summaries": len(summaries)}))


def reference_child(run_dir: str) -> None:
    """Run in a child: DuckDB's exact Table-1 percentiles per latency group over the same files."""
    import duckdb

    from cloudbench.analysis.latency import PERCENTILES

    con = duckdb.connect(config={"threads": 2})
    qs = ", ".join(str(p / 100) for p in PERCENTILES)
    t0 = time.perf_counter()
    rows = con.sql(f"SELECT \"group\", quantile_cont(rtt_ns / 1000.0, [{qs}]) AS q "
                   f"FROM read_parquet('{run_dir}/echo/*.parquet') WHERE NOT warmup GROUP BY 1").fetchall()
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "groups": {g: q[-1] for g, q in rows}}))


def child(*args: str) -> dict[str, object]:
    r = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"bench child {args[0]} failed:\n{r.stderr[-3000:]}")
    out: dict[str, object] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def main() -> int:
    if sys.argv[1:2] == ["--child"]:  # a measured process (see child), tuned as the `cloudbench` command is
        from cloudbench.core.allocator import keep_freed_memory

        keep_freed_memory()
        what, rest = sys.argv[2], sys.argv[3:]
        if what == "ingest":
            ingest_child(json.loads(rest[0]), rest[1], int(rest[2]))
        elif what in ("report", "report+events"):
            report_child(rest[0], events=what == "report+events")
        else:
            reference_child(rest[0])
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=6.0, help="trial length (6 h = 138 M observations)")
    ap.add_argument("--levels", default=str(ZSTD_LEVEL),
                    help=f"zstd levels to measure, comma-separated (default: cloudbench's, {ZSTD_LEVEL})")
    ap.add_argument("--alternations", type=int, default=2,
                    help="report and reference runs, alternated (default 2 each)")
    ap.add_argument("--dir", type=Path, default=None, help="where to generate (default: a temp dir)")
    ap.add_argument("--events", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the report with the per-pair event detection on raw RTTs")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        t0 = time.perf_counter()
        raw = work / "raw"
        raw.mkdir()
        files = generate(raw, args.hours)
        rows = int(args.hours * 3600 * RATE) * HOSTS * HOSTS
        print(f"generated {rows:,} echo observations ({HOSTS} hosts × {HOSTS} peers × {RATE:g}/s × "
              f"{args.hours:g} h) in {time.perf_counter() - t0:.0f} s", flush=True)
        scale = 6.0 / args.hours
        run_dir = work / "scale" / RUN_ID
        dest = run_dir / "echo" / f"{TRIAL}.parquet"
        dest.parent.mkdir(parents=True)
        results: dict[int, dict[str, float]] = {}
        levels = [int(x) for x in args.levels.split(",")]
        for level in levels:
            res = child("ingest", json.dumps([str(f) for _, f in files]), str(dest), str(level))
            res["bytes_per_row"] = dest.stat().st_size / float(res["rows"])  # type: ignore[arg-type]
            results[level] = res  # type: ignore[assignment]
            secs = float(res["seconds"])  # type: ignore[arg-type]
            print(f"  ingest, zstd {level:2d}: {secs:7.1f} s ({float(res['rows']) / secs / 1e6:.1f} M rows/s; "  # type: ignore[arg-type]
                  f"6 h ≈ {secs * scale:.0f} s, target ≤ 120 s), peak RSS {res['peak_rss_mb']:.0f} MB "
                  f"(target ≤ 1024), {res['bytes_per_row']:.2f} B/row (target ≤ 4; synthetic RTTs)", flush=True)
            if level != levels[-1]:
                dest.unlink()
        shutil.rmtree(raw)
        write_manifest(run_dir, rows, dest)
        reps: list[dict[str, object]] = []
        refs: list[dict[str, object]] = []
        for _ in range(args.alternations):
            refs.append(child("reference", str(run_dir)))
            reps.append(child("report", str(run_dir)))
            ratio = float(reps[-1]["seconds"]) / float(refs[-1]["seconds"])  # type: ignore[arg-type]
            print(f"  reference (DuckDB quantile_cont per group, 2 threads): {float(refs[-1]['seconds']):6.1f} s, "  # type: ignore[arg-type]
                  f"peak RSS {float(refs[-1]['peak_rss_mb']):.0f} MB", flush=True)  # type: ignore[arg-type]
            print(f"  report (every echo table + summaries):               {float(reps[-1]['seconds']):6.1f} s, "  # type: ignore[arg-type]
                  f"peak RSS {float(reps[-1]['peak_rss_mb']):.0f} MB (target ≤ 3072); "  # type: ignore[arg-type]
                  f"ratio {ratio:.2f} (target ≤ 2.5)", flush=True)
        mine: dict[str, float] = reps[0]["groups"]  # type: ignore[assignment]
        theirs: dict[str, float] = refs[0]["groups"]  # type: ignore[assignment]
        if args.events:
            ev = child("report+events", str(run_dir))
            print(f"  report + per-pair events on raw RTTs (every pair): "
                  f"{float(ev['seconds']):6.1f} s, peak RSS {float(ev['peak_rss_mb']):.0f} MB; "  # type: ignore[arg-type]
                  f"ratio {float(ev['seconds']) / float(refs[-1]['seconds']):.2f}", flush=True)  # type: ignore[arg-type]
        same = all(abs(mine[g] - v) <= 1e-9 * abs(v) for g, v in theirs.items())
        print(f"  p99.999 per group equal to DuckDB's: {same}")
        print(json.dumps({"bench": "scale", "hours": args.hours, "rows": rows,
                          "ingest": {str(k): v for k, v in results.items()}, "report": reps, "reference": refs}))
        return 0 if same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
