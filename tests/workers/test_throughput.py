"""The throughput worker's client loop against a scripted stand-in for nuttcp.

The stand-in prints ``-fparse`` interval lines at programmed rates (fast, not in
real time), obeys SIGINT like nuttcp (a last line, then its total) and can fail
on chosen invocations, so the stop rules, the second drain and the retries are
tested in a second, without a testbed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cloudbench.workloads.throughput.reader import parse_nuttcp, parse_throughput_record
from tests.paths import ROOT

WORKER = ROOT / "cloudbench" / "workers" / "throughput.py"

FAKE = """#!{python}
import os, signal, sys, time
state = os.environ["FAKE_STATE"]
n = int(open(state).read()) if os.path.exists(state) else 0
open(state, "w").write(str(n + 1))
plan = os.environ["FAKE_PLAN"].split(";")[n]
if plan == "fail":
    sys.stderr.write("nuttcp-t: v6.1.2: Error: connect: Connection refused\\n")
    sys.exit(1)
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
total = 0.0
for part in plan.split(","):
    rate, count = part.split("x")
    for _ in range(int(count)):
        if stop:
            break
        time.sleep(0.01)
        mb = float(rate) * 1e6 * 0.5 / 8 / 1048576
        total += mb
        print("megabytes=%.4f real_sec=0.50 rate_Mbps=%.4f retrans=0" % (mb, float(rate)), flush=True)
if stop:
    print("\\n*** transfer interrupted ***\\n", flush=True)
print("\\nmegabytes=%.4f real_seconds=9.99 rate_Mbps=1.0 tx_cpu=1 rx_cpu=1 retrans=0" % total,
      flush=True)
"""


def run_worker(tmp: Path, plan: str, bursts: list[dict[str, Any]]) -> tuple[dict[str, Any], Path]:
    bindir = tmp / "bin"
    bindir.mkdir()
    fake = bindir / "nuttcp"
    fake.write_text(FAKE.format(python=sys.executable))
    fake.chmod(0o755)
    cfg = {"schema": 1, "host": "a", "tool": "nuttcp", "target": "127.0.0.1", "source": "127.0.0.1",
           "port": 5000, "protocol": "tcp", "interval_s": 0.5, "streams": 1, "length": None,
           "reverse": False, "bursts": bursts, "drain": {"window_s": 2.0, "factor": 0.75}}
    (tmp / "cfg.json").write_text(json.dumps(cfg))
    out = tmp / "out.jsonl"
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_PLAN": plan,
           "FAKE_STATE": str(tmp / "state")}
    r = subprocess.run([sys.executable, str(WORKER), "client", str(tmp / "cfg.json"), str(out)],
                       capture_output=True, text=True, env=env, timeout=60, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1]), out


def rates(text: str) -> list[float]:
    return [iv.rate_bps / 1e6 for iv in parse_nuttcp(text).intervals if not iv.derived]


def test_drain_stops_once_the_low_rate_held_then_rests_and_drains_again(tmp_path: Path) -> None:
    drain = {"seconds": 60, "stop": "drain", "pause_after_s": 0.3}
    summary, out = run_worker(tmp_path, "200x8,50x40;200x3,50x40", [drain, {**drain}])
    rec = parse_throughput_record(out.read_text())
    first, second = rec.bursts
    assert first.stop == second.stop == "drained"
    # w = 2 s / 0.5 s = 4: drained at 8 high + 4 low; one more line may be in flight
    assert 12 <= len(rates(first.text)) <= 13
    assert rates(first.text)[:12] == [200.0] * 8 + [50.0] * 4
    # the second drain knows the levels: 4 intervals under 50 + 0.25 × 150 end it
    assert 7 <= len(rates(second.text)) <= 8
    assert second.rest_before_ns >= 0.3e9
    assert summary["sha256"] and summary["cpu"]["worker_s"] < summary["cpu"]["wall_s"]
    assert [b["stop"] for b in summary["bursts"]] == ["drained", "drained"]


def test_a_budget_shorter_than_the_window_still_drains(tmp_path: Path) -> None:
    drain = {"seconds": 60, "stop": "drain"}
    _, out = run_worker(tmp_path, "200x2,50x40", [drain])
    (b,) = parse_throughput_record(out.read_text()).bursts
    assert b.stop == "drained" and 6 <= len(rates(b.text)) <= 7


def test_no_drain_means_no_second_drain(tmp_path: Path) -> None:
    drain = {"seconds": 60, "stop": "drain", "pause_after_s": 0.1}
    summary, out = run_worker(tmp_path, "100x20;100x20", [drain, {**drain}])
    rec = parse_throughput_record(out.read_text())
    (only,) = rec.bursts
    assert only.stop == "time" and len(rates(only.text)) == 20
    assert rec.skipped[0]["burst"] == 1
    assert len(summary["bursts"]) == 1


def test_a_quick_failure_is_retried_and_the_record_keeps_the_last_attempt(tmp_path: Path) -> None:
    summary, out = run_worker(tmp_path, "fail;fail;200x3", [{"seconds": 2, "stop": "time"}])
    (b,) = parse_throughput_record(out.read_text()).bursts
    assert b.attempt == 2 and b.rc == 0 and b.stop == "time"
    assert summary["bursts"][0]["attempt"] == 2
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    failed = [x for x in lines if x["type"] == "end" and x["stop"] == "failed"]
    assert len(failed) == 2 and "Connection refused" in failed[0]["stderr"]
