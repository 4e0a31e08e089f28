"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages ending in NUL on file descriptors 3 and 4), so no websocket library is needed.

:func:`render_page` opens a file, waits for it to load, and returns what the page did:
console messages and exceptions, requests other than ``file:``/``data:``, failed loads,
the figures' boxes and a full-page screenshot (PNG bytes).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIGURE_BOXES = """JSON.stringify({
  height: document.documentElement.scrollHeight,
  boxes: [...document.querySelectorAll('figure svg')].map(e => {
    const r = e.getBoundingClientRect();
    return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height, e.getAttribute('aria-label') || ''];
  })
})"""


def chromium() -> str | None:
    """The Chromium executable (Debian's ``chromium``), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageResult:
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # URLs other than file: and data:
    failed: list[str] = field(default_factory=list)
    boxes: list[tuple[float, float, float, float, str]] = field(default_factory=list)
    height: int = 0
    screenshot: bytes = b""


class _Pipe:
    def __init__(self, proc: subprocess.Popen[bytes], to_browser: int, from_browser: int) -> None:
        self.proc, self.wfd, self.rfd = proc, to_browser, from_browser
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the pipe (exit {self.proc.poll()})")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        out: dict[str, Any] = json.loads(msg)
        return out

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.wfd, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                result: dict[str, Any] = m.get("result", {})
                return result
            self.events.append(m)

    def wait_event(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for m in self.events:
            if m.get("method") == method:
                return m
        while True:
            m = self._read(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m


def render_page(page: Path, width: int = 1200) -> PageResult:
    """Load ``page`` in headless Chromium and report what happened (see the module doc)."""
    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed (scripts/setup installs it)")
    to_r, to_w = os.pipe()  # we write, chromium reads on fd 3
    from_r, from_w = os.pipe()  # chromium writes on fd 4, we read
    profile = tempfile.mkdtemp(prefix="cb-chromium-")

    def child_fds() -> None:  # in the child, before exec: the pipe ends become fds 3 and 4
        a, b = fcntl.fcntl(to_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_w, fcntl.F_DUPFD, 10)
        os.dup2(a, 3)  # inheritable; every other descriptor is close-on-exec
        os.dup2(b, 4)

    proc = subprocess.Popen(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
         "--disable-extensions", "--disable-background-networking", "--disable-sync", "--hide-scrollbars",
         f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=child_fds, close_fds=False)
    os.close(to_r)
    os.close(from_w)
    pipe = _Pipe(proc, to_w, from_r)
    result = PageResult()
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.call(f"{domain}.enable", session=session)
        pipe.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        pipe.events.clear()
        pipe.call("Page.navigate", {"url": page.resolve().as_uri()}, session=session)
        pipe.wait_event("Page.loadEventFired")
        got = pipe.call("Runtime.evaluate", {"expression": FIGURE_BOXES, "returnByValue": True}, session=session)
        info = json.loads(got["result"]["value"])
        result.height = int(info["height"])
        result.boxes = [tuple(b) for b in info["boxes"]]  # type: ignore[misc]
        shot = pipe.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": result.height, "scale": 1}}, session=session)
        result.screenshot = base64.b64decode(shot["data"])
        for m in pipe.events:
            method, params = m.get("method"), m.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                result.console_errors.append(json.dumps(params.get("args")))
            elif method == "Runtime.exceptionThrown":
                result.console_errors.append(json.dumps(params.get("exceptionDetails")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                result.console_errors.append(params["entry"].get("text", ""))
            elif method == "Network.requestWillBeSent":
                url = params.get("request", {}).get("url", "")
                if not url.startswith(("file:", "data:", "about:")):
                    result.requests.append(url)
            elif method == "Network.loadingFailed":
                result.failed.append(f"{params.get('errorText')} ({params.get('requestId')})")
        with contextlib.suppress(RuntimeError, TimeoutError):
            pipe.call("Browser.close", timeout=10)
    finally:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        os.close(to_w)
        os.close(from_r)
        shutil.rmtree(profile, ignore_errors=True)
    return result
