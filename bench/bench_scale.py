"""StormCloud's headline run at full size: ingest of 8 hosts × 8 peers × 100 rounds/s × 6 h.

Generates the raw files the echo worker would leave after such a trial (8 files in
the worker's own format, 138 M records at 6 h; RTTs with a lognormal body, a slow
tail and rare timeouts, records in completion order), then ingests them as
`cloudbench run` does (`open_echo_file` → `echo_host_table` per chunk →
`ParquetStream`), in a child process, and prints its time, peak RSS and bytes per
observation for each zstd level asked for.

Targets (issue "StormCloud's headline run"): ingest of the 6-hour trial ≤ 120 s,
≤ 1 GB peak RSS whatever the length, ≤ 4 B per observation. Not measured here yet:
the report on 138 M rows against an exact DuckDB percentile query (needs the
out-of-core engine).

Usage: python3 bench/bench_scale.py [--hours 6] [--levels 9,12,19] [--dir DIR]
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

from cloudbench.workers.echo import FLAG_TIMEOUT, MAGIC, RECORD, SCHEMA  # noqa: E402
from cloudbench.workloads.echo.controller import _ZSTD_LEVEL as ZSTD_LEVEL  # noqa: E402

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


def ingest_child(files: list[str], dest: str, level: int) -> None:
    """Run in a child: ingest as the echo controller does; print rows and seconds."""
    from cloudbench.store.parquet import ParquetStream
    from cloudbench.workloads.echo.controller import _ENCODINGS, ECHO_SCHEMA, echo_host_table
    from cloudbench.workloads.echo.reader import open_echo_file

    names = {i: f"h{i}" for i in range(HOSTS)}
    t0 = time.perf_counter()
    with ParquetStream(Path(dest), ECHO_SCHEMA, "echo", level, **_ENCODINGS) as out:
        for path in files:
            f = open_echo_file(Path(path))
            for chunk in f.chunks():
                out.write(echo_host_table(f.header["host"], T0_NS, chunk, names, 0))
    print(json.dumps({"rows": out.rows, "seconds": time.perf_counter() - t0,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure(files: list[Path], dest: Path, level: int) -> dict[str, float]:
    r = subprocess.run([sys.executable, __file__, "--child", json.dumps([str(f) for f in files]), str(dest),
                        str(level)], capture_output=True, text=True, check=True)
    res: dict[str, float] = json.loads(r.stdout.strip().splitlines()[-1])
    res["bytes_per_row"] = dest.stat().st_size / res["rows"]
    return res


def main() -> int:
    if sys.argv[1:2] == ["--child"]:  # the measured process (see measure)
        ingest_child(json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=6.0, help="trial length (6 h = 138 M observations)")
    ap.add_argument("--levels", default=str(ZSTD_LEVEL),
                    help=f"zstd levels to measure, comma-separated (default: cloudbench's, {ZSTD_LEVEL})")
    ap.add_argument("--dir", type=Path, default=None, help="where to generate (default: a temp dir)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        t0 = time.perf_counter()
        files = generate(work, args.hours)
        rows = int(args.hours * 3600 * RATE) * HOSTS * HOSTS
        print(f"generated {rows:,} echo observations ({HOSTS} hosts × {HOSTS} peers × {RATE:g}/s × "
              f"{args.hours:g} h) in {time.perf_counter() - t0:.0f} s", flush=True)
        scale = 6.0 / args.hours
        results = {}
        for level in (int(x) for x in args.levels.split(",")):
            res = measure([f for _, f in files], work / f"echo-{level}.parquet", level)
            results[level] = res
            est = res["seconds"] * scale
            print(f"  zstd {level:2d}: {res['seconds']:7.1f} s ({res['rows'] / res['seconds'] / 1e6:.1f} M rows/s; "
                  f"6 h ≈ {est:.0f} s, target ≤ 120 s), peak RSS {res['peak_rss_mb']:.0f} MB (target ≤ 1024), "
                  f"{res['bytes_per_row']:.2f} B/row (target ≤ 4; synthetic RTTs)", flush=True)
            (work / f"echo-{level}.parquet").unlink()
        print(json.dumps({"bench": "scale", "hours": args.hours, "rows": rows,
                          "ingest": {str(k): v for k, v in results.items()}}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
