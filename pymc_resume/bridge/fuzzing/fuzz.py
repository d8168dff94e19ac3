"""`run_fuzz`: Hypothesis stateful fuzzing of one adapter, judged clause by clause.

Hypothesis generates rule sequences (`machine.machine_class`), stops at the first failing
example and shrinks it. The search then goes on in another round in which the clauses already
found violated are judged but no longer fail an example, until a round finds nothing new or
the example budget (`examples`, shared by all rounds) is spent; so every clause a fault breaks
is reported, each with its own repro. A `Recorder` sees every example, every step and every
violation, so the report does not depend on how Hypothesis re-raises: for each violated clause
the shortest failing step sequence seen (Hypothesis's shrunk one, normally) becomes the repro,
after a replay confirms it still fails.

Nothing found is lost: the moment a clause is first seen violated its failing steps are written
as a repro (and rewritten whenever a shorter failing example shows up), the JSON result is
published (`publish`) at that moment and again when each repro is confirmed and minimized, so a
run killed at any point leaves every finding on disk. A run has time budgets (`bridge/fuzzing/budget.py`):
`max_seconds` for the whole run, after which it stops cleanly and reports what it found, and
`shrink_seconds` for each shrinking pass (Hypothesis's on a failing example, then the step-level
pass on each clause it violates). `examples` counts the examples generated; the replays that
shrink and confirm are counted apart (`shrink_replays`).

Verdicts: `violated` with a confirmed repro; `unconfirmed` when no replay of its steps showed
the violation again (a race; never counted as violated); `not-applicable` when the framework
cannot express what a clause is about (no interrupt API, no fork); `skipped` when the adapter
cannot be observed for a clause; `holds` when no step of any example run failed it (a bounded,
randomized search, not a proof: the explorer gives proofs for the model).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from pymc_resume.bridge.adapter import declared_variants, unsupported_operations
from pymc_resume.bridge.fuzzing.budget import Budget, past
from pymc_resume.bridge.fuzzing.races import may_race
from pymc_resume.bridge.fuzzing.recorder import Recorder
from pymc_resume.bridge.fuzzing.saved_examples import SavedExamples
from pymc_resume.bridge.fuzzing.shard import FuzzShard, shard_sizes
from pymc_resume.bridge.fuzzing.shrink import minimize
from pymc_resume.bridge.hosting.host import AdapterInfo
from pymc_resume.bridge.hosting.jobs import in_order, turns_for, waiting_on
from pymc_resume.bridge.hosting.registry import AdapterBuilder, factory
from pymc_resume.bridge.hosting.template import HostTemplates, templates_in
from pymc_resume.bridge.hosting.workdirs import sweep
from pymc_resume.bridge.judging.clauses import not_expressible, unobservable
from pymc_resume.bridge.judging.evidence import (
    Evidence,
    effect_notes,
    effects_json,
    holds_reason,
    not_exercised_reason,
    variants_exercising,
    variants_in,
    variants_phrase,
)
from pymc_resume.bridge.judging.session import AdapterFailure, Session, Violation
from pymc_resume.bridge.repro.format import MAX_REPLAY_ATTEMPTS
from pymc_resume.bridge.repro.replay import replay_steps, repro_document, write_repro
from pymc_resume.errors import EnvironmentProblem
from pymc_resume.model.bounds import Bounds
from pymc_resume.model.contract import (
    CLAUSE_IDS,
    EFFECT_EXACTLY_ONCE,
    HOLDS,
    LIVENESS,
    NOT_APPLICABLE,
    SKIPPED,
    UNCONFIRMED,
    VIOLATED,
)


@attrs.frozen
class Target:
    """What every repro of a run names: the adapter (its spec and what it declared), the bounds
    and seed, where repros go, and the step timeout replays use."""

    adapter: str
    info: AdapterInfo
    bounds: Bounds
    seed: int | None
    repro_dir: Path
    step_timeout: float | None = 30.0
    # The run's host templates (`hosting/template.py`), or None: hosts forked from the bridge.
    templates: HostTemplates | None = attrs.field(default=None, eq=False, repr=False)

    def builder(self, options: dict | None = None) -> AdapterBuilder:
        options = self.info.options if options is None else options
        return factory(self.adapter, options, timeout=self.step_timeout, templates=self.templates)

    def write(
        self, clause_id: str, violation: Violation, options: dict, *, confirmed: bool, attempts: int
    ) -> tuple[Path, Path, dict]:
        """Write the clause's repro (JSON and pytest file, atomically) from `violation`'s steps."""
        document = repro_document(
            adapter=self.adapter,
            options=options,
            version=self.info.version,
            seed=self.seed,
            bounds=self.bounds,
            violation=violation,
            clause=clause_id,
        )
        document["confirmed_by_replay"] = confirmed
        document["replay_attempts"] = attempts
        json_path, test_path = write_repro(self.repro_dir, document)
        return json_path, test_path, document


@attrs.frozen
class ClauseResult:
    verdict: str
    reason: str | None = None
    repro: str | None = None
    pytest: str | None = None
    repro_steps: int | None = None
    steps: list[dict] | None = None
    first_failure: tuple[int, float] | None = None  # (examples run, seconds) when first seen
    # (reproduced, of): in how many of the replays of its repro's steps the clause failed again
    replays: tuple[int, int] | None = None
    notes: tuple[str, ...] = ()  # evidence a reader needs next to this cell (the sink's counts)
    # "operation: variant": the variants that decided the cell (its repro's, or those that
    # exercised it), for operations the adapter declares variants of
    variants: tuple[str, ...] = ()
    # The repro's story, for readers of the JSON alone (the HTML report): each step's outcomes,
    # the step after which the clause was seen failing (or "drain"), and what the store and the
    # sink showed (`Session.observed`: step by step, and at the end).
    outcomes: list | None = None
    violated_at: int | str | None = None
    observed: dict | None = None

    def as_json(self) -> dict:
        data = {
            "verdict": self.verdict,
            "reason": self.reason,
            "trace": self.steps,
            "repro": self.repro,
            "notes": list(self.notes),
            "variants": list(self.variants),
        }
        if self.verdict in (VIOLATED, UNCONFIRMED):
            data["repro_steps"] = self.repro_steps
            data["pytest"] = self.pytest
            data["first_failure"] = (
                None
                if self.first_failure is None
                else {"examples": self.first_failure[0], "seconds": round(self.first_failure[1], 3)}
            )
            reproduced, of = self.replays or (0, 0)
            data["replays"] = {"reproduced": reproduced, "of": of}
            data["outcomes"] = self.outcomes
            data["violated_at"] = self.violated_at
            data["observed"] = self.observed
        return data


@attrs.frozen
class FuzzReport:
    adapter: str
    options: dict
    version: str
    bounds: Bounds
    seed: int | None
    examples: int  # examples generated (Hypothesis's shrink replays not included)
    steps: int
    seconds: float
    first_failure: tuple[int, float] | None
    clauses: dict[str, ClauseResult]
    error: str | None = None  # the adapter raised or hung: the verdicts are incomplete
    shrink_replays: int = 0  # replays that shrank or confirmed a failure
    stopped: str | None = None  # why the search ended before its example budget (a time budget)
    finished: bool = True  # False while the run is still going (a result published on the way)
    evidence: Evidence = attrs.Factory(Evidence)  # what the generated examples exercised
    effects: dict | None = None  # the sink's counts, the key and why (`evidence.effects_json`)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def violated(self) -> list[str]:
        return [cid for cid, result in self.clauses.items() if result.verdict == VIOLATED]

    def as_json(self) -> dict:
        return {
            "adapter": self.adapter,
            "adapter_options": self.options,
            "adapter_version": self.version,
            "bounds": self.bounds.as_json(),
            "seed": self.seed,
            "finished": self.finished,
            "stopped": self.stopped,
            "examples": self.examples,
            "shrink_replays": self.shrink_replays,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "steps_per_second": round(self.steps_per_second, 1),
            "first_failure": None
            if self.first_failure is None
            else {"examples": self.first_failure[0], "seconds": round(self.first_failure[1], 3)},
            "error": self.error,
            "effects": self.effects,
            "clauses": {cid: result.as_json() for cid, result in self.clauses.items()},
        }


def run_fuzz(
    adapter: str,
    options: dict | None,
    bounds: Bounds,
    *,
    examples: int = 100,
    steps: int = 12,
    seed: int | None = None,
    repro_dir: str | Path = "pymc-resume-repros",
    use_database: bool = False,
    step_timeout: float | None = 30.0,
    shrink: bool = True,
    all_clauses: bool = True,
    known: frozenset[str] = frozenset(),
    budget: Budget | None = None,
    publish: Callable[[FuzzReport], None] | None = None,
    batch: int | None = None,
    jobs: int = 1,
    templates: HostTemplates | None = None,
) -> FuzzReport:
    """Fuzz `adapter` (a built-in name or module:Class) and write a repro per violated clause.

    `all_clauses=False` stops at the first violation (one round). Clauses in `known` (found
    violated elsewhere) are judged but do not stop an example. `budget` limits the run's time
    (see `bridge/fuzzing/budget.py`); `publish` gets the report so far whenever a finding changes it,
    and the final one. `batch` splits the examples into Hypothesis runs of at most that many
    (see `FuzzRun.search`): how a run bounded by time rather than by examples is searched, since
    Hypothesis shapes its examples by the number it is asked for (the first tenth of them, up
    to 50, are near-minimal ones).

    Raises `registry.AdapterSpecError` when the adapter cannot be built, `AdapterError` when
    building it hangs or kills its process.
    """
    sweep()  # work directories a killed run left behind
    with templates_in(templates) as templates:
        builder = factory(adapter, options, timeout=step_timeout, templates=templates)
        target = Target(adapter, builder.info, bounds, seed, Path(repro_dir), step_timeout, templates)
        run = FuzzRun(target, builder, budget or Budget(), shrink, publish, known, jobs)
        run.search(examples, steps, use_database, all_clauses, batch)
        return run.finish(all_clauses)


def database_name(adapter: str, options: dict) -> str:
    """The folder name of an adapter configuration's example database: readable, then a digest
    of the spec and options (a spec may be a long path; names may collide)."""
    identity = json.dumps([adapter, options], sort_keys=True, default=str)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    readable = [adapter.rsplit(":", 1)[-1].rsplit("/", 1)[-1]]
    readable += [str(v) if v is not True else k for k, v in sorted(options.items()) if v not in (None, False)]
    return "-".join(re.sub(r"[^0-9A-Za-z._-]+", "_", part)[:40] for part in readable) + "-" + digest


class Findings:
    """A run's findings, written the moment they are known: each violated clause's failing
    steps as a repro when first seen (rewritten when a shorter failing example shows up), then
    its confirmed, minimized repro (`confirm`). `changed` is called after every write, so that
    the run can publish its result so far."""

    def __init__(self, target: Target, changed: Callable[[], None] | None = None) -> None:
        self.target = target
        self.changed = changed
        self.results: dict[str, ClauseResult] = {}  # confirmed (or given up) repros, by clause
        self.as_found: dict[str, int] = {}  # clause -> steps of its unconfirmed repro on disk
        self.lost: str | None = None  # why a repro could not be written
        # Shards and confirmations run side by side (`--jobs`): one finding written at a time.
        self._lock = threading.RLock()

    def seen(self, violation: Violation) -> None:
        """A failing example: write each clause's steps as a repro when it is the first or the
        shortest seen so far (not confirmed yet)."""
        with self._lock:
            self._seen(violation)

    def _seen(self, violation: Violation) -> None:
        wrote = False
        for clause_id in violation.clauses:
            written = self.as_found.get(clause_id)
            if clause_id in self.results or (written is not None and written <= len(violation.steps)):
                continue
            try:
                self.target.write(
                    clause_id,
                    violation,
                    self.target.info.options,
                    confirmed=False,
                    attempts=replays_allowed(violation.steps, 1),
                )
            except OSError as error:
                self.lost = f"cannot write a repro in {self.target.repro_dir}: {error.strerror or error}"
                continue
            self.as_found[clause_id] = len(violation.steps)
            wrote = True
        if wrote and self.changed is not None:
            self.changed()

    def confirm(self, clause_id: str, recorder: Recorder, budget: Budget, shrink: bool) -> ClauseResult:
        """Confirm, minimize (within a shrink budget) and write the clause's repro."""
        deadline = budget.shrink_deadline() if shrink else None
        result = clause_repro(
            clause_id,
            recorder.shortest(clause_id),
            self.target,
            shrink=shrink,
            deadline=deadline,
            recorder=recorder,
        )
        result = attrs.evolve(result, first_failure=recorder.first_by_clause[clause_id])
        with self._lock:
            self.results[clause_id] = result
            if self.changed is not None:
                self.changed()
        return result

    def confirm_all(
        self, clause_ids: list[str], recorder: Recorder, budget: Budget, shrink: bool, jobs: int = 1
    ) -> None:
        """`confirm` each clause, `jobs` clauses side by side: each replays on hosts of its own
        and writes its own repro, so their order does not matter."""
        tasks = [
            (lambda clause_id=clause_id: self.confirm(clause_id, recorder, budget, shrink))
            for clause_id in clause_ids
        ]
        for _ in in_order(tasks, jobs):
            pass

    def check_written(self) -> None:
        """Raise EnvironmentProblem if a repro could not be written."""
        if self.lost is not None:
            raise EnvironmentProblem(self.lost)


