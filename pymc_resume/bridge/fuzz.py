"""`run_fuzz`: Hypothesis stateful fuzzing of one adapter, judged clause by clause.

Hypothesis generates rule sequences (`machine.machine_class`), stops at the first failing
example and shrinks it. The search then goes on in another round in which the clauses already
found violated are judged but no longer fail an example, until a round finds nothing new or
the example budget (`examples`, shared by all rounds) is spent; so every clause a fault breaks
is reported, each with its own repro. A `Recorder` sees every example, every step and every violation, so the
report does not depend on how Hypothesis re-raises: for each violated clause the shortest
failing step sequence seen (Hypothesis's shrunk one, normally) becomes the repro, after a
replay confirms it still fails.

Verdicts: `violated` with a repro; `not-applicable` when the framework cannot express what a
clause is about (no interrupt API, no fork); `skipped` when the adapter cannot be observed for a clause;
`holds` when no step of any example run failed it (a bounded, randomized search, not a proof:
the explorer gives proofs for the model).
"""

from __future__ import annotations

import time
from pathlib import Path

import attrs
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky, FlakyStrategyDefinition
from hypothesis import seed as hypothesis_seed
from hypothesis.stateful import run_state_machine_as_test

from pymc_resume.bridge.adapter import unsupported_operations
from pymc_resume.bridge.clauses import not_expressible, unobservable
from pymc_resume.bridge.machine import fuzz_settings, machine_class
from pymc_resume.bridge.registry import factory
from pymc_resume.bridge.repro import replay_steps, repro_document, write_repro
from pymc_resume.bridge.shrink import minimize
from pymc_resume.bridge.session import AdapterFailure, Session, Violation
from pymc_resume.model.bounds import Bounds
from pymc_resume.model.contract import CLAUSE_IDS, HOLDS, NOT_APPLICABLE, SKIPPED, VIOLATED


@attrs.define
class Recorder:
    """Counts examples and steps; keeps every violation seen, in order."""

    started: float = attrs.Factory(time.perf_counter)
    examples: int = 0
    steps: int = 0
    violations: list[Violation] = attrs.Factory(list)
    first_failure: tuple[int, float] | None = None  # (examples run, seconds) at the first
    first_by_clause: dict[str, tuple[int, float]] = attrs.Factory(dict)
    round_start: int = 0  # examples run before the current round
    round_failure: int | None = None  # examples into the current round at its first failure
    round_clauses: set[str] = attrs.Factory(set)

    def start_round(self) -> None:
        self.round_start, self.round_failure, self.round_clauses = self.examples, None, set()

    def example(self) -> None:
        self.examples += 1

    def step(self) -> None:
        self.steps += 1

    def violation(self, violation: Violation) -> None:
        now = (self.examples, time.perf_counter() - self.started)
        if self.first_failure is None:
            self.first_failure = now
        if self.round_failure is None:
            self.round_failure = self.examples - self.round_start
        for clause_id in violation.clauses:
            self.first_by_clause.setdefault(clause_id, now)
        self.round_clauses.update(violation.clauses)
        self.violations.append(violation)

    def shortest(self, clause_id: str) -> list[Violation]:
        """Violations of this clause, fewest steps first (latest first among equals)."""
        found = [(len(v.steps), -i, v) for i, v in enumerate(self.violations) if clause_id in v.clauses]
        return [v for _, _, v in sorted(found, key=lambda item: item[:2])]



@attrs.frozen
class ClauseResult:
    verdict: str
    reason: str | None = None
    repro: str | None = None
    pytest: str | None = None
    repro_steps: int | None = None
    steps: list[dict] | None = None
    first_failure: tuple[int, float] | None = None  # (examples run, seconds) when first seen

    def as_json(self) -> dict:
        data = {"verdict": self.verdict, "reason": self.reason, "trace": self.steps, "repro": self.repro}
        if self.verdict == VIOLATED:
            data["repro_steps"] = self.repro_steps
            data["pytest"] = self.pytest
            data["first_failure"] = None if self.first_failure is None else {
                "examples": self.first_failure[0], "seconds": round(self.first_failure[1], 3)}
        return data


