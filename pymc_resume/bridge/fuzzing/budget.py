"""Time budgets of a `fuzz` or `profile` run: the whole run (`--max-seconds`) and the shrinking
of one violation (`--shrink-seconds`).

A budget is checked between steps and between examples, never in the middle of an adapter
call (a call has its own deadline, the step timeout), so a run overshoots its budget by at
most one step. When a budget runs out, `BudgetSpent` (a BaseException, so that Hypothesis
stops at once instead of treating it as a failure to shrink) unwinds the example; the run then
reports everything found so far.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import attrs


class BudgetSpent(BaseException):
    """A time budget ran out: `whole_run` when it was the run's, else a shrink's."""

    def __init__(self, whole_run: bool) -> None:
        super().__init__("the run's time budget ran out" if whole_run else "the shrink's time budget ran out")
        self.whole_run = whole_run


@attrs.define
class Budget:
    """`max_seconds` for the whole run and `shrink_seconds` for each shrinking pass (None: no
    limit), measured from `started`."""

    max_seconds: float | None = None
    shrink_seconds: float | None = None
    started: float = attrs.Factory(time.monotonic)
    interrupted: Callable[[], BaseException] | None = None  # set by a signal: see `stop_on_signal`

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def deadline(self) -> float | None:
        return None if self.max_seconds is None else self.started + self.max_seconds

    def spent(self) -> bool:
        deadline = self.deadline()
        return deadline is not None and time.monotonic() >= deadline

    def shrink_deadline(self, share: float = 1.0) -> float | None:
        """When a shrinking pass that starts now must stop: after `shrink_seconds`, and never
        after `share` of the time the run has left (the rest is for what comes after it)."""
        now = time.monotonic()
        ends = []
        if self.shrink_seconds is not None:
            ends.append(now + self.shrink_seconds)
        deadline = self.deadline()
        if deadline is not None:
            ends.append(now + max(0.0, deadline - now) * share)
        return min(ends) if ends else None

    def check(self, shrink_until: float | None = None) -> None:
        """Raise BudgetSpent when the run's budget, or the shrink ending at `shrink_until`, ran out
        (or what a signal asked for, see `stop_on_signal`)."""
        if self.interrupted is not None:
            raise self.interrupted()
        if self.spent():
            raise BudgetSpent(whole_run=True)
        if shrink_until is not None and time.monotonic() >= shrink_until:
            raise BudgetSpent(whole_run=False)

    def stopped_reason(self) -> str:
        return f"the --max-seconds budget of {self.max_seconds:g}s ran out"


def past(deadline: float | None) -> bool:
    """Whether `deadline` (a `time.monotonic()` value, or None for none) has passed."""
    return deadline is not None and time.monotonic() >= deadline


@contextmanager
def stop_on_signal(budget: Budget, signum: int, exception: Callable[[], BaseException]) -> Iterator[None]:
    """While the body runs, signal `signum` raises `exception()` where the run is, and also
    marks the budget, so that the next check raises it again: a raise from a signal handler
    can land where it is swallowed (a garbage-collector callback, a `__del__`), and a run must
    not go on after SIGTERM because of that."""

    def handler(signum, frame):
        budget.interrupted = exception
        raise exception()

    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)
