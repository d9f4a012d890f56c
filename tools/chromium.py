"""A real headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
commands on fd 3, replies on fd 4, NUL-separated JSON): the dashboard's browser tests and its
screenshots (`tools.screenshots`) use it.

No driver package: the Debian Chromium that CI installs is all it needs (Playwright and Selenium
pin or download browser builds of their own, which cannot be fetched here). Every request a page
makes is recorded, so a test can assert that nothing came from the network.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--remote-debugging-pipe",
]


class BrowserError(RuntimeError):
    """The browser answered a command with an error, or a page's script threw."""


class Chromium:
    """One headless Chromium with one page (a tab) of `width` x `height` CSS pixels."""

    def __init__(self, tmp_path: Path, width: int = 1400, height: int = 1000) -> None:
        exe = shutil.which("chromium")
        if exe is None:
            raise FileNotFoundError("chromium is not on PATH (Debian package `chromium`)")
        cmd_r, self._cmd_w = os.pipe()
        self._res_r, res_w = os.pipe()
        log = open(tmp_path / "chromium.log", "wb")  # noqa: SIM115 (closed in close())
        argv = [exe, *FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--window-size={width},{height}"]
        # The protocol pipe must be fds 3 and 4 in the browser: bash's redirections put them there.
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$@" 3<&{cmd_r} 4>&{res_w}', "chromium", *argv],
                                     pass_fds=(cmd_r, res_w), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        os.close(cmd_r)
        os.close(res_w)
        self._log = log
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.requests: list[str] = []
        self.errors: list[str] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for method in ("Page.enable", "Runtime.enable", "Network.enable"):
            self.send(method, session=self.session)
        self.resize(width, height)

    # -- protocol --------------------------------------------------------------------------------
    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._res_r], [], [], left)[0]:
                raise TimeoutError("no reply from chromium")
            chunk = os.read(self._res_r, 1 << 16)
            if not chunk:
                raise BrowserError("chromium closed the pipe (see chromium.log)")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        msg = json.loads(raw)
        if "method" in msg:
            self._event(msg)
        return msg

    def _event(self, msg: dict[str, Any]) -> None:
        self.events.append(msg)
        params = msg.get("params", {})
        if msg["method"] == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif msg["method"] == "Runtime.exceptionThrown":
            self.errors.append(json.dumps(params.get("exceptionDetails", {}))[:2000])
        elif msg["method"] == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(json.dumps(params.get("args", []))[:2000])

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None,
             timeout: float = 60) -> dict[str, Any]:
        """Send one command and return its result."""
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def wait_event(self, method: str, since: int, timeout: float = 60) -> dict[str, Any]:
        """The first event `method` at or after index `since` of `events`, waiting for it."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events[since:]:
                if e["method"] == method:
                    return e
            since = len(self.events)
            self._read(max(deadline - time.monotonic(), 0.01))

    # -- page --------------------------------------------------------------------------------------
    def resize(self, width: int, height: int) -> None:
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=self.session)

    def open(self, url: str, *, ready: str = "true", timeout: float = 60) -> None:
        """Navigate and wait for the load event, then until the JS expression `ready` is true."""
        if self.evaluate("location.href.split('#')[0]") == url.split("#")[0]:
            self.open("about:blank")  # a new fragment alone would not load the page again
        since = len(self.events)
        self.send("Page.navigate", {"url": url}, session=self.session)
        self.wait_event("Page.loadEventFired", since, timeout)
        self.wait_for(ready, timeout)

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression!r} stayed false; page errors: {self.errors}")
            time.sleep(0.05)

    def evaluate(self, expression: str) -> Any:
        """The value of a JS expression in the page (promises awaited)."""
        out = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                        session=self.session)
        if "exceptionDetails" in out:
            raise BrowserError(f"{expression!r}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def mouse(self, kind: str, x: float, y: float, *, button: str = "none") -> None:
        """A real input event: kind is mouseMoved, mousePressed or mouseReleased."""
        self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": button,
                                               "clickCount": 1 if button != "none" else 0}, session=self.session)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False},
                         session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (BrowserError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        for fd in (self._cmd_w, self._res_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