@attrs.frozen
class FuzzReport:
    adapter: str
    options: dict
    version: str
    bounds: Bounds
    seed: int | None
    examples: int
    steps: int
    seconds: float
    first_failure: tuple[int, float] | None
    clauses: dict[str, ClauseResult]
    error: str | None = None  # the adapter raised or hung: no verdicts

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
            "examples": self.examples,
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "steps_per_second": round(self.steps_per_second, 1),
            "first_failure": None if self.first_failure is None else {
                "examples": self.first_failure[0], "seconds": round(self.first_failure[1], 3)},
            "error": self.error,
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
) -> FuzzReport:
    """Fuzz `adapter` (a built-in name or module:Class) and write a repro per violated clause.

    `all_clauses=False` stops at the first violation (one round). Clauses in `known` (found
    violated elsewhere) are judged but do not stop an example.

    Raises `registry.AdapterSpecError` when the adapter cannot be built.
    """
    make_adapter = factory(adapter, options)
    probe = make_adapter()
    capabilities = frozenset(probe.capabilities)
    recorder = Recorder()

    def session_factory(ignore: frozenset[str]):
        def make_session() -> Session:
            recorder.example()
            return Session(make_adapter(), bounds.workflow, bounds.values, step_timeout=step_timeout,
                           on_step=recorder.step, on_violation=recorder.violation, ignore=ignore)
        return make_session

    database = None
    if use_database:  # one database per adapter configuration: the machine's code is shared
        fault = probe.options().get("fault") or "nofault"
        name = f"{adapter.replace(':', '.')}-{fault}"
        database = DirectoryBasedExampleDatabase(str(Path(repro_dir) / "hypothesis-db" / name))
    error = None
    found: set[str] = set(known)
    remaining = examples
    while remaining > 0 and error is None:
        recorder.start_round()
        machine = machine_class(session_factory(frozenset(found)), processes=bounds.processes)
        if seed is not None:
            hypothesis_seed(seed)(machine)
        try:
            run_state_machine_as_test(machine, settings=fuzz_settings(remaining, steps, database, shrink))
        except Violation:
            pass  # recorded
        except (Flaky, FlakyStrategyDefinition):
            pass  # a race made a failure flaky on replay; the recorded failures still stand
        except AdapterFailure as failure:
            error = str(failure)
        new = recorder.round_clauses - found
        if not new or not all_clauses or recorder.round_failure is None:
            break
        found |= new
        remaining -= max(recorder.round_failure, 1)
    seconds = time.perf_counter() - recorder.started
    clauses = {} if error else _verdicts(recorder, capabilities, adapter, probe, bounds, seed, repro_dir, all_clauses,
                                         shrink)
    return FuzzReport(adapter, probe.options(), probe.version, bounds, seed, recorder.examples,
                      recorder.steps, seconds, recorder.first_failure, clauses, error)


def _verdicts(recorder: Recorder, capabilities, adapter: str, probe, bounds, seed, repro_dir,
              all_clauses: bool, shrink: bool) -> dict:
    skip = unobservable(capabilities)
    not_applicable = not_expressible(unsupported_operations(probe))
    stopped = bool(recorder.violations)
    results = {}
    for clause_id in CLAUSE_IDS:
        if clause_id in not_applicable:
            results[clause_id] = ClauseResult(NOT_APPLICABLE, reason=not_applicable[clause_id])
            continue
        if clause_id in skip:
            results[clause_id] = ClauseResult(SKIPPED, reason=skip[clause_id])
            continue
        candidates = recorder.shortest(clause_id)
        if candidates:
            result = clause_repro(clause_id, candidates, adapter, probe, bounds, seed, repro_dir, shrink)
            results[clause_id] = attrs.evolve(result, first_failure=recorder.first_by_clause[clause_id])
            continue
        reason = None
        if stopped and not all_clauses:
            reason = (f"held on every step judged; the search stopped at the first violation "
                      f"after {recorder.first_failure[0]} examples")
        results[clause_id] = ClauseResult(HOLDS, reason=reason)
    return results


