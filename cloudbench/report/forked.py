"""One call run in a forked child beside the parent: the report's single-threaded tail on the second core.

``cloudbench report`` ends in work that holds the GIL (report.json encoded by the json module, the
figures drawn to SVG and PNG by matplotlib): threads cannot share it, a pool of fresh processes would
import matplotlib and receive a 17 MB report for every run. A child forked once the report is built
shares the report and the imported modules with its parent (nothing is sent to it), does its part and
returns one picklable value, or its exception, through a pipe.

The child never returns into the parent's code: it leaves with :func:`os._exit`, so it runs no atexit
handler and flushes none of the parent's buffers twice (the parent flushes them before forking). It
receives the terminal's Ctrl-C as its parent does, and :meth:`Forked.stop` (leaving the ``with`` block on
an error) ends and reaps it, so no child outlives the command. Linux forks; where :func:`os.fork` is
missing the call runs in the parent, in order.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")

CAN_FORK = hasattr(os, "fork")

WAKE_S = 0.2
"""How often :meth:`Forked.result` wakes from its wait on the child to let a signal's handler run."""

STOP_GRACE_S = 5.0
"""How long :meth:`Forked.stop` lets a child clean up after SIGTERM before it kills it (a C call
such as a PNG's rasterising finishes first: well under a second)."""


class Forked(Generic[T]):
    """``fn()`` running in a forked child from construction on; :meth:`result` waits for its value
    (or raises its exception in the parent). Use as a context manager: leaving the block ends the
    child if its result was not taken (on an error, Ctrl-C included)."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self.pid: int | None = None
        self._fd: int | None = None
        self._value: tuple[bool, Any] | None = None
        if not CAN_FORK:
            self._value = _outcome(fn)
            return
        sys.stdout.flush()  # the child inherits the buffers: empty, nothing is printed twice
        sys.stderr.flush()
        r, w = os.pipe()
        _freeze()
        try:
            pid = os.fork()
        except BaseException:
            _thaw()
            raise
        if pid == 0:  # the child
            os.close(r)
            _child(fn, w)  # never returns
        os.close(w)
        self.pid, self._fd = pid, r

    def result(self) -> T:
        """The child's value, or its exception raised here (with the child's traceback as a note)."""
        if self._value is None:
            assert self._fd is not None
            chunks = []
            try:
                while chunk := _read_when_ready(self._fd):
                    chunks.append(chunk)
            except BaseException:  # Ctrl-C while waiting: the child is ended, not waited for
                self.stop()
                raise
            self._reap()
            data = b"".join(chunks)
            self._value = _load(data) if data else (False, ChildProcessError(
                f"the forked child of cloudbench (pid {self.pid}) ended without a result (killed?)"))
        ok, value = self._value
        if not ok:
            raise value
        return cast("T", value)

    def stop(self) -> None:
        """End the child if it is still running and reap it: SIGTERM, which the child turns into
        :class:`SystemExit` so that its files' cleanup runs (a temporary report.json removed), then
        SIGKILL after :data:`STOP_GRACE_S`."""
        if self._fd is None:
            return
        assert self.pid is not None
        os.kill(self.pid, signal.SIGTERM)  # a zombie takes the signal: the pid is ours until reaped
        deadline = time.monotonic() + STOP_GRACE_S
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(0.01)
        os.close(self._fd)
        self._fd = None
        _thaw()

    def _reap(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            assert self.pid is not None
            os.waitpid(self.pid, 0)
            _thaw()

    def __enter__(self) -> Forked[T]:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_frozen = 0
"""Children forked and not yet reaped, while the parent's objects are frozen (:func:`_freeze`)."""


def _freeze() -> None:
    """Move the parent's objects out of the collector's reach while a child shares its pages: a
    full collection in the parent writes to every tracked object's header, and each page it
    writes to is then copied (copy-on-write), the parent's heap page by page (the ``gc.freeze``
    the Python documentation advises before a fork without exec)."""
    global _frozen
    if not _frozen:
        gc.freeze()
    _frozen += 1


def _thaw() -> None:
    """The last child reaped: the frozen objects are collected again as before."""
    global _frozen
    _frozen -= 1
    if not _frozen:
        gc.unfreeze()


def _read_when_ready(fd: int) -> bytes:
    """The next bytes from ``fd`` (b"" at its end), waiting in steps of :data:`WAKE_S`.

    A blocking ``os.read`` can miss a Ctrl-C: Python runs a signal's handler between bytecodes,
    and a read is interrupted only when the signal reaches the main thread while it sits in the
    system call. A signal taken by another thread (the report's threads, pyarrow's), or one that
    lands just before the call, left the parent waiting for the child's whole run."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while not poller.poll(WAKE_S * 1000):  # returning to the interpreter runs pending handlers
        pass
    return os.read(fd, 1 << 20)


def _outcome(fn: Callable[[], T]) -> tuple[bool, Any]:
    try:
        return True, fn()
    except Exception as e:  # handed to the caller, who raises it
        return False, e


def _child(fn: Callable[[], Any], fd: int) -> None:
    """Run ``fn``, write its pickled outcome to ``fd`` and leave the process."""
    code = 0
    signal.signal(signal.SIGTERM, _exit_on_term)
    # a collection would write to every tracked object's header, copying the parent's whole heap
    # (copy-on-write); the child's garbage goes with it at its exit
    gc.disable()
    try:
        try:
            data = pickle.dumps((True, fn()), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as e:
            data = _dump_error(e)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _dump_error(e: BaseException) -> bytes:
    """An exception as its class, arguments and attributes: cloudbench's errors take other arguments
    than the message they keep, so plain pickling cannot rebuild them."""
    e.add_note("in cloudbench's forked child:\n" + "".join(traceback.format_exception(e)).rstrip())
    try:
        return pickle.dumps((False, (type(e), e.args, vars(e))), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        text = "".join(traceback.format_exception(e))
        return pickle.dumps((False, (RuntimeError, (f"cloudbench's forked child failed:\n{text}",), {})))


def _load(data: bytes) -> tuple[bool, Any]:
    ok, value = pickle.loads(data)
    if ok:
        return True, value
    cls, args, attrs = value
    e = cls.__new__(cls, *args)
    e.args = args
    e.__dict__.update(attrs)
    return False, e
