"""MDA traceroute worker: run scamper ``tracelb`` to every destination, keep its JSON.

Runs on measured hosts with nothing but ``python3`` (stdlib) and Debian's
``scamper`` (needs root or CAP_NET_RAW, as on the testbed).

    python3 traceroute.py CONFIG.json OUT.json

CONFIG: ``{"schema": 1, "host", "destinations": [addr…], "method", "confidence",
"gap_limit", "attempts", "wait_probe_s", "wait_timeout_s", "pps", "limit_s"}``.
OUT is scamper's own JSON-lines output, untouched. The worker prints one JSON
line: schema, worker version, host, scamper version, exit code, whether the
limit stopped it, duration (CLOCK_MONOTONIC), number of traces, sha256 of OUT.

Format history:
    schema 1 (worker 1): the format above.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from typing import Any

WORKER_VERSION = "1"
SCHEMA = 1


def scamper_command(cfg: dict[str, Any], out: str) -> list[str]:
    # tracelb's -W counts hundredths of a second and scamper accepts 15..200.
    wait_probe = min(max(round(cfg["wait_probe_s"] * 100), 15), 200)
    tracelb = "tracelb -P {} -c {} -g {} -q {} -W {} -w {}".format(
        cfg["method"], cfg["confidence"], cfg["gap_limit"], cfg["attempts"], wait_probe,
        max(round(cfg["wait_timeout_s"]), 1))
    return ["scamper", "-O", "json", "-o", out, "-p", str(cfg["pps"]), "-c", tracelb,
            "-i", *cfg["destinations"]]


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _version() -> str:
    try:
        p = subprocess.run(["scamper", "-v"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (p.stdout or p.stderr).strip()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: traceroute.py CONFIG.json OUT.json", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        cfg = json.load(f)
    if cfg.get("schema") != SCHEMA:
        print(f"traceroute.py: config schema {cfg.get('schema')!r} unknown (knows {SCHEMA})",
              file=sys.stderr)
        return 2
    if shutil.which("scamper") is None:
        print("traceroute.py: scamper is not installed on this host (apt-get install scamper)",
              file=sys.stderr)
        return 3
    out = argv[2]
    t0 = time.monotonic_ns()
    proc = subprocess.Popen(scamper_command(cfg, out), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=cfg["limit_s"])
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.terminate()  # scamper flushes the traces it finished
        try:
            _, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    duration = (time.monotonic_ns() - t0) / 1e9
    traces = 0
    try:
        with open(out) as f:
            traces = sum(1 for line in f if '"type":"tracelb"' in line.replace(" ", ""))
    except OSError:
        open(out, "w").close()
    print(json.dumps({
        "schema": SCHEMA, "worker_version": WORKER_VERSION, "host": cfg.get("host", ""),
        "scamper": _version(), "exit_code": proc.returncode, "timed_out": timed_out,
        "duration_s": round(duration, 3), "traces": traces, "out": out, "sha256": _sha256(out),
        "stderr": err.decode(errors="replace")[-1000:],
    }))
    return 0 if proc.returncode == 0 or timed_out else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
