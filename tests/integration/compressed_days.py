"""Three compressed-day campaigns run side by side once per session, for the tests that need one.

Each is 20 short echo runs every P/10 over two compressed days of P = 60 s (a fresh testbed every
run), the WAN link a-b of 5 ms one-way delay anchored to UTC:

- ``sine``: a daily sine of 2 ms one-way amplitude on the link, no step;
- ``step``: a sine of 1 ms and a step of the one-way delay by +1.5 ms (+3 ms RTT) half-way (a
  UTC-anchored step between runs 10 and 11);
- ``flat``: neither.

`test_campaign.py`'s diurnal test reads ``sine`` and ``flat``; `test_changes_testbed.py`'s
change-point test reads ``step`` and, as its campaign without a step, ``sine``. Each test ran its
own pair of such campaigns before (about two minutes each); running the three at once once costs
one. All three start on the same UTC second, so the step's time is known before they start.

They mostly wait (20 slots 6 s apart), so the suite does not hold a worker for them: the first
worker to collect a test that reads them starts them in a process of their own
(``start_in_background``, from tests/integration/conftest.py) and runs its other tests; the
scheduler puts the tests that read them last in their lane, where ``wait_in_background`` finds
them finished. The session's controller stops the process if it is still running at the end
(tests/conftest.py, ``BACKGROUND_PID``).

Run on their own (what the background process does; the campaigns stay in DIR)::

    .venv/bin/python -m tests.integration.compressed_days DIR
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.conftest import BACKGROUND_PID, process_running
from tests.paths import ROOT

PERIOD = 60.0  # the compressed day
EVERY = PERIOD / 10
COUNT = 20
SINE_MS = 2.0  # one-way amplitude of ``sine``
STEP_SINE_MS = 1.0  # one-way amplitude of ``step``'s sine
STEP_RTT_US = 3000.0  # ``step``'s step, in RTT

SPEC = """\
name: {name}
seed: 3
repetitions: 1
providers:
  netns:
    regions:
      a: {{zones: {{a-1: {{subnets: {{sa: {{hosts: 1}}}}}}}}}}
      b: {{zones: {{b-1: {{subnets: {{sb: {{hosts: 1}}}}}}}}}}
wan:
  links:
    - between: [a, b]
      delay: 5ms
{weather}
workloads:
  - {{kind: echo, name: echo, rate: 20, duration: 2s, warmup: 0.5s, timeout: 1s, self_loop: false}}
schedule:
  start: "{start}"
  every: {every:g}s
  count: {count}
  slip: {slip:g}s
  cover: none
  day: {period:g}s