class FuzzRun:
    """The state of one `run_fuzz`: the shards' merged recorder, the budget, the findings."""

    def __init__(
        self,
        target: Target,
        builder: AdapterBuilder,
        budget: Budget,
        shrink: bool,
        publish: Callable[[FuzzReport], None] | None,
        known: frozenset[str],
        jobs: int = 1,
    ) -> None:
        self.target = target
        self.builder = builder
        self.budget = budget
        self.shrink = shrink
        self.publish = publish
        self.known = known
        self.jobs = jobs
        self.findings = Findings(target, changed=self._publish)
        self.recorder = Recorder(budget, shrink)  # the shards', absorbed in their order
        self.turns = turns_for(jobs)  # the shards take turns but while they wait on hosts
        self.error: str | None = None
        self.stopped: str | None = None

    # -- the search ------------------------------------------------------------------------

    def search(
        self, examples: int, steps: int, use_database: bool, all_clauses: bool, batch: int | None = None
    ) -> None:
        """The shards' searches (`shard.py`), `jobs` at a time, taken in their order; then each
        clause they found is confirmed and minimized, the clauses side by side. With
        `all_clauses=False` the run stops at the first shard (in order) that found one."""
        cancelled = threading.Event()
        sizes = shard_sizes(examples)
        shards = [
            FuzzShard(
                index,
                self._session,
                self.target.bounds,
                self.target.seed,
                self.budget,
                self.shrink,
                self.known,
                self.findings.seen,
                cancelled,
                self.turns,
                self._database(index) if use_database else None,
            )
            for index in range(len(sizes))
        ]
        tasks = [
            (lambda shard=shard, size=size: shard.search(size, steps, all_clauses, batch))
            for shard, size in zip(shards, sizes)
        ]
        for shard in in_order(tasks, self.jobs, cancelled):
            self.recorder.absorb(shard.recorder)
            self.error, self.stopped = shard.error, shard.stopped
            if self.error is not None or self.stopped is not None:
                break
            if shard.recorder.violations and not all_clauses:
                break
        new = [cid for cid in CLAUSE_IDS if cid in self.recorder.first_by_clause and cid not in self.known]
        self.findings.confirm_all(new, self.recorder, self.budget, self.shrink, self.jobs)
        if self.stopped is None and self.budget.spent():
            self.stopped = self.budget.stopped_reason()

    def _session(self, recorder: Recorder, ignore: frozenset[str]) -> Session:
        """A fresh session for the next example of the shard whose recorder is `recorder`."""
        counted = recorder.counting()
        recorder.example()
        return Session(
            self.builder,
            self.target.bounds.workflow,
            self.target.bounds.values,
            step_timeout=self.target.step_timeout,
            before_step=recorder.check_budget,
            on_step=recorder.step,
            on_violation=recorder.violation,
            ignore=ignore,
            on_close=recorder.closed if counted else None,
            waiting=lambda: waiting_on(self.turns),
        )

    def _database(self, shard: int):
        """One example database per adapter configuration and shard, keyed by the adapter's
        spec and every option it was built with (two adapters, or one with two option sets,
        never share saved failures); the name starts with the adapter's own name and options,
        to be told apart."""
        return SavedExamples(
            str(
                self.target.repro_dir
                / "hypothesis-db"
                / database_name(self.target.adapter, self.target.info.options)
                / f"shard-{shard}"
            )
        )

    def _publish(self) -> None:
        if self.publish is not None:
            self.publish(self.report(finished=False))

    # -- the report --------------------------------------------------------------------------

    def finish(self, all_clauses: bool) -> FuzzReport:
        self.findings.check_written()
        report = self.report(finished=True, all_clauses=all_clauses)
        if self.publish is not None:
            self.publish(report)
        return report

    def report(self, finished: bool, all_clauses: bool = True) -> FuzzReport:
        recorder, info = self.recorder, self.target.info
        return FuzzReport(
            self.target.adapter,
            info.options,
            info.version,
            self.target.bounds,
            self.target.seed,
            recorder.examples,
            recorder.steps,
            time.perf_counter() - recorder.started,
            recorder.first_failure,
            self._verdicts(finished, all_clauses),
            self.error,
            recorder.shrink_replays,
            self.stopped,
            finished,
            recorder.evidence,
            effects_json(info.effect_key, recorder.effects),
        )

    def _verdicts(self, finished: bool, all_clauses: bool) -> dict[str, ClauseResult]:
        info, recorder, results = self.target.info, self.recorder, self.findings.results
        skip = unobservable(info.capabilities)
        not_applicable = not_expressible(unsupported_operations(info))
        verdicts = {}
        for clause_id in CLAUSE_IDS:
            if clause_id in not_applicable:
                verdicts[clause_id] = ClauseResult(NOT_APPLICABLE, reason=not_applicable[clause_id])
            elif clause_id in skip:
                verdicts[clause_id] = ClauseResult(SKIPPED, reason=skip[clause_id])
            elif clause_id in results:
                verdicts[clause_id] = results[clause_id]
            elif clause_id in recorder.first_by_clause:
                verdicts[clause_id] = being_confirmed(recorder, clause_id)
            elif clause_id in self.findings.as_found:  # seen by a shard still running
                verdicts[clause_id] = ClauseResult(
                    UNCONFIRMED,
                    reason="seen in a fuzzed example; not confirmed by a replay yet (the run was "
                    "still going when this was written)",
                )
            elif self.error is not None:
                verdicts[clause_id] = ClauseResult(SKIPPED, reason=f"the adapter failed: {self.error}")
            else:
                verdicts[clause_id] = self._unfailed(clause_id, finished, all_clauses)
        if verdicts[EFFECT_EXACTLY_ONCE].verdict != NOT_APPLICABLE:
            notes = effect_notes(info.effect_key, recorder.effects, f"{recorder.examples} fuzzed examples")
            verdicts[EFFECT_EXACTLY_ONCE] = attrs.evolve(verdicts[EFFECT_EXACTLY_ONCE], notes=notes)
        return verdicts

    def _unfailed(self, clause_id: str, finished: bool, all_clauses: bool) -> ClauseResult:
        """A clause no example failed: `holds`, counting the examples that ran its operations
        and where; `skipped` when no example ran them (it was not checked)."""
        recorder = self.recorder
        parts = [(recorder.evidence, "examples")]
        exercised = holds_reason(clause_id, parts)
        if exercised is None and finished:
            return ClauseResult(SKIPPED, reason=not_exercised_reason(clause_id, parts))
        reason = exercised or f"held on every step judged so far ({recorder.examples} examples)"
        reason += variants_phrase(clause_id, parts, declared_names(self.target.info))
        if not finished:
            reason += " (the run is still going)"
        elif self.stopped is not None:
            reason += f"; the search stopped early: {self.stopped}"
        elif recorder.violations and not all_clauses:
            reason += (
                f"; the search stopped at the first violation after {recorder.first_failure[0]} examples"
            )
        return ClauseResult(HOLDS, reason=reason, variants=tuple(variants_exercising(clause_id, parts)))


