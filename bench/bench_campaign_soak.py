"""A week of slots without growth: `cloudbench campaign run` over many short slots on the testbed.

Runs (as root) a campaign of ``--slots`` back-to-back slots of a tiny echo spec on the
netns testbed (2 hosts, 1 s of echo per slot) as a real ``cloudbench campaign run``
process, and samples that process every ``--every`` finished slots: its RSS
(``VmRSS``), its open file descriptors (``/proc/PID/fd``), the bytes of its log
(stderr, which systemd's journal takes and rotates under the unit) and of the campaign
directory. Prints one JSON line per sample and a summary comparing slot 10 with the
last; exits 1 if RSS grew by more than ``--rss-slack`` MB between them, or the fewest fds seen in
the second half of the samples is above the fewest seen in the first half.

    sudo .venv/bin/python bench/bench_campaign_soak.py --slots 200
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
name: soak
seed: 3
repetitions: 1
rest: 0s
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: 2}
workloads:
  - {kind: echo, name: echo, rate: 20, payload: 64, duration: 1s, warmup: 0.1s, timeout: 0.5s, self_loop: false}
"""


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def finished(journal: Path) -> int:
    try:
        with sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=5) as c:
            return int(c.execute("SELECT count(*) FROM slots WHERE state IN "
                                 "('finished', 'failed', 'missed')").fetchone()[0])
    except sqlite3.Error:
        return 0


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, default=200)
    ap.add_argument("--every", type=int, default=10, help="sample every N finished slots")
    ap.add_argument("--rss-slack", type=float, default=20.0, help="MB of RSS growth allowed, slot 10 to last")
    ap.add_argument("--dir", type=Path, default=None, help="work directory (default: a new temporary one)")
    ap.add_argument("--out", type=Path, default=None, help="also write the samples here (JSON lines)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("the testbed needs root", file=sys.stderr)
        return 2
    work = args.dir or Path(tempfile.mkdtemp(prefix="cb-soak-"))
    spec = work / "soak.yaml"
    spec.write_text(SPEC)
    camp = work / "soak"
    py = [sys.executable, "-m", "cloudbench"]
    subprocess.run([*py, "campaign", "start", str(spec), "--dir", str(camp), "--every", "1s",
                    "--count", str(args.slots), "--slip", "30d", "--cover", "none"], check=True,
                   capture_output=True)
    log = work / "campaign.log"
    t0 = time.monotonic()
    samples: list[dict[str, float]] = []
    with log.open("wb") as lf:
        proc = subprocess.Popen([*py, "campaign", "run", str(camp)], stdout=lf, stderr=subprocess.STDOUT)
        try:
            want = [10, *range(args.every * 2, args.slots + 1, args.every)]
            if args.slots not in want:
                want.append(args.slots)
            while want and proc.poll() is None:
                n = finished(camp / "journal.sqlite")
                if n >= want[0]:
                    s = {"slot": n, "elapsed_s": round(time.monotonic() - t0, 1), "rss_mb": rss_kb(proc.pid) / 1024,
                         "fds": fds(proc.pid), "log_bytes": log.stat().st_size, "campaign_bytes": du(camp)}
                    samples.append(s)
                    print(json.dumps(s), flush=True)
                    if args.out:
                        with args.out.open("a") as f:
                            f.write(json.dumps(s) + "\n")
                    while want and want[0] <= n:
                        want.pop(0)
                time.sleep(0.2)
            proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=900)
    if len(samples) < 2:
        print(f"too few samples: {samples}; log {log}", file=sys.stderr)
        return 1
    first, last = samples[0], samples[-1]
    per_slot_log = (last["log_bytes"] - first["log_bytes"]) / max(1, last["slot"] - first["slot"])
    summary = {"from_slot": first["slot"], "to_slot": last["slot"],
               "rss_mb": [round(first["rss_mb"], 1), round(last["rss_mb"], 1)],
               "fds": [first["fds"], last["fds"]], "log_bytes": [first["log_bytes"], last["log_bytes"]],
               "log_bytes_per_slot": round(per_slot_log), "exit_code": proc.returncode}
    print(json.dumps({"summary": summary}), flush=True)
    # A sample falls in some phase of a slot (a trial's SSH connections open or not), so fds are
    # compared as floors: a leak raises the fewest seen in the second half over the first half's.
    half = len(samples) // 2
    floors = [min(x["fds"] for x in samples[:half]), min(x["fds"] for x in samples[half:])]
    print(json.dumps({"fds_floor_halves": floors, "fds_max": max(x["fds"] for x in samples)}), flush=True)
    grew = last["rss_mb"] - first["rss_mb"] > args.rss_slack or floors[1] > floors[0]
    return 1 if grew or proc.returncode != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
