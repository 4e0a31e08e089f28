"""Print a host's facts as one JSON line (stdlib only; runs on measured hosts).

Usage: python3 facts.py ADDRESS  -- ADDRESS is the host's experiment address.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys


def _iface_of(address: str) -> str:
    try:
        out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                             check=False).stdout
    except OSError:
        return ""
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[3].split("/")[0] == address:
            return parts[1].split("@")[0]
    return ""


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _version(cmd: list[str]) -> str:
    if shutil.which(cmd[0]) is None:
        return ""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (p.stdout or p.stderr).strip().splitlines()
    return text[0] if text else ""


def main() -> int:
    address = sys.argv[1] if len(sys.argv) > 1 else ""
    iface = _iface_of(address)
    facts = {
        "kernel": platform.release(),
        "python": platform.python_version(),
        "iface": iface,
        "mtu": int(_read(f"/sys/class/net/{iface}/mtu") or 0) if iface else 0,
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "cpus": os.cpu_count(),
        "tools": {
            "nuttcp": _version(["nuttcp", "-V"]),
            "iperf3": _version(["iperf3", "--version"]),
            "scamper": _version(["scamper", "-v"]),
        },
    }
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