def declared_names(info: AdapterInfo) -> dict[str, list[str]]:
    """Operation -> the names of the variants the adapter declares for it."""
    return {op: [v.name for v in variants] for op, variants in declared_variants(info).items()}


def being_confirmed(recorder: Recorder, clause_id: str) -> ClauseResult:
    """The verdict of a clause seen violated whose repro is not confirmed yet."""
    first = recorder.first_by_clause[clause_id]
    return ClauseResult(
        UNCONFIRMED,
        reason=f"seen after {first[0]} examples; not confirmed by a replay "
        "yet (the run was still going when this was written)",
        first_failure=first,
    )


# How often a failing step list is replayed before it counts as not reproducing: a violation
# that comes from a race (which of two released processes wins, whether a background write
# landed before a SIGKILL) does not show on every replay.
CONFIRM_ATTEMPTS = 10
# How likely a replay run of a race's repro should be to show the failure again.
SHOW_AGAIN = 0.99
# Replays that must all fail the clause again before a repro counts as deterministic.
RELIABLE_REPLAYS = 2


def clause_repro(
    clause_id: str,
    candidates: list[Violation],
    target: Target,
    *,
    shrink: bool = True,
    deadline: float | None = None,
    recorder: Recorder | None = None,
) -> ClauseResult:
    """Confirm the shortest failing steps seen by a replay, minimize them (see `shrink`; not
    when `shrink` is false) until `deadline`, and write the repro.

    The repro is the shortest step list that fails on every one of a few replays; where only
    races reproduce (some replays fail, some do not), the one that failed most often is kept.
    A repro whose steps can race (see `may_race`) says how many replays to allow
    (`replay_attempts`): a few replays that all failed do not show that every one will. Each
    better repro found on the way is written at once. Past the deadline, only the confirming
    replays run (at least one per candidate). A liveness failure is shrunk with the shortest
    lease the adapter allows (`shortest_lease`), when it still fails with it.
    """
    replays = Replays(clause_id, target, target.info.options, recorder)
    if clause_id == LIVENESS and target.info.shortest_lease:
        replays = replays.with_short_lease(candidates[0].steps)
    chosen, confirmed, attempts = _choose_repro(candidates, replays, shrink, deadline)
    reproduced, of = replays.tally(chosen.steps)
    confirmed = confirmed and reproduced > 0  # a violated cell's repro reproduced in a replay
    # The repro and the reason state one number: the replays the repro allows. Steps that can
    # race allow several even where the few replays so far all failed.
    allowed = replays_allowed(chosen.steps, attempts, reproduced, of)
    json_path, test_path, document = target.write(
        clause_id, chosen, replays.options, confirmed=confirmed, attempts=allowed
    )
    variants = tuple(variants_in(document["steps"]))
    verdict, reason = _repro_reason(chosen.clauses[clause_id], variants, confirmed, reproduced, of, allowed)
    return ClauseResult(
        verdict,
        reason=reason,
        repro=str(json_path),
        pytest=str(test_path),
        repro_steps=len(document["steps"]),
        steps=document["steps"],
        replays=(reproduced, of),
        variants=variants,
        outcomes=document["outcomes"],
        violated_at=document["violated_at"],
        observed=document["observed"],
    )


