"""SIGTERM in an event loop (core.interrupts.run_async): it cancels the main task between two loop
callbacks, never inside one, and the command still ends with Interrupted. Each case runs in a
child process of its own (a signal to the test process would reach pytest)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# The signal lands while a loop callback runs, before the callback has done its work (here, a
# future the cleanup awaits; in a campaign, a child's exit or a read). Raised there, the
# callback is cut short and the cancelled task's cleanup waits for it forever.
CUT_SHORT = """
import asyncio, os, signal
from cloudbench.core.interrupts import Interrupted, run_async, signals_as_interrupts

async def main():
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    def callback():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):
            pass
        fut.set_result("the callback finished")
    loop.call_soon(callback)
    try:
        await asyncio.sleep(3600)
    finally:
        print(await fut, flush=True)

with signals_as_interrupts():
    try:
        run_async(main())
    except Interrupted as e:
        print("Interrupted:", e)
    print("handler after:", signal.getsignal(signal.SIGTERM).__name__)
    print("wakeup fd after:", signal.set_wakeup_fd(-1))
"""


def child(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def test_sigterm_inside_a_loop_callback_lets_it_finish_then_interrupts() -> None:
    try:
        lines = child(CUT_SHORT)
    except subprocess.TimeoutExpired:
        pytest.fail("hung: the signal cut a loop callback short and the cleanup waited for it")
    assert lines == ["the callback finished", "Interrupted: signal SIGTERM",
                     "handler after: _raise_interrupted", "wakeup fd after: -1"]


SWALLOWED = """
import asyncio, os, signal
from cloudbench.core.interrupts import Interrupted, run_async, signals_as_interrupts

async def main():
    try:
        asyncio.get_running_loop().call_later(0.05, os.kill, os.getpid(), signal.SIGTERM)
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        print("swallowed", flush=True)
    return "returned"

with signals_as_interrupts():
    try:
        print(run_async(main()))
    except Interrupted as e:
        print("Interrupted:", e)
"""


def test_a_coroutine_that_swallows_its_cancellation_still_ends_with_interrupted() -> None:
    assert child(SWALLOWED) == ["swallowed", "Interrupted: signal SIGTERM"]


PLAIN = """
import asyncio, signal
from cloudbench.core.interrupts import run_async, signals_as_interrupts

async def main():
    return signal.getsignal(signal.SIGTERM)

print(run_async(main()) is signal.SIG_DFL, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
with signals_as_interrupts():
    inside = run_async(main())
    print(inside is not signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGTERM).__name__)
    print(run_async(asyncio.sleep(0, result="ok")))
print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
"""


def test_outside_the_block_it_is_asyncio_run_and_inside_the_handler_comes_back() -> None:
    # outside: nobody's SIGTERM handler is touched; inside: the loop's while it runs, ours after
    assert child(PLAIN) == ["True True", "True _raise_interrupted", "ok", "True"]
