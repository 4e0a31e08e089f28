"""Benchmark: cloudbench's throughput workload against nuttcp and iperf3 run by hand.

On one testbed (needs root), for each pair and tool, the same measurement is
taken two ways, in blocks of four runs ordered ABBA, then BAAB in the next block
(so that neither way is always first and a drift of the machine cancels inside
a block):

* by hand: ``ip netns exec NS taskset -c CPU TOOL …`` for the server and the
  client, each in a session of its own (as from two shells), nuttcp ``-i1
  -fparse -T`` and iperf3 ``-J``, rate from the tool's total (iperf3:
  ``end.sum_received``);
* cloudbench: the ``throughput`` workload kind on the same pair (server started
  and stopped by the worker over SSH, client output recorded line by line,
  pulled, parsed to Parquet), rate = all bytes / all time of the intervals
  (iperf3: the receiver's intervals, which add up to ``sum_received``).

Same binaries, same duration, same placement on both sides:

* CPU pinning: the client host's tool runs on one CPU and the server host's on
  the other (default ``--pin 0,1``). By hand that is ``taskset``; for cloudbench
  the testbed's per-host ``sshd`` is pinned before the first login, so the
  worker and the tool it starts inherit it (nothing in cloudbench is changed).
  Unpinned, on a 2-vCPU VM an unshaped transfer depends on whether the two ends
  and their softirqs share a CPU, which changes from run to run.
* Scheduler autogroups (``CONFIG_SCHED_AUTOGROUP``: one CFS group per session)
  are switched off for the bench (``kernel.sched_autogroup_enabled=0``, the old
  value restored on exit), so that how the processes are spread over sessions
  (SSH logins, ``setsid``, shells) does not weigh their CPU share against other
  load on the machine.

Pairs: ``a→b`` unshaped (the CPU is the bottleneck: the hardest case for an
observer to stay out of the way) and ``c→b`` behind the ``local.1g`` cap.
Verdict per pair and tool: the median over blocks of (mean cloudbench / mean by
hand within the block) ≥ 0.95, printed with its exact 95 % confidence interval
(order statistics, the same method as ``cloudbench confirm``; needs ≥ 6 blocks).
The ratio of the overall medians is printed too. An unshaped transfer is CPU-bound
and swings by ±15 % from one second to the next on a 2-vCPU VM, so the default of
8 blocks (16 runs each way) is what keeps that interval near ±5 %.

Usage: .venv/bin/python bench/bench_throughput.py [--blocks N] [--seconds S] [--pin C,S|none]
Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cloudbench.analysis.stats import quantile_ci  # noqa: E402
from cloudbench.core.cluster import Cluster  # noqa: E402
from cloudbench.providers.netns import NetnsProvider  # noqa: E402
from cloudbench.remote import Remote  # noqa: E402
from cloudbench.runner import worker_bundle  # noqa: E402
from cloudbench.spec.model import Spec  # noqa: E402
from cloudbench.store.rundir import RunDir  # noqa: E402
from cloudbench.workloads import (  # noqa: E402
    parse_spec,
    workload_kind,
)
from cloudbench.workloads.base import (  # noqa: E402
    Trial,
    TrialContext,
)
from cloudbench.workloads.throughput.data import load_transfers  # noqa: E402

TARGET = 0.95
HAND_PORT = 5400
AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")
CLIENT_HOSTS = ("a", "c")  # the first host of every pair; b is the server
SPEC = """\
name: benchtput
providers:
  netns:
    regions:
      r1:
        zones:
          r1-a:
            subnets:
              s1: {hosts: [a, b]}
              s2: {hosts: [c], vm_type: local.1g}
workloads:
  - {kind: throughput, name: nuttcp, tool: nuttcp, pairs: [[a, b], [c, b]], duration: SECONDS}
  - {kind: throughput, name: iperf3, tool: iperf3, pairs: [[a, b], [c, b]], duration: SECONDS}