def _choose_repro(
    candidates: list[Violation], replays: Replays, shrink: bool, deadline: float | None
) -> tuple[Violation, bool, int]:
    """(the repro, whether a replay confirmed it, the replays it allows before counting as
    not reproducing): the first of the shortest candidates that reproduces reliably, minimized
    when `shrink`; else the race that reproduced most often; else the first candidate."""

    def keep(violation: Violation) -> None:  # a better repro found while minimizing
        replays.target.write(
            replays.clause_id,
            violation,
            replays.options,
            confirmed=True,
            attempts=replays_allowed(violation.steps, 1),
        )

    racy: list[tuple[int, Violation]] = []
    for violation in candidates[:3]:  # the shortest that reproduces reliably
        replayed, attempt = _confirm(violation.steps, replays, deadline)
        if replayed is not None:
            options = [replayed]
            if attempt == 1 and shrink and not past(deadline):
                keep(replayed)
                _steps, minimized = minimize(
                    replayed.steps,
                    replays.clause_id,
                    replays,
                    deadline=deadline,
                    on_better=keep,
                    confirmed=replayed,
                )
                if minimized is not None and len(minimized.steps) < len(replayed.steps):
                    options.insert(0, minimized)
            reliable = next((o for o in options if _reliable(o, replays, racy)), None)
            if reliable is not None:
                return reliable, True, 1
        if past(deadline):
            break
    if racy:  # only races reproduce it: the one that did most often
        return max(racy, key=lambda entry: (entry[0], -len(entry[1].steps)))[1], True, CONFIRM_ATTEMPTS
    return candidates[0], False, 1


