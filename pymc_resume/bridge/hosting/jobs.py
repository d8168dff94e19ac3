"""Independent runs side by side (`--jobs N`), their results taken in a fixed order.

A battery's scenarios, a profile's fuzz shards, the replays that confirm each violated clause:
each runs on hosts of its own, in a work folder (and database schema) of its own, and spends
its time waiting on its hosts (a pipe, a pidfd). So threads of the bridge run them side by
side, `jobs` at a time, while the hosts do the work. `in_order` hands the results back in the
tasks' order, never in the order they finished: what a run makes of them (which violation is
recorded first, which repro is kept) then does not depend on N or on scheduling, and `--jobs 1`
and `--jobs 2` give the same verdicts.

With `jobs` 1 the tasks run one after another in the calling thread, as they always did.
A consumer that stops taking results (a battery whose adapter failed) or an exception in the
calling thread (Ctrl-C, SIGTERM) sets `cancelled`, which the tasks check between their steps,
and the tasks already started are waited for, so that every session closes its hosts and
removes its folder before the run goes on or ends.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TypeVar

T = TypeVar("T")


class Cancelled(BaseException):
    """Raised in a task that checks `cancelled` after the run stopped taking its results: a
    BaseException, so that nothing on its way (Hypothesis included) takes it for a failure."""


def check(cancelled: threading.Event | None) -> None:
    """Raise Cancelled if `cancelled` is set: call it between a task's steps."""
    if cancelled is not None and cancelled.is_set():
        raise Cancelled()


def in_order(
    tasks: Sequence[Callable[[], T]], jobs: int, cancelled: threading.Event | None = None
) -> Iterator[T]:
    """Run `tasks`, at most `jobs` at a time, and yield their results in the tasks' order; a
    task's exception is raised at its turn. See the module docstring."""
    if jobs <= 1:
        for task in tasks:
            yield task()
        return
    cancelled = cancelled if cancelled is not None else threading.Event()
    upcoming = iter(tasks)
    running: deque[Future[T]] = deque()
    finished = False
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="pymc-resume-job") as pool:
        try:
            for task in upcoming:
                running.append(pool.submit(task))
                if len(running) == jobs:
                    break
            while running:
                result = running.popleft().result()
                for task in upcoming:
                    running.append(pool.submit(task))
                    break
                yield result
            finished = True
        finally:
            if not finished:  # stopped early: the tasks still running stop at their next check
                cancelled.set()
                for future in running:
                    future.cancel()
        # Leaving the pool waits for every task that started: their sessions close first.


class Turns:
    """One lock that threads running Hypothesis take turns with: each holds it while it runs
    its own code (Hypothesis drawing and shrinking, the judging of a step) and lets it go
    while it waits on a host (`waiting`), which is where a fuzz run spends its time.

    Why: CPython 3.11 keeps the AST builder's recursion depth per interpreter, not per thread,
    so two threads parsing at once can fail with "SystemError: AST constructor recursion depth
    mismatch" (python/cpython#106905); Hypothesis parses the source of every module imported
    since its last example, for constants to draw. Taking turns keeps everything but the waits
    on one thread at a time, whatever a library does in between, and the waits still overlap.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @contextmanager
    def turn(self) -> Iterator[None]:
        with self._lock:
            yield

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Let the others run while this thread waits (it holds its turn on entry and exit)."""
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()


def turns_for(jobs: int) -> Turns | None:
    """Turns for `jobs` threads side by side; None for one (nothing to take turns with)."""
    return Turns() if jobs > 1 else None


def waiting_on(turns: Turns | None) -> AbstractContextManager:
    return turns.waiting() if turns is not None else nullcontext()


def turn_of(turns: Turns | None) -> AbstractContextManager:
    return turns.turn() if turns is not None else nullcontext()
