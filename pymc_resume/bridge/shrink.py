"""A last shrinking pass on a failing step list, after Hypothesis's.

Hypothesis shrinks the choice sequence behind a rule sequence; with rules whose arguments
depend on what the adapter shows (which threads exist, which are crashed), some deletions do not
line up and a shrunk example can keep steps it does not need. This pass works on the steps
themselves: it deletes one step at a time, then simplifies one (no crash, thread 0), replays the
candidate and keeps it when the same clause is still violated, until nothing more goes.
Every kept candidate was replayed, so the result is itself a confirmed repro. Only candidates a
client could have issued are tried (`well_formed`): a thread is started before anything else
is done to it, so a repro never resumes, updates or forks a thread that never ran.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pymc_resume.bridge.session import AdapterFailure, Violation

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


def _simpler(steps: list[dict]) -> Iterator[list[dict]]:
    for candidate in _candidates(steps):
        if well_formed(candidate):
            yield candidate


def _candidates(steps: list[dict]) -> Iterator[list[dict]]:
    for i in range(len(steps)):
        yield steps[:i] + steps[i + 1 :]
    for i, step in enumerate(steps):
        if step.get("crash") is not None:
            yield steps[:i] + [{**step, "crash": None}] + steps[i + 1 :]
        if step["thread"] != 0:
            yield steps[:i] + [{**step, "thread": 0}] + steps[i + 1 :]


def minimize(steps: list[dict], clause_id: str, replay: Replay, budget: int = 60) -> tuple[list[dict], Violation | None]:
    """The simplest step list found that still violates `clause_id`, and its violation (None
    when even `steps` no longer reproduces)."""
    current = [{k: v for k, v in step.items() if k != "outcome"} for step in steps]
    best = _reproduces(current, clause_id, replay)
    if best is None:
        return current, None
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in _simpler(current):
            tries += 1
            seen = _reproduces(candidate, clause_id, replay)
            if seen is not None:
                current, best, improved = candidate, seen, True
                break
            if tries >= budget:
                break
    return current, best


def _reproduces(steps: list[dict], clause_id: str, replay: Replay) -> Violation | None:
    try:
        violation = replay(steps)
    except AdapterFailure:
        return None
    return violation if violation is not None and clause_id in violation.clauses else None