# How often a failing step list is replayed before it counts as not reproducing: a violation
# that comes from a race (which of two released processes wins, whether a background write
# landed before a SIGKILL) does not show on every replay.
CONFIRM_ATTEMPTS = 10
# Replays that must all fail the clause again before a repro counts as deterministic.
RELIABLE_REPLAYS = 2


def clause_repro(clause_id: str, candidates: list[Violation], adapter, probe, bounds, seed, repro_dir,
                 shrink: bool = True) -> ClauseResult:
    """Confirm the shortest failing steps seen by a replay, minimize them (see `shrink`; not
    when `shrink` is false) and write the repro.

    The repro is the shortest step list that fails on every one of a few replays; where only
    races reproduce (some replays fail, some do not), the one that failed most often is kept.
    A repro whose steps can race (see `may_race`) says how many replays to allow
    (`replay_attempts`): a few replays that all failed do not show that every one will.
    """
    make_adapter = factory(adapter, probe.options())

    def replay(steps):
        return replay_steps(make_adapter, bounds, steps, only=clause_id)

    chosen, confirmed, attempts = candidates[0], False, 1
    racy: list[tuple[int, Violation]] = []
    for violation in candidates[:3]:  # the shortest that reproduces reliably
        replayed, attempt = _confirm(violation.steps, clause_id, replay)
        if replayed is None:
            continue
        options = [replayed]
        if attempt == 1 and shrink:
            _steps, minimized = minimize(replayed.steps, clause_id, replay)
            if minimized is not None and len(minimized.steps) < len(replayed.steps):
                options.insert(0, minimized)
        reliable = None
        for option in options:
            hits = _hits(option.steps, clause_id, replay, RELIABLE_REPLAYS)
            if hits == RELIABLE_REPLAYS:
                reliable = option
                break
            racy.append((hits, option))
        if reliable is not None:
            chosen, confirmed = reliable, True
            break
    else:
        if racy:  # only races reproduce it: the one that did most often
            chosen = max(racy, key=lambda entry: (entry[0], -len(entry[1].steps)))[1]
            confirmed, attempts = True, CONFIRM_ATTEMPTS
    document = repro_document(adapter=adapter, options=probe.options(), version=probe.version,
                              seed=seed, bounds=bounds, violation=chosen, clause=clause_id)
    document["confirmed_by_replay"] = confirmed
    document["replay_attempts"] = CONFIRM_ATTEMPTS if may_race(chosen.steps) else attempts
    json_path, test_path = write_repro(repro_dir, document)
    reason = chosen.clauses[clause_id]
    if not confirmed:
        reason += f" (not reproduced in {CONFIRM_ATTEMPTS} replays: a race)"
    elif attempts > 1:
        reason += f" (a race: not every replay shows it; its repro allows {attempts} replays)"
    return ClauseResult(VIOLATED, reason=reason, repro=str(json_path), pytest=str(test_path),
                        repro_steps=len(document["steps"]), steps=document["steps"])


def may_race(steps: list[dict]) -> bool:
    """Whether replays of `steps` can differ: a SIGKILL races the framework's background
    threads (LangGraph writes a delivered resume value from one), and processes run together
    race each other wherever no window holds them."""
    return any(step.get("crash") or step["action"] == "resume-together" for step in steps)


def _hits(steps: list[dict], clause_id: str, replay, replays: int) -> int:
    """In how many of `replays` fresh replays of `steps` the clause fails again."""
    clean = [{k: v for k, v in step.items() if k != "outcome"} for step in steps]
    hits = 0
    for _ in range(replays):
        try:
            violation = replay(clean)
        except AdapterFailure:
            continue
        hits += violation is not None and clause_id in violation.clauses
    return hits


def _confirm(steps: list[dict], clause_id: str, replay) -> tuple[Violation | None, int]:
    """Replay `steps` until the clause fails again: (the violation, the attempt), or (None, 0)."""
    clean = [{k: v for k, v in step.items() if k != "outcome"} for step in steps]
    for attempt in range(1, CONFIRM_ATTEMPTS + 1):
        try:
            violation = replay(clean)
        except AdapterFailure:
            return None, 0
        if violation is not None and clause_id in violation.clauses:
            return violation, attempt
    return None, 0
