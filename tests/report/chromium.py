"""Headless Chromium driven over the DevTools protocol, for the report's browser test: a small
client with no dependency, on the pipe Chromium offers (`--remote-debugging-pipe`: it reads
commands from fd 3 and writes answers and events to fd 4, each message JSON ended by a NUL), so
no port is opened and nothing crosses a network.

`Browser` starts Debian's `chromium` with the flags this machine needs (no sandbox as root, no
GPU, no background networking, which the closed network refuses) in a process group of its own,
with its profile, config and cache under a folder the test owns and its temp files in a short
folder of its own; `close()` asks it to quit, kills whatever of its group is left and removes
that folder, so a test leaves no process and no file.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-crash-reporter",
    "--remote-debugging-pipe",
)
COMMAND_FD, ANSWER_FD = 3, 4  # as Chromium's pipe mode wants them


class BrowserError(Exception):
    pass


class Browser:
    """One headless Chromium; `page()` opens a tab. Use as a context manager."""

    def __init__(self, binary: str, home: Path, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.log = home / "chromium.log"
        self._next_id = 0
        self._buffer = b""
        self.events: list[dict] = []
        home.mkdir(parents=True, exist_ok=True)
        # Chromium's temp files hold a unix socket, whose path may have at most 107 bytes: a
        # short folder of its own in the system's temp folder, removed by close().
        self.temp = tempfile.mkdtemp(prefix="chr-")
        env = {
            **os.environ,
            "HOME": str(home),
            "TMPDIR": self.temp,
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_CACHE_HOME": str(home / "cache"),
        }
        command_read, self._command = os.pipe()
        self._answers, answer_write = os.pipe()

        def wire_pipes() -> None:  # in the child, before exec: the two ends at fds 3 and 4
            read, write = os.dup(command_read), os.dup(answer_write)  # out of the way of 3 and 4
            os.dup2(read, COMMAND_FD)
            os.dup2(write, ANSWER_FD)

        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [binary, *FLAGS, f"--user-data-dir={home / 'profile'}", "about:blank"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                close_fds=False,  # fds 3 and 4 must reach Chromium; every other is close-on-exec
                preexec_fn=wire_pipes,
                start_new_session=True,  # its own process group: close() kills all of it
            )
        os.close(command_read)
        os.close(answer_write)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and wait for its answer (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._command, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for(self, event: str, session: str | None = None) -> dict:
        """The first event named `event` (of `session`), waiting for it if it has not come."""
        while True:
            for i, seen in enumerate(self.events):
                if seen.get("method") == event and (session is None or seen.get("sessionId") == session):
                    return self.events.pop(i)
            self.events.append(self._read())

    def _read(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._answers], [], [], left)[0]:
                raise BrowserError(f"no answer from Chromium within {self.timeout}s{self._said()}")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise BrowserError(
                    f"Chromium closed its pipe (exit code {self.process.poll()}){self._said()}"
                )
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _said(self) -> str:
        """The end of what Chromium wrote to stderr, for an error message."""
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "; its last words:\n" + "\n".join(lines[-15:]) if lines else ""

    def page(self, width: int, height: int, mobile: bool = False) -> Page:
        """A new tab of `width` x `height` CSS pixels (`mobile`: a phone's, which lays a page out
        at 980 pixels wide unless the page's viewport says otherwise)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Network", "Runtime"):
            page.send(f"{domain}.enable")
        page.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )
        return page

    def close(self) -> None:
        """Ask Chromium to quit, then kill and reap whatever of its process group is left."""
        try:
            if self.process.poll() is None:
                try:
                    self.send("Browser.close")
                except (BrowserError, OSError):
                    pass
                try:
                    self.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # its helpers (zygote, renderers)
            except ProcessLookupError:
                pass
            self.process.wait()
            for fd in (self._command, self._answers):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self.temp, ignore_errors=True)


class Page:
    """One tab of a `Browser`."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.browser.send(method, params, self.session)

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.browser.wait_for("Page.loadEventFired", self.session)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-able; a promise's once it
        settles)."""
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A real left click at (x, y) of the viewport."""
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}
            )

    def dialogs(self) -> list[dict]:
        """Every JavaScript dialog (alert, confirm, prompt) the page opened so far."""
        return [
            event["params"]
            for event in self.browser.events
            if event.get("method") == "Page.javascriptDialogOpening"
            and event.get("sessionId") == self.session
        ]

    def requests(self) -> list[str]:
        """The URLs of every request the page made so far."""
        return [
            event["params"]["request"]["url"]
            for event in self.browser.events
            if event.get("method") == "Network.requestWillBeSent" and event.get("sessionId") == self.session
        ]

    def screenshot(
        self, width: float, height: float, scale: float = 1.0, x: float = 0, y: float = 0
    ) -> bytes:
        """A PNG of `width` x `height` CSS pixels of the page from (`x`, `y`) (the top left by
        default; page coordinates, not the viewport's), scaled by `scale`."""
        clip = {"x": x, "y": y, "width": width, "height": height, "scale": scale}
        data = self.send(
            "Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True}
        )
        return base64.b64decode(data["data"])