"""


def by_hand(cluster: Cluster, tool: str, src: str, dst: str, seconds: int,
            pin: tuple[int, int] | None) -> float:
    """Mbit/s of one run started by hand with ip netns exec (server killed by its PID).

    Server and client each in a session of its own (two shells); with ``pin``
    (client CPU, server CPU) each tool under ``taskset -c``.
    """
    s, d = cluster.host(src), cluster.host(dst)
    assert s.netns and d.netns
    if tool == "nuttcp":
        server = ["nuttcp", "-S", "--nofork", f"-P{HAND_PORT}", f"-p{HAND_PORT + 1}"]
        client = ["nuttcp", f"-P{HAND_PORT}", f"-p{HAND_PORT + 1}", "-i1", "-fparse",
                  f"-T{seconds}", d.address]
    else:
        server = ["iperf3", "-s", "-p", str(HAND_PORT), "-B", d.address]
        client = ["iperf3", "-c", d.address, "-p", str(HAND_PORT), "-t", str(seconds), "-J"]
    if pin is not None:
        client = ["taskset", "-c", str(pin[0]), *client]
        server = ["taskset", "-c", str(pin[1]), *server]
    # ip netns exec and taskset exec the tool: proc.pid is the server's own PID
    proc = subprocess.Popen(["ip", "netns", "exec", d.netns, *server], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while True:
            r = subprocess.run(["ip", "netns", "exec", s.netns, *client], capture_output=True,
                               text=True, check=False, timeout=seconds + 30,
                               start_new_session=True)
            out = r.stdout
            # iperf3 -J exits 0 even when it cannot connect; the error is in the JSON
            if r.returncode == 0 and '"error":' not in out:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"{tool} by hand {src}→{dst} failed ({r.returncode}): "
                                 f"{(r.stderr or r.stdout)[-400:]}")
            time.sleep(0.1)  # server not listening yet
        if tool == "nuttcp":
            final = next(line for line in out.splitlines() if "real_seconds=" in line)
            return float(final.split("rate_Mbps=")[1].split()[0])
        return float(json.loads(out)["end"]["sum_received"]["bits_per_second"]) / 1e6
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)


def sshd_pids(cluster: Cluster) -> dict[str, int]:
    """PID of each host's sshd (``ip netns exec`` execs it), from the testbed's state file."""
    state = json.loads(Path(cluster.facts["state_file"]).read_text())
    out: dict[str, int] = {}
    for h in cluster.hosts:
        conf = str(Path(h.workdir).parent / "sshd_config")
        (pid,) = [int(p["pid"]) for p in state["pids"] if p.get("match") == conf]
        out[h.name] = pid
    return out


def pin_sshds(cluster: Cluster, pin: tuple[int, int]) -> dict[str, list[int]]:
    """Pin every host's sshd (before any login: its sessions, the worker and the tools
    it starts inherit the affinity) like the tools by hand: clients on pin[0], b on pin[1]."""
    placed: dict[str, list[int]] = {}
    for name, pid in sshd_pids(cluster).items():
        cpu = pin[0] if name in CLIENT_HOSTS else pin[1]
        os.sched_setaffinity(pid, {cpu})
        placed[name] = sorted(os.sched_getaffinity(pid))
    return placed


@contextlib.contextmanager
def autogroup_off() -> Iterator[str | None]:
    """kernel.sched_autogroup_enabled=0 for the block, the old value restored after."""
    try:
        old = AUTOGROUP.read_text().strip()
    except OSError:
        yield None  # kernel without CONFIG_SCHED_AUTOGROUP: nothing to switch
        return
    AUTOGROUP.write_text("0\n")
    try:
        yield old
    finally:
        AUTOGROUP.write_text(old + "\n")


async def by_cloudbench(spec: Spec, cluster: Cluster, remote: Remote, run: RunDir, tool: str,
                        pair: tuple[str, str], n: int) -> tuple[float, float]:
    """Mbit/s of one cloudbench trial, and the CPU share of its client worker."""
    w = spec.workload(tool)
    trial = Trial(f"r000-t{n:03d}-{tool}", 0, n, tool, "throughput", pair, (pair,))
    outcome = await workload_kind("throughput").run(
        TrialContext(trial, w, spec, cluster, remote, run, "bench"))
    if outcome.failures:
        raise SystemExit(f"cloudbench trial failed: {outcome.failures}")
    (series,) = [s for s in load_transfers(run, tool) if s.trial == trial.id]
    secs = float((series.t_end - series.t_start).sum())
    cpu = outcome.stats["forward"]["cpu"]
    return float(series.nbytes.sum()) * 8 / secs / 1e6, cpu["worker_s"] / cpu["wall_s"]


def _block_ratio(cb: list[float], hand: list[float]) -> float:
    return statistics.fmean(cb) / statistics.fmean(hand)


async def bench(blocks: int, seconds: int, pin: tuple[int, int] | None
                ) -> tuple[list[dict[str, object]], float, dict[str, list[int]], str]:
    spec = parse_spec(SPEC.replace("SECONDS", f"{seconds}s"), "bench.yaml")
    provider = NetnsProvider()
    samples: dict[tuple[str, str, str], list[float]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    worker_cpu: list[float] = []
    placed: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cluster = provider.provision(spec.topology(), Path(tmp))
        sid = cluster.stack
        try:
            if pin is not None:
                placed = pin_sshds(cluster, pin)  # before Remote opens the first login
            run = RunDir(Path(tmp) / "run")
            run.path.mkdir()
            async with Remote(cluster) as remote:
                bundle = worker_bundle(["throughput"])
                for h in cluster.hosts:
                    await remote.put(h, bundle, h.workdir)
                n = 0
                for blk in range(blocks):
                    for pair in (("a", "b"), ("c", "b")):
                        for tool in ("nuttcp", "iperf3"):
                            # ABBA, then BAAB: neither way always first, drift cancels
                            ways = (["hand", "cloudbench", "cloudbench", "hand"] if blk % 2 == 0
                                    else ["cloudbench", "hand", "hand", "cloudbench"])
                            got: dict[str, list[float]] = {"hand": [], "cloudbench": []}
                            for way in ways:
                                if way == "hand":
                                    v = await asyncio.to_thread(by_hand, cluster, tool, *pair,
                                                                seconds, pin)
                                else:
                                    v, share = await by_cloudbench(spec, cluster, remote, run, tool,
                                                                   pair, n)
                                    worker_cpu.append(share)
                                    n += 1
                                got[way].append(v)
                                label = f"{pair[0]}→{pair[1]}"
                                samples.setdefault((label, tool, way), []).append(v)
                            ratios.setdefault((label, tool), []).append(
                                _block_ratio(got["cloudbench"], got["hand"]))
        finally:
            provider.destroy(cluster)
    out: list[dict[str, object]] = []
    for label in ("a→b", "c→b"):
        for tool in ("nuttcp", "iperf3"):
            hand = samples[(label, tool, "hand")]
            cb = samples[(label, tool, "cloudbench")]
            ci = quantile_ci(ratios[(label, tool)], 0.5, 0.95)
            ratio = ci.estimate
            out.append({"pair": label, "shaping": "none" if label == "a→b" else "local.1g cap",
                        "tool": tool, "hand_mbps": [round(x, 1) for x in hand],
                        "cloudbench_mbps": [round(x, 1) for x in cb],
                        "block_ratios": [round(x, 4) for x in ratios[(label, tool)]],
                        "hand_median_mbps": round(statistics.median(hand), 1),
                        "cloudbench_median_mbps": round(statistics.median(cb), 1),
                        "ratio": round(ratio, 4),
                        "ratio_ci95": (None if ci.lower is None or ci.upper is None
                                       else [round(ci.lower, 4), round(ci.upper, 4)]),
                        "ratio_of_medians": round(statistics.median(cb)
                                                  / statistics.median(hand), 4),
                        "ok": ratio >= TARGET})
    return out, max(worker_cpu), placed, sid


def _ci_text(ci: object) -> str:
    return "n/a" if not isinstance(ci, list) else f"{ci[0]:.3f}–{ci[1]:.3f}"


def _pin_arg(text: str) -> tuple[int, int] | None:
    if text == "none":
        return None
    c, srv = (int(x) for x in text.split(","))
    return c, srv


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--blocks", type=int, default=8,
                    help="ABBA blocks per pair and tool (>= 6 for a confidence interval)")
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--pin", default="0,1",
                    help="CPU of the client tool, CPU of the server tool (or 'none')")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_throughput needs root (network namespaces)", file=sys.stderr)
        return 2
    pin = _pin_arg(args.pin)
    if pin is not None and not set(pin) <= os.sched_getaffinity(0):
        print(f"--pin {args.pin}: not CPUs this process may use", file=sys.stderr)
        return 2
    # SIGTERM (e.g. from timeout(1)) unwinds like Ctrl-C: namespaces removed, sysctl restored
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    t0 = time.monotonic()
    with autogroup_off() as autogroup_was:
        results, worker_cpu, placed, sid = asyncio.run(bench(args.blocks, args.seconds, pin))
    groups = (f"autogroups off (kernel.sched_autogroup_enabled=0, was {autogroup_was}, restored)"
              if autogroup_was is not None else "no autogroup sysctl on this kernel")
    cpus = (f"client tool on CPU {pin[0]}, server tool on CPU {pin[1]} (by hand: taskset -c; "
            f"cloudbench: sshd affinity {placed})" if pin is not None else "no CPU pinning")
    how = (f"both sides: same binaries and flags, {args.seconds} s runs, each process in its own "
           f"session; {groups}; {cpus}")
    print(how)
    print(f"{'pair':6} {'shaping':14} {'tool':7} {'by hand':>10} {'cloudbench':>11} "
          f"{'med/med':>8} {'ratio':>7} {'95 % CI':>15}   (medians of {2 * args.blocks} × {args.seconds} s, Mbit/s; "
          f"ratio = median over {args.blocks} ABBA blocks)")
    for r in results:
        print(f"{r['pair']:6} {r['shaping']:14} {r['tool']:7} {r['hand_median_mbps']:>10} "
              f"{r['cloudbench_median_mbps']:>11} {r['ratio_of_medians']:>8} {r['ratio']:>7} "
              f"{_ci_text(r['ratio_ci95']):>15}   "
              f"{'ok' if r['ok'] else 'MISSED'}")
    print(f"client worker CPU (throughput.py itself, not the tool): at most {worker_cpu:.2%} of one "
          "CPU over a trial")
    ok = all(r["ok"] for r in results)
    print(json.dumps({"bench": "throughput", "target_ratio": TARGET, "blocks": args.blocks,
                      "seconds": args.seconds, "pin": list(pin) if pin else None,
                      "testbed": sid, "sshd_affinity": placed, "autogroup_was": autogroup_was,
                      "how": how, "elapsed_s": round(time.monotonic() - t0, 1),
                      "worker_cpu_share_max": round(worker_cpu, 5), "results": results, "ok": ok},
                     ensure_ascii=False))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