def _repro_reason(
    reason: str, variants: tuple[str, ...], confirmed: bool, reproduced: int, of: int, allowed: int
) -> tuple[str, str]:
    """(the cell's verdict, its reason): what the violation said, the variants its repro
    drives, and how its replays went."""
    if variants:
        reason += f" (with {', '.join(variants)})"
    if not confirmed:
        reason += f" (not seen again in {of} replays of its steps: a race, or a fault of that one run)"
        return UNCONFIRMED, reason
    reason += f" (the repro reproduced in {reproduced} of {of} replays"
    reason += f"; a race: its repro allows {allowed} replays)" if allowed > 1 else ")"
    return VIOLATED, reason


class Replays:
    """Replays of step lists for one clause, each on a fresh adapter of one configuration
    (`options`), counted as shrink replays; a callable as `shrink.minimize` wants."""

    def __init__(self, clause_id: str, target: Target, options: dict, recorder: Recorder | None) -> None:
        self.clause_id, self.target, self.options, self.recorder = clause_id, target, options, recorder
        self.builder = target.builder(options)
        self.tallies: dict[str, tuple[int, int]] = {}  # steps (as JSON) -> (reproduced, replays)

    def __call__(self, steps: list[dict]) -> Violation | None:
        if self.recorder is not None:
            self.recorder.replay()
        violation = replay_steps(
            self.builder, self.target.bounds, steps, self.target.step_timeout, only=self.clause_id
        )
        reproduced, of = self.tally(steps)
        hit = violation is not None and self.clause_id in violation.clauses
        self.tallies[_steps_key(steps)] = (reproduced + hit, of + 1)
        return violation

    def tally(self, steps: list[dict]) -> tuple[int, int]:
        """(in how many replays of `steps` the clause failed again, how many replays ran)."""
        return self.tallies.get(_steps_key(steps), (0, 0))

    def with_short_lease(self, steps: list[dict]) -> Replays:
        """These replays under the adapter's shortest lease, if the steps still fail with it."""
        short = Replays(
            self.clause_id, self.target, {**self.options, **self.target.info.shortest_lease}, self.recorder
        )
        replayed, _ = _confirm(steps, short, deadline=None, attempts=1)
        return short if replayed is not None else self


