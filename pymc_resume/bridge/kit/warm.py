"""Warm clients: long-lived client processes that serve several operations in a row.

Real clients are long-lived processes: one runs a thread until it parks, then, in the same
process, forks it or resumes it, with whatever the layer keeps in memory still there. A fresh
process per operation (`process.run_in_children`) never sees faults that live in that memory.
A `WarmClient` is such a process: forked once, it reads requests from a pipe and serves them
one at a time with `serve(request, barrier)` (an object it built once, so its memory carries
over), writing one JSON reply per request. A request whose operation SIGKILLs the process (a
crash point) is reported `killed`, and the client is gone: the adapter starts a new one for
the next request with that client id, as a restarted client would be.

A warm client serves one operation at a time and is never held at a barrier (concurrent
deliveries run in fresh processes), so its `Barrier` never waits.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable

from pymc_resume.bridge.kit.process import FAILED, KILLED, RETURNED, Barrier, ChildResult, die_with_parent

Serve = Callable[[dict, Barrier], object]


class WarmClient:
    """One long-lived client process; `call` serves a request in it."""

    def __init__(self, serve: Serve) -> None:
        request_read, self._request_write = os.pipe()
        self._reply_read, reply_write = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with_parent(parent)  # never outlive the adapter's host, even a SIGKILLed one
            os.close(self._request_write)
            os.close(self._reply_read)
            _serve_forever(serve, request_read, reply_write)
        os.close(request_read)
        os.close(reply_write)
        self.pid = pid
        self._replies = os.fdopen(self._reply_read, "rb")
        self.alive = True

    def call(self, request: dict) -> ChildResult:
        """Serve `request` in the client process; a client killed while serving it is gone."""
        os.write(self._request_write, (json.dumps(request) + "\n").encode())
        line = self._replies.readline()
        if not line:  # the process died serving the request
            status = os.waitpid(self.pid, 0)[1]
            self.alive = False
            self._close_pipes()
            if os.WIFSIGNALED(status):
                return ChildResult(KILLED, signal=os.WTERMSIG(status))
            return ChildResult(FAILED, error=f"warm client exited with status {os.WEXITSTATUS(status)}")
        message = json.loads(line)
        if "error" in message:
            return ChildResult(FAILED, error=message["error"])
        return ChildResult(RETURNED, value=message["value"])

    def stop(self) -> None:
        """Kill and reap the process (idempotent)."""
        if not self.alive:
            return
        self.alive = False
        self._close_pipes()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)

    def _close_pipes(self) -> None:
        for close in (self._replies.close, lambda: os.close(self._request_write)):
            try:
                close()
            except OSError:
                pass


def _serve_forever(serve: Serve, request_read: int, reply_write: int) -> None:
    """The client process's loop; never returns. It exits when its request pipe closes."""
    never_waits = Barrier(-1, -1, synchronized=False)
    try:
        with os.fdopen(request_read, "rb") as requests:
            for line in requests:
                try:
                    message = {"value": serve(json.loads(line), never_waits)}
                except BaseException as error:
                    message = {"error": f"{type(error).__name__}: {error}"}
                os.write(reply_write, (json.dumps(message) + "\n").encode())
    finally:
        os._exit(0)
