"""Fuzz shards: a run's example budget split into a fixed number of seeded Hypothesis searches.

Hypothesis draws each example from what the examples before it showed, so one search cannot
be spread over processes; independent searches can. A run's examples are split into up to
`SHARDS` shards (how many depends on the budget alone, never on `--jobs`), shard `i` searching with seed
`seed + SHARD_STRIDE * i`, each with its own recorder and its own saved-example folder. What a
shard draws depends only on its seed and on what the adapter shows, so a run with `--jobs 1`
and one with `--jobs 2` draw the same examples; the run takes the shards' results in their order
(`hosting/jobs.py`, `Recorder.absorb`).

Within a shard the search goes as one search always went: rounds of Hypothesis runs, each
stopping at its first failing example and shrinking it; a round that finds a clause is followed
by one in which that clause is judged but no longer fails an example, until the shard's examples
(or the time budget) are spent; with `batch` (a run bounded by time), a run of that many
examples that found nothing is followed by another with the next seed. Shards do not tell each
other what they found: two may find one clause, and the run confirms it once, from the shortest
failing example any shard saw.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from hypothesis import Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky, FlakyStrategyDefinition
from hypothesis.stateful import run_state_machine_as_test

from pymc_resume.bridge.fuzzing.budget import Budget, BudgetSpent
from pymc_resume.bridge.fuzzing.machine import fuzz_settings, machine_class
from pymc_resume.bridge.fuzzing.recorder import Recorder
from pymc_resume.bridge.hosting.jobs import Cancelled, Turns, turn_of
from pymc_resume.bridge.judging.session import AdapterFailure, Session, Violation
from pymc_resume.model.bounds import Bounds
from pymc_resume.model.contract import CLAUSE_IDS

# How many shards a run's examples are split into: enough to keep four cores busy, and never
# fewer than MIN_SHARD_EXAMPLES examples a shard: Hypothesis shapes a search by the examples it
# is asked for, starting with simple ones, and a search of three draws little but those (ten
# examples in four shards drew no crash at all).
SHARDS = 4
MIN_SHARD_EXAMPLES = 12
# Between the seeds of successive shards, and between the batches of one shard.
SHARD_STRIDE = 7_919
SEED_STRIDE = 1_000_003


def shard_sizes(examples: int) -> list[int]:
    """`examples` split as evenly as it goes over as many shards as it fills (at most
    `SHARDS`, each of `MIN_SHARD_EXAMPLES` at least, one at least), the first taking the rest.
    It depends on the budget alone, never on `--jobs`."""
    shards = max(1, min(SHARDS, examples // MIN_SHARD_EXAMPLES))
    return [examples // shards + (i < examples % shards) for i in range(shards)]


class FuzzShard:
    """One shard's search (see the module docstring): its recorder, the clauses it found,
    and why it stopped early, if it did (`error`: the adapter failed; `stopped`: a budget)."""

    def __init__(
        self,
        index: int,
        make_session: Callable[[Recorder, frozenset[str]], Session],
        bounds: Bounds,
        seed: int | None,
        budget: Budget,
        shrink: bool,
        known: frozenset[str],
        on_violation: Callable[[Violation], None],
        cancelled: threading.Event,
        turns: Turns | None = None,
        database=None,
    ) -> None:
        self.index = index
        self.make_session = make_session
        self.bounds = bounds
        self.seed = None if seed is None else seed + SHARD_STRIDE * index
        self.budget = budget
        self.shrink = shrink
        self.database = database
        self.turns = turns  # shards side by side take turns but while they wait on hosts
        self.found: set[str] = set(known)
        self.recorder = Recorder(budget, shrink, on_violation=on_violation, cancelled=cancelled)
        self.error: str | None = None
        self.stopped: str | None = None
        self.batches = 0  # Hypothesis runs of a batch that found nothing, so far

    def search(self, examples: int, steps: int, all_clauses: bool, batch: int | None = None) -> FuzzShard:
        """Rounds of Hypothesis runs until the shard's examples (or the time budget) are spent."""
        with turn_of(self.turns):
            return self._search(examples, steps, all_clauses, batch)

    def _search(self, examples: int, steps: int, all_clauses: bool, batch: int | None) -> FuzzShard:
        recorder = self.recorder
        remaining = examples
        while remaining > 0 and self.error is None and self.stopped is None:
            recorder.start_round()
            cut_short = self._round(remaining if batch is None else min(remaining, batch), steps)
            new = recorder.round_clauses - self.found
            if self.stopped is None and self.budget.spent():
                self.stopped = self.budget.stopped_reason()
            if recorder.round_failure is None and (batch is not None or cut_short):
                remaining -= max(recorder.examples - recorder.round_start, 1)
                self.batches += 1
                continue
            if not new or not all_clauses or recorder.round_failure is None:
                break
            self.found |= new
            remaining -= max(recorder.round_failure, 1)
        return self

    def _round(self, examples: int, steps: int) -> bool:
        """One Hypothesis run, ignoring the clauses found so far; stops at its first failure.
        True when Hypothesis ended it early because a race made an example draw differently
        on its second run (the search then goes on with the next seed)."""
        recorder, ignore = self.recorder, frozenset(self.found)
        machine = machine_class(lambda: self.make_session(recorder, ignore), processes=self.bounds.processes)
        if self.seed is not None:
            # Each batch that found nothing moves the seed on, so that the next one draws anew.
            hypothesis_seed(self.seed + SEED_STRIDE * self.batches)(machine)
        try:
            # Quiet: Hypothesis would print its own account of a flaky example on stdout,
            # among the run's report; the Recorder has what the report needs.
            quiet = settings(
                fuzz_settings(examples, steps, self.database, self.shrink), verbosity=Verbosity.quiet
            )
            run_state_machine_as_test(machine, settings=quiet)
        except Violation:
            pass  # recorded
        except FlakyStrategyDefinition:
            # A rule's candidates follow what the adapter shows, and a race can change that
            # between two runs of one example: Hypothesis then gives up on the whole run. The
            # examples it ran stand; the caller goes on with the rest under the next seed.
            return True
        except Flaky:
            pass  # a race made a failure flaky on replay; the recorded failures still stand
        except AdapterFailure as failure:
            self.error = str(failure)
        except BudgetSpent as spent:
            if spent.whole_run:
                self.stopped = self.budget.stopped_reason()
        except Cancelled:
            self.stopped = "cancelled"
        return False

    def new_clauses(self, known: frozenset[str]) -> list[str]:
        """The clauses this shard found violated that were not known before, in contract order."""
        return [cid for cid in CLAUSE_IDS if cid in self.recorder.first_by_clause and cid not in known]