def replays_allowed(steps: list[dict], attempts: int, reproduced: int = 0, of: int = 0) -> int:
    """How many replays a repro of `steps` allows (see `may_race`). Steps that can race
    allow enough for a replay run to show the failure again 99 times in 100 at the rate the
    replays so far showed it (`reproduced` of `of`), within the repro format's limit: a CI
    run's race, seen in 2 of 15 replays, missed all of 10 (0.87**10 is 1 in 4)."""
    if not may_race(steps):
        return attempts
    if 0 < reproduced < of:
        needed = math.ceil(math.log(1 - SHOW_AGAIN) / math.log1p(-reproduced / of))
        return min(MAX_REPLAY_ATTEMPTS, max(CONFIRM_ATTEMPTS, needed))
    return CONFIRM_ATTEMPTS


def _steps_key(steps: list[dict]) -> str:
    return json.dumps(_clean(steps), sort_keys=True)


def _clean(steps: list[dict]) -> list[dict]:
    return [{k: v for k, v in step.items() if k != "outcome"} for step in steps]


def _reliable(option: Violation, replays: Replays, racy: list[tuple[int, Violation]]) -> bool:
    """Whether `option` fails on every one of a few fresh replays; if not, it joins `racy`
    with the number of replays it failed on."""
    hits = _hits(option.steps, replays, RELIABLE_REPLAYS)
    if hits < RELIABLE_REPLAYS:
        racy.append((hits, option))
    return hits == RELIABLE_REPLAYS


def _hits(steps: list[dict], replay: Replays, replays: int) -> int:
    """In how many of `replays` fresh replays of `steps` the clause fails again."""
    hits = 0
    for _ in range(replays):
        try:
            violation = replay(_clean(steps))
        except AdapterFailure:
            continue
        hits += violation is not None and replay.clause_id in violation.clauses
    return hits


def _confirm(
    steps: list[dict], replay: Replays, deadline: float | None, attempts: int = CONFIRM_ATTEMPTS
) -> tuple[Violation | None, int]:
    """Replay `steps` until the clause fails again: (the violation, the attempt), or (None, 0).
    Past `deadline` no further attempt starts (the first always does)."""
    for attempt in range(1, attempts + 1):
        if attempt > 1 and past(deadline):
            break
        try:
            violation = replay(_clean(steps))
        except AdapterFailure:
            return None, 0
        if violation is not None and replay.clause_id in violation.clauses:
            return violation, attempt
    return None, 0
