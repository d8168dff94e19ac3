"""One question answered in a child process: what the command must know of an adapter's code
(is this entry point a family, what does this constructor take) without importing it itself.

`in_child(question, timeout)` forks a child, in a process group of its own and killed by the
kernel if the command dies, that calls `question()` and sends back its result (pickled) or the
exception it raised (its class name and message). The command waits at most `timeout` seconds;
then, or when the child ends without an answer (it called `os._exit`, it was killed), the
child's whole group and every descendant is killed and reaped, and `ChildProblem` says which.
"""

from __future__ import annotations

import os
import pickle
import select
import sys
import time
from collections.abc import Callable

from pymc_resume.bridge.hosting.host import become_host, fork_holding_signals, kill_tree


class ChildProblem(Exception):
    """The child raised (`error_type`, and the message), hung or ended without an answer."""

    def __init__(self, reason: str, error_type: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error_type = error_type


def in_child(question: Callable[[], object], timeout: float | None) -> object:
    """`question()`, computed in a forked child; see the module docstring."""
    read, write = os.pipe()
    parent = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = fork_holding_signals()
    if pid == 0:
        os.close(read)
        _answer(question, write, parent)  # never returns
    os.close(write)
    try:
        data = _read_all(read, timeout)
    finally:
        os.close(read)
        kill_tree(pid)
        os.waitpid(pid, 0)
    if not data:
        raise ChildProblem("ended the process it ran in")
    kind, payload = pickle.loads(data)
    if kind == "raised":
        error_type, message = payload
        raise ChildProblem(message, error_type)
    return payload


def _read_all(fd: int, timeout: float | None) -> bytes:
    deadline = None if timeout is None else time.monotonic() + timeout
    chunks = []
    while True:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise ChildProblem(f"did not finish within {timeout:g}s")
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _answer(question: Callable[[], object], write: int, parent: int) -> None:
    """In the child: answer, write, end without running the command's cleanup."""
    try:
        become_host(parent, subreaper=False)
        try:
            message = ("ok", question())
        except BaseException as error:
            message = ("raised", (type(error).__name__, str(error)))
        try:
            data = pickle.dumps(message)
        except Exception as error:
            data = pickle.dumps(("raised", (type(error).__name__, f"an answer that cannot be sent: {error}")))
        with os.fdopen(write, "wb") as out:
            out.write(data)
    finally:
        os._exit(0)
