"""SIGTERM delivered like Ctrl-C, and an event loop it cannot cut in half.

Outside an event loop, SIGTERM raises :class:`Interrupted` (a ``KeyboardInterrupt``) wherever
the main thread is, so the cleanup Ctrl-C runs runs for it too. Inside one, raising wherever
the signal lands is unsafe: it can stop a loop callback half-way (a child's exit, a read), and
the cancelled tasks' cleanup then waits forever for what that callback would have done. So
:func:`run_async` lets the loop take SIGTERM as a callback of its own, between the others: the
main task is cancelled, its cleanup runs on a whole loop, and :class:`Interrupted` is raised
once it has (what ``asyncio.run`` does for Ctrl-C).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Coroutine, Iterator
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


class Interrupted(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so that the same cleanup runs."""


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Interrupted` (a KeyboardInterrupt): the same cleanup runs."""
    old = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``; under :func:`signals_as_interrupts`, SIGTERM cancels ``coro`` at a
    point between two loop callbacks and, once its cleanup has run, raises :class:`Interrupted`."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not _raise_interrupted):
        return asyncio.run(coro)
    return asyncio.run(_cancelled_by_sigterm(coro))


async def _cancelled_by_sigterm(coro: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    received: list[int] = []

    def on_sigterm() -> None:
        received.append(signal.SIGTERM)
        task.cancel()

    # Until here, and again after the ``finally``, a SIGTERM raises where it lands, as before.
    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        result = await coro
    except asyncio.CancelledError:
        if received:
            raise Interrupted("signal SIGTERM") from None
        raise
    finally:
        # removing leaves SIG_DFL behind, so ours goes back, with SIGTERM held meanwhile (not lost)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            loop.remove_signal_handler(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _raise_interrupted)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    if received:  # the coroutine swallowed its cancellation: the signal still ends the command
        raise Interrupted("signal SIGTERM")
    return result
