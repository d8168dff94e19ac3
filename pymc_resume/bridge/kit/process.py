"""Real child processes for the bridge: run an operation in a fresh process, kill it with a
real SIGKILL at a chosen point, and release k processes together from a barrier.

`run_in_children(tasks, synchronized, order)` forks one child per task. A task gets a `Barrier`;
when `synchronized`, `barrier.wait()` blocks the child until every child has either reached its
barrier or finished (the parent holds the barrier, so a child that is refused before its window
never deadlocks the others). Then the waiting children are released: all at once (timing
decides which wins), or, given `order` (a permutation of the tasks), one at a time in that
order, each released only when the one before it has finished, so the order decides. A task returns a
JSON-serialisable value; a child that dies from a signal is reported `killed`.

`ControlledPoints` is a probe for runtimes with named atomic-step boundaries (see
`pymc_resume.runtime.workflow.Probe`): it SIGKILLs its own process at the crash point and waits
at the barrier at the race window.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import threading
from collections.abc import Callable, Container

import attrs

from pymc_resume.bridge.adapter import CRASHED, OK, CrashPoint, Outcome

PR_SET_PDEATHSIG = 1
KILLED = "killed"
RETURNED = "returned"
FAILED = "failed"


@attrs.frozen
class ChildResult:
    status: str  # RETURNED, FAILED (the task raised) or KILLED (died from a signal)
    value: object = None
    error: str = ""
    signal: int | None = None


class Barrier:
    """The child's side of the barrier."""

    def __init__(self, report_fd: int, go_fd: int, synchronized: bool) -> None:
        self._report_fd = report_fd
        self._go_fd = go_fd
        self._synchronized = synchronized

    def wait(self) -> None:
        if not self._synchronized:
            return
        os.write(self._report_fd, b"W\n")
        os.read(self._go_fd, 1)


class ControlledPoints:
    """Kill this process at `crash`; wait at the barrier the first time `window` is reached."""

    def __init__(
        self, crash: CrashPoint | None, window: str | None = None, barrier: Barrier | None = None
    ) -> None:
        self.crash = crash
        self.window = window
        self.barrier = barrier
        self._waited = False

    def at(self, point: str, stage: int) -> None:
        if self.window == point and self.barrier is not None and not self._waited:
            self._waited = True
            self.barrier.wait()
        if self.crash is not None and self.crash.when == point and self.crash.stage == stage:
            os.kill(os.getpid(), signal.SIGKILL)


class ClientControl(ControlledPoints):
    """The controlled points of one client operation run by a framework adapter in a child
    process: the thread, operation and role it serves, and the stages it has executed, so
    that the adapter's persistence hook can kill it right after a stage it ran was stored."""

    def __init__(
        self,
        thread: int,
        op: str,
        role: str,
        crash: CrashPoint | None,
        window: str | None,
        barrier: Barrier | None,
    ) -> None:
        super().__init__(crash, window, barrier)
        self.thread, self.op, self.role = thread, op, role
        self.executed: set[int] = set()

    def committed(self, stages: Container[int]) -> None:
        """The framework stored the results of `stages`: kill at an after-commit crash point
        among them, once this process has executed that stage."""
        crash = self.crash
        if (
            crash is not None
            and crash.when == "after-commit"
            and crash.stage in stages
            and crash.stage in self.executed
        ):
            os.kill(os.getpid(), signal.SIGKILL)


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this (just forked) process when its parent dies (Linux
    `PR_SET_PDEATHSIG`; elsewhere nothing), and exit now if the parent `parent` is gone already.

    An operation's child must not outlive the adapter's host process: when the bridge kills the
    host's group it dies anyway, but when the bridge itself is SIGKILLed only the host is told
    (see `bridge/hosting/host.py`), and an operation stuck at a barrier or in a hung node would run on."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(0)


def _child(task: Callable[[Barrier], object], barrier: Barrier, report_fd: int, parent: int) -> None:
    """Runs in the forked child; never returns."""
    try:
        die_with_parent(parent)
        try:
            message = {"value": task(barrier)}
        except BaseException as error:
            message = {"error": f"{type(error).__name__}: {error}"}
        _wait_for_threads()
        os.write(report_fd, (json.dumps(message) + "\n").encode())
    finally:
        os._exit(0)


