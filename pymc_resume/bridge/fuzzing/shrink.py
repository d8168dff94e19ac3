"""A last shrinking pass on a failing step list, after Hypothesis's.

Hypothesis shrinks the choice sequence behind a rule sequence; with rules whose arguments
depend on what the adapter shows (which threads exist, which are crashed), some deletions do not
line up and a shrunk example can keep steps it does not need. This pass works on the steps
themselves: it deletes one step at a time, then simplifies one (no crash, thread 0), replays the
candidate and keeps it when the same clause is still violated, until nothing more goes or its
budget (a number of replays, and a deadline: `--shrink-seconds`) is spent. A candidate is never
longer than what it came from, so a repro is never longer than the failing example it started as.
Every kept candidate was replayed, so the result is itself a confirmed repro. Only candidates a
client could have issued are tried (`well_formed`): a thread is started before anything else
is done to it, so a repro never resumes, updates or forks a thread that never ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from pymc_resume.bridge.judging.session import AdapterFailure, Violation

Replay = Callable[[list[dict]], "Violation | None"]


def well_formed(steps: list[dict]) -> bool:
    """Every step names a thread that exists (the root, or a fork made earlier), and every step
    but `start` names a thread that was started."""
    threads, started = 1, set()
    for step in steps:
        t = step["thread"]
        if t >= threads:
            return False
        if step["action"] == "start":
            started.add(t)
        elif t not in started:
            return False
        if step["action"] == "fork":
            threads += 1
    return True


def _simplifications(steps: list[dict]) -> Iterator[list[dict]]:
    """Each step made simpler in turn: no crash, or thread 0."""
    for i, step in enumerate(steps):
        if step.get("crash") is not None:
            yield steps[:i] + [{**step, "crash": None}] + steps[i + 1 :]
        if step["thread"] != 0:
            yield steps[:i] + [{**step, "thread": 0}] + steps[i + 1 :]


class _Search:
    """The current best step list and its violation, with the replay budget of `minimize`."""

    def __init__(self, steps, best, clause_id, replay, budget, deadline, on_better) -> None:
        self.steps, self.best = steps, best
        self.clause_id, self.replay = clause_id, replay
        self.tries, self.budget, self.deadline, self.on_better = 0, budget, deadline, on_better

    def spent(self) -> bool:
        return self.tries >= self.budget or (self.deadline is not None and time.monotonic() >= self.deadline)

    def attempt(self, candidate: list[dict]) -> bool:
        """Replay `candidate` (if a client could issue it); keep it when the clause still fails."""
        if not well_formed(candidate):
            return False
        self.tries += 1
        seen = _reproduces(candidate, self.clause_id, self.replay)
        if seen is None:
            return False
        self.steps, self.best = candidate, seen
        if self.on_better is not None:
            self.on_better(seen)
        return True

    def deletion_sweep(self) -> bool:
        """Delete each step in turn, from the last to the first, going on from where a deletion
        worked (one replay per step, not one per step and success). Whether any worked."""
        improved = False
        i = len(self.steps) - 1
        while i >= 0 and not self.spent():
            if self.attempt(self.steps[:i] + self.steps[i + 1 :]):
                improved = True
            i -= 1
        return improved

    def simplification(self) -> bool:
        """The first simplification that still fails, kept. Whether there was one."""
        for candidate in _simplifications(self.steps):
            if self.spent():
                return False
            if self.attempt(candidate):
                return True
        return False


def minimize(
    steps: list[dict],
    clause_id: str,
    replay: Replay,
    budget: int = 60,
    *,
    deadline: float | None = None,
    on_better: Callable[[Violation], None] | None = None,
    confirmed: Violation | None = None,
) -> tuple[list[dict], Violation | None]:
    """The simplest step list found that still violates `clause_id`, and its violation (None
    when even `steps` no longer reproduces; `confirmed`: its replay was seen already).

    At most `budget` candidate replays, none started after `deadline` (a `time.monotonic()`
    value); `on_better` gets each better violation as soon as its replay showed it (so that a
    run stopped in the middle keeps the best repro found so far). Deletion sweeps come first,
    then simplifications, each followed by deletions again, until nothing more goes.
    """
    current = [{k: v for k, v in step.items() if k != "outcome"} for step in steps]
    best = confirmed or _reproduces(current, clause_id, replay)
    if best is None:
        return current, None
    search = _Search(current, best, clause_id, replay, budget, deadline, on_better)
    while not search.spent():
        while search.deletion_sweep() and not search.spent():
            pass
        if not search.simplification():
            break
    return search.steps, search.best


def _reproduces(steps: list[dict], clause_id: str, replay: Replay) -> Violation | None:
    try:
        violation = replay(steps)
    except AdapterFailure:
        return None
    return violation if violation is not None and clause_id in violation.clauses else None
