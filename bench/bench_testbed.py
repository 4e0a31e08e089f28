"""Benchmarks of the testbed and the result store (needs root).

provisioning: the 8-host StormCloud testbed is up (every sshd answers, worker
bundle deployed and checked) in <= 5 s and gone in <= 2 s.
storage: <= 4 bytes per echo observation on disk, against StormCloud's CSV rows
(node, round, peer, start_us, end_us) written from the same observations, raw
and gzipped.

Usage: .venv/bin/python bench/bench_testbed.py [--rounds N] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cloudbench.core.cluster import Cluster  # noqa: E402
from cloudbench.providers.netns import NetnsProvider  # noqa: E402
from cloudbench.remote import Remote  # noqa: E402
from cloudbench.runner import CampaignRunner, worker_bundle  # noqa: E402
from cloudbench.store.parquet import read_parquet  # noqa: E402
from cloudbench.workloads import load_spec, parse_spec  # noqa: E402

QUICKSTART = ROOT / "experiments" / "quickstart.yaml"


def provisioning(rounds: int) -> dict[str, float]:
    topo = load_spec(QUICKSTART).topology()
    provider = NetnsProvider()
    bundle = worker_bundle(["echo"])
    ups: list[float] = []
    downs: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            t0 = time.perf_counter()
            cluster = provider.provision(topo, Path(tmp))
            try:
                async def deploy(cluster: Cluster = cluster) -> None:
                    async with Remote(cluster) as remote:
                        res = await remote.fan_out(lambda h: remote.put(h, bundle, h.workdir))
                        bad = [r.failure for r in res if not r.ok]
                        if bad:
                            raise SystemExit(f"deploy failed: {bad}")

                asyncio.run(deploy())
                ups.append(time.perf_counter() - t0)
            finally:
                t1 = time.perf_counter()
                provider.destroy(cluster)
                downs.append(time.perf_counter() - t1)
    return {"up_median_s": statistics.median(ups), "up_max_s": max(ups),
            "down_median_s": statistics.median(downs), "down_max_s": max(downs)}


def storage(seconds: float) -> dict[str, float]:
    text = (QUICKSTART.read_text().replace("duration: 20s", f"duration: {seconds}s")
            .replace("repetitions: 2", "repetitions: 1"))
    spec = parse_spec(text, "bench.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        run = CampaignRunner(spec, "bench.yaml", Path(tmp)).execute()
        files = sorted((run.path / "echo").glob("*.parquet"))
        rows = 0
        size = 0
        csv = io.StringIO()
        for f in files:
            t = read_parquet(f, kind="echo")
            rows += t.num_rows
            size += f.stat().st_size
            # StormCloud's CSV: node, round, peer, start_us, end_us (wall-clock µs)
            base = 1_700_000_000_000_000
            start = t.column("send_us").to_numpy() + base
            rtt = t.column("rtt_ns").to_numpy(zero_copy_only=False)
            end = start + np.nan_to_num(rtt / 1000).astype(np.int64)
            src = t.column("src").cast("string").to_pylist()
            dst = t.column("dst").cast("string").to_pylist()
            rnd = t.column("round").to_numpy()
            for i in range(t.num_rows):
                csv.write(f"{src[i]},{rnd[i]},{dst[i]},{start[i]},{end[i]}\n")
        raw = csv.getvalue().encode()
    return {"rows": rows, "parquet_bytes_per_row": size / rows,
            "stormcloud_csv_bytes_per_row": len(raw) / rows,
            "stormcloud_csv_gz_bytes_per_row": len(gzip.compress(raw, 6)) / rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="provision/destroy cycles")
    ap.add_argument("--seconds", type=float, default=20, help="echo trial length for the storage figure")
    args = ap.parse_args()
    prov = provisioning(args.rounds)
    store = storage(args.seconds)
    ok_up = prov["up_max_s"] <= 5.0
    ok_down = prov["down_max_s"] <= 2.0
    ok_store = store["parquet_bytes_per_row"] <= 4.0
    print(f"provisioning, 8 hosts, {args.rounds} cycles")
    print(f"  up (sshd answering + bundle deployed): median {prov['up_median_s']:.2f} s, "
          f"max {prov['up_max_s']:.2f} s   target <= 5 s  {'PASS' if ok_up else 'FAIL'}")
    print(f"  down: median {prov['down_median_s']:.2f} s, max {prov['down_max_s']:.2f} s"
          f"   target <= 2 s  {'PASS' if ok_down else 'FAIL'}")
    print(f"storage, {store['rows']:,} echo observations")
    print(f"  cloudbench Parquet: {store['parquet_bytes_per_row']:.2f} B/row   target <= 4  "
          f"{'PASS' if ok_store else 'FAIL'}")
    print(f"  StormCloud CSV:     {store['stormcloud_csv_bytes_per_row']:.2f} B/row, gzipped "
          f"{store['stormcloud_csv_gz_bytes_per_row']:.2f} B/row")
    print(json.dumps({"bench": "testbed", **prov, **store, "pass": ok_up and ok_down and ok_store}))
    return 0 if ok_up and ok_down and ok_store else 1


if __name__ == "__main__":
    sys.exit(main())