def _wait_for_threads() -> None:
    """Finish as a client process that returns from its work exits: after its non-daemon
    threads and thread-pool executors are done (a framework's background checkpoint writes,
    for instance). `os._exit` alone would cut them off, losing writes no real process loses.

    `threading._shutdown` is what the interpreter itself runs at exit for this.
    """
    try:
        threading._shutdown()
    except Exception:
        pass


def run_in_children(
    tasks: list[Callable[[Barrier], object]],
    synchronized: bool = False,
    order: list[int] | None = None,
) -> list[ChildResult]:
    """Run each task in its own forked process; see the module docstring.

    If the parent is interrupted (a step timeout raises in it), every child still running is
    SIGKILLed and reaped before the exception propagates.
    """
    children = []  # (pid, report read end, go write end)
    statuses: dict[int, int] = {}  # pid -> wait status, once reaped
    try:
        for task in tasks:
            report_read, report_write = os.pipe()
            go_read, go_write = os.pipe()
            parent = os.getpid()
            pid = os.fork()
            if pid == 0:
                os.close(report_read)
                os.close(go_write)
                _child(task, Barrier(report_write, go_read, synchronized), report_write, parent)
            os.close(report_write)
            os.close(go_read)
            children.append((pid, report_read, go_write))
        release = None if order is None else [children[i][1] for i in order]
        buffers = _collect(children, release)
        for pid, _, _ in children:
            statuses[pid] = os.waitpid(pid, 0)[1]
        return [_result(statuses[pid], buffers[fd]) for pid, fd, _ in children]
    finally:
        for pid, report_read, go_write in children:
            for fd in (report_read, go_write):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if pid not in statuses:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)


def _collect(children, release: list[int] | None = None) -> dict[int, bytes]:
    """Read every child's reports until all have exited, running the barrier on the way:
    when every child is at its barrier or finished, release all waiting ones, or (`release`: the
    children's report fds in release order) the first waiting one in that order."""
    buffers = {fd: b"" for _, fd, _ in children}
    open_fds = set(buffers)
    waiting: set[int] = set()
    go_of = {fd: go for _, fd, go in children}
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [])
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
                waiting.discard(fd)
                continue
            buffers[fd] += chunk
            while buffers[fd].startswith(b"W\n"):
                buffers[fd] = buffers[fd][2:]
                waiting.add(fd)
        if waiting and waiting == open_fds:  # every child is at its barrier or finished
            chosen = set(waiting) if release is None else {next(fd for fd in release if fd in waiting)}
            for fd in chosen:
                os.write(go_of[fd], b"g")
            waiting -= chosen
    return buffers


def _result(status: int, output: bytes) -> ChildResult:
    text = output.strip()
    if os.WIFSIGNALED(status):
        return ChildResult(KILLED, signal=os.WTERMSIG(status))
    if not text:
        return ChildResult(FAILED, error=f"child exited with status {os.WEXITSTATUS(status)} and no result")
    message = json.loads(text.splitlines()[-1])
    if "error" in message:
        return ChildResult(FAILED, error=message["error"])
    return ChildResult(RETURNED, value=message["value"])


def settle(thread: dict, result: ChildResult, framework: str) -> Outcome:
    """The outcome of an operation a child process ran for a thread, updating the thread's run
    state (`thread["run"]`): a killed child leaves it `dead` (the bridge recovers it), a returned
    one `free`, except that a refused operation leaves a dead thread dead. A child that raised
    is a failure of the framework or its adapter, not a verdict: it propagates.
    """
    if result.status == KILLED:
        thread["run"] = "dead"
        return Outcome(CRASHED, f"killed by signal {result.signal}")
    if result.status != RETURNED:
        raise RuntimeError(f"{framework} failed in a child process: {result.error}")
    if thread["run"] != "dead" or result.value["status"] == OK:
        thread["run"] = "free"
    return Outcome(result.value["status"], result.value["detail"], by=result.value.get("by"))