"""


@dataclass(frozen=True)
class CompressedDays:
    """The campaigns' directories and the step's UTC time (epoch seconds)."""

    sine: Path
    step: Path
    flat: Path
    step_at: float


def run_compressed_days(where: Path) -> CompressedDays:
    """Start the three campaigns, run them to the end at once, and check nothing of them is left."""
    from tests.integration.test_campaign import ROOT, cli, leftovers  # (it imports this module's constants)

    # the runners are started right after `campaign start`: 20 s is room for three Python start-ups
    # on a loaded machine (a runner later than the slip misses the first slot)
    start = math.ceil(time.time()) + 20
    step_at = start + 10 * EVERY + 4.0  # after run 10 (its 2.5 s of echoes), before run 11
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
    weather = {
        "sine": f"      periodic: [{{amplitude: {SINE_MS}ms, period: {PERIOD:g}s, phase: 7s, anchor: utc}}]",
        "step": (f"      periodic: [{{amplitude: {STEP_SINE_MS}ms, period: {PERIOD:g}s, phase: 7s, anchor: utc}}]\n"
                 f"      steps: [{{at: {step_at}, delay: {5 + STEP_RTT_US / 2000:g}ms, anchor: utc}}]"),
        "flat": "",
    }
    env = {**os.environ, "CLOUDBENCH_SECRETS_DIR": str(where / "secrets")}
    for name, w in weather.items():
        spec = where / f"{name}.yaml"
        spec.write_text(SPEC.format(name=name, weather=w, start=iso, every=EVERY, count=COUNT, slip=EVERY / 2,
                                    period=PERIOD))
        subprocess.run(cli("campaign", "start", str(spec), "--dir", str(where / name)), check=True, cwd=ROOT,
                       capture_output=True, timeout=60, env=env)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name in weather:
            with (where / f"{name}.log").open("wb") as log:
                procs[name] = subprocess.Popen(cli("campaign", "run", str(where / name)), stdout=log, stderr=log,
                                               cwd=ROOT, env=env)
        for name, p in procs.items():
            assert p.wait(timeout=COUNT * EVERY + 180) == 0, (where / f"{name}.log").read_text()[-2000:]
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=60)
    for name in weather:
        assert leftovers(where / name) == []
    return CompressedDays(sine=where / "sine", step=where / "step", flat=where / "flat", step_at=step_at)


RESULT = "result.json"  # the campaigns' CompressedDays, once they all passed
FAILURE = "failure.txt"  # why run_compressed_days failed
LOG = "background.log"
# start-up (20 s), the slots (COUNT × EVERY), the last run's teardown and the three checks: the
# synchronous run asserts its campaigns end within COUNT × EVERY + 180 s of their start
BACKGROUND_TIMEOUT_S = 20 + COUNT * EVERY + 240
_STARTED: dict[Path, subprocess.Popen[bytes]] = {}  # the processes this one started (reaped by the wait)


def start_in_background(where: Path) -> None:
    """Start ``run_compressed_days(where)`` in a process of its own session (not in the worker's
    process group: a Ctrl-C reaches it through the controller's clean-up, which lets it tear down)."""
    with (where / LOG).open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tests.integration.compressed_days", str(where)],
                                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    (where / BACKGROUND_PID).write_text(str(proc.pid))
    _STARTED[where] = proc


def wait_in_background(where: Path) -> CompressedDays:
    """The campaigns ``start_in_background(where)`` runs, once they have passed run_compressed_days'
    checks; an AssertionError with the reason (and the log's tail) if they failed or took too long."""
    deadline = time.monotonic() + BACKGROUND_TIMEOUT_S
    while True:
        if (where / RESULT).exists():
            d = json.loads((where / RESULT).read_text())
            return CompressedDays(sine=Path(d["sine"]), step=Path(d["step"]), flat=Path(d["flat"]),
                                  step_at=float(d["step_at"]))
        if (where / FAILURE).exists():
            raise AssertionError((where / FAILURE).read_text()[-3000:])
        if _process_ended(where) and not (where / RESULT).exists():
            raise AssertionError(f"the compressed-day campaigns' process ended without a result: "
                                 f"{(where / LOG).read_text()[-3000:]}")
        assert time.monotonic() < deadline, (f"the compressed-day campaigns took over {BACKGROUND_TIMEOUT_S:.0f} s: "
                                             f"{(where / LOG).read_text()[-3000:]}")
        time.sleep(0.5)


def _process_ended(where: Path) -> bool:
    pid_file = where / BACKGROUND_PID
    own = _STARTED.get(where)
    return own.poll() is not None if own is not None else \
        pid_file.exists() and not process_running(int(pid_file.read_text()))


def wait_until_ended(where: Path) -> None:
    """Return once the campaigns ``start_in_background(where)`` runs have ended (passed, failed or
    their process gone) or their time is up; for a test that must not share the cores with them.
    Their outcome is the business of the tests that read them (:func:`wait_in_background`)."""
    deadline = time.monotonic() + BACKGROUND_TIMEOUT_S
    while not ((where / RESULT).exists() or (where / FAILURE).exists() or _process_ended(where)):
        if time.monotonic() > deadline:
            return
        time.sleep(0.5)


def _main(where: Path) -> int:
    # SIGTERM (the controller's clean-up, or a user's) ends the wait in run_compressed_days, whose
    # `finally` terminates the campaigns' runners: they tear their testbeds down
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        days = run_compressed_days(where)
    except BaseException as e:
        (where / FAILURE).write_text("".join(traceback.format_exception(e)))
        return 1
    tmp = where / f"{RESULT}.tmp"
    tmp.write_text(json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in asdict(days).items()}))
    tmp.rename(where / RESULT)
    return 0


if __name__ == "__main__":
    sys.exit(_main(Path(sys.argv[1])))
