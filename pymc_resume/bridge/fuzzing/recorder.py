"""What a fuzz run saw: examples, steps and shrink replays counted, every violation in order, the
evidence behind each `holds`, the sink's counts; and the budget checked between examples.

A run's examples may come from several shards searched side by side (`shard.py`): each has a
recorder of its own, and the run's recorder `absorb`s them in the shards' order, as if their
examples had run one after another, so that its counts and the order of its violations do not
depend on which shard finished first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import attrs

from pymc_resume.bridge.adapter.sink import SinkEvent
from pymc_resume.bridge.fuzzing.budget import Budget
from pymc_resume.bridge.fuzzing.races import may_race
from pymc_resume.bridge.hosting.jobs import check
from pymc_resume.bridge.judging.evidence import EffectCounts, Evidence
from pymc_resume.bridge.judging.session import Session, Violation

# The share of a run's remaining time Hypothesis's shrinking of one failing example may take:
# the step-level pass after it (`bridge/fuzzing/shrink.py`) deletes whole steps and does more per replay.
HYPOTHESIS_SHRINK_SHARE = 0.5


@attrs.define
class Recorder:
    """Counts examples, shrink replays and steps; keeps every violation seen, in order; stops
    examples when the budget says so; hands each violation to `on_violation` (the writer of
    repros as found).

    An example run after the round's first failure is one of Hypothesis's shrink replays:
    counted in `shrink_replays`, not in `examples`."""

    budget: Budget = attrs.Factory(Budget)
    shrink: bool = True
    on_violation: Callable[[Violation], None] | None = None
    started: float = attrs.Factory(time.perf_counter)
    examples: int = 0
    shrink_replays: int = 0
    steps: int = 0
    violations: list[Violation] = attrs.Factory(list)
    first_failure: tuple[int, float] | None = None  # (examples run, seconds) at the first
    first_by_clause: dict[str, tuple[int, float]] = attrs.Factory(dict)
    round_start: int = 0  # examples run before the current round
    round_failure: int | None = None  # examples into the current round at its first failure
    round_clauses: set[str] = attrs.Factory(set)
    shrink_until: float | None = None  # when Hypothesis's shrinking of this round must stop
    # What the generated examples exercised, and what the sink counted in them (shrink replays
    # not included): the evidence behind each `holds` and the effects' counts.
    evidence: Evidence = attrs.Factory(Evidence)
    effects: EffectCounts = attrs.Factory(EffectCounts)
    # Set when the run stops taking this recorder's results (`hosting/jobs.py`): checked with
    # the budget, between examples and steps.
    cancelled: threading.Event | None = None
    # Confirmations of several clauses replay side by side (`--jobs`), each counting here.
    _lock: threading.Lock = attrs.field(factory=threading.Lock, init=False, repr=False, eq=False)

    def start_round(self) -> None:
        self.round_start, self.round_failure, self.round_clauses = self.examples, None, set()
        self.shrink_until = None

    def example(self) -> None:
        """A new example is about to start: check the budgets, then count it."""
        self.check_budget()
        if self.round_failure is None:
            self.examples += 1
        else:
            self.shrink_replays += 1

    def replay(self) -> None:
        with self._lock:
            self.shrink_replays += 1

    def absorb(self, shard: Recorder) -> None:
        """Take in what a fuzz shard's recorder saw, as if its examples ran after this one's:
        shards are absorbed in their order, so the result does not depend on which ran first."""
        before = self.examples
        for clause_id, (examples, seconds) in shard.first_by_clause.items():
            self.first_by_clause.setdefault(clause_id, (before + examples, seconds))
        if self.first_failure is None and shard.first_failure is not None:
            self.first_failure = (before + shard.first_failure[0], shard.first_failure[1])
        self.examples += shard.examples
        self.shrink_replays += shard.shrink_replays
        self.steps += shard.steps
        self.violations += shard.violations
        self.evidence.add_all(shard.evidence)
        self.effects = self.effects + shard.effects

    def counting(self) -> bool:
        """Whether the example about to start counts as generated (not a shrink replay)."""
        return self.round_failure is None

    def closed(self, session: Session, events: list[SinkEvent]) -> None:
        """A generated example ended: keep what it exercised and what its sink counted."""
        self.evidence.add(session.exercised, session.exercised_variants)
        self.effects = self.effects + EffectCounts.of(events, "a fuzzed example")

    def check_budget(self) -> None:
        check(self.cancelled)
        self.budget.check(self.shrink_until)

    def step(self) -> None:
        self.steps += 1

    def violation(self, violation: Violation) -> None:
        now = (self.examples, time.perf_counter() - self.started)
        if self.first_failure is None:
            self.first_failure = now
        if self.round_failure is None:
            self.round_failure = self.examples - self.round_start
            if self.shrink:  # half the time left at most: the step pass shrinks better
                self.shrink_until = self.budget.shrink_deadline(share=HYPOTHESIS_SHRINK_SHARE)
        for clause_id in violation.clauses:
            self.first_by_clause.setdefault(clause_id, now)
        self.round_clauses.update(violation.clauses)
        self.violations.append(violation)
        if self.on_violation is not None:
            self.on_violation(violation)

    def shortest(self, clause_id: str) -> list[Violation]:
        """Violations of this clause, those that cannot race first (their repro shows the same
        thing every time), then those that can; within each, the ones no longer than its first,
        fewest steps first (latest first among equals): a repro is never longer than the first
        failing example of its kind."""
        found = [v for v in self.violations if clause_id in v.clauses]
        ordered: list[Violation] = []
        for racing in (False, True):
            kind = [(len(v.steps), -i, v) for i, v in enumerate(found) if may_race(v.steps) == racing]
            if kind:
                first = kind[0][0]
                ordered += [v for length, _, v in sorted(kind, key=lambda item: item[:2]) if length <= first]
        return ordered
