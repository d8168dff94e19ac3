"""Conformance profiles: the clause-by-clause verdict of one adapter configuration.

A profile is a deterministic battery followed by a Hypothesis budget. The battery runs every
targeted scenario (`scenarios.py`) in a fresh session; a scenario that fails a clause is run
again with the clauses already found ignored, so that one early violation does not hide the
others. The budget then fuzzes the configuration (`fuzz.run_fuzz`) for whatever the scenarios
did not find. Every violation gets a minimal repro, confirmed by a replay, that
`pymc-resume replay` reproduces.

Verdicts: `violated` (with its repro), `holds` (no scenario and no fuzzed example failed it),
`not-applicable` (the framework cannot express what the clause is about) or `skipped` (the
adapter cannot observe what the clause needs). Notes record evidence a reader needs next to the
verdicts, such as whether work whose checkpoint was durably written ran again after a SIGKILL.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import attrs

from pymc_resume.bridge.adapter import CRASHED, expressible_workflow, unsupported_operations
from pymc_resume.bridge.clauses import not_expressible, unobservable
from pymc_resume.bridge.fuzz import ClauseResult, Recorder, clause_repro, run_fuzz
from pymc_resume.bridge.registry import Configuration, factory
from pymc_resume.bridge.scenarios import Scenario, scenarios
from pymc_resume.bridge.session import AdapterFailure, Session, Violation
from pymc_resume.bridge.sink import SinkEvent
from pymc_resume.model.bounds import Bounds
from pymc_resume.model.contract import CLAUSE_IDS, HOLDS, NOT_APPLICABLE, SKIPPED, VIOLATED


@attrs.frozen
class Profile:
    family: str  # the framework, as rows name it ("langgraph")
    configuration: Configuration
    version: str
    clauses: dict[str, ClauseResult]
    notes: tuple[str, ...]
    scenarios: int
    examples: int
    seconds: float
    error: str | None = None  # the adapter raised or hung: the verdicts are incomplete

    @property
    def violated(self) -> list[str]:
        return [cid for cid, result in self.clauses.items() if result.verdict == VIOLATED]

    def signature(self) -> tuple[str, ...]:
        """The verdicts in contract order: profiles with equal signatures are identical."""
        return tuple(self.clauses[cid].verdict for cid in CLAUSE_IDS)

    def as_json(self) -> dict:
        return {
            "adapter": self.family,
            "version": self.version,
            "config": self.configuration.name,
            "adapter_spec": self.configuration.adapter,
            "adapter_options": self.configuration.options,
            "clauses": {cid: result.as_json() for cid, result in self.clauses.items()},
            "notes": list(self.notes),
            "scenarios": self.scenarios,
            "examples": self.examples,
            "seconds": round(self.seconds, 1),
            "error": self.error,
        }


@attrs.define
class BatteryResult:
    recorder: Recorder
    ran: int = 0
    evidence: list[tuple[Scenario, list[SinkEvent]]] = attrs.Factory(list)  # crashed scenarios
    error: str | None = None


def run_profile(
    family: str,
    configuration: Configuration,
    bounds: Bounds,
    *,
    examples: int = 25,
    steps: int = 12,
    seed: int | None = 0,
    repro_dir: str | Path = "pymc-resume-repros",
    step_timeout: float | None = 60.0,
    shrink: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Profile:
    """The conformance profile of one configuration: the battery, then `examples` fuzzed ones.
    `shrink=False` keeps each violation's failing steps as found (confirmed by a replay).

    Raises `registry.AdapterSpecError` when the adapter cannot be built.
    """
    say = progress or (lambda message: None)
    started = time.perf_counter()
    make_adapter = factory(configuration.adapter, configuration.options)
    probe = make_adapter()
    workflow = expressible_workflow(bounds.workflow, unsupported_operations(probe))
    battery = scenarios(workflow, bounds.processes)
    say(f"{family} {configuration.name}: {len(battery)} targeted scenarios")
    result = run_battery(make_adapter, bounds, battery, step_timeout)
    found = {cid for violation in result.recorder.violations for cid in violation.clauses}
    fuzzed = None
    if examples > 0 and result.error is None:
        say(f"{family} {configuration.name}: fuzzing, {examples} examples")
        fuzzed = run_fuzz(configuration.adapter, configuration.options, bounds, examples=examples,
                          steps=steps, seed=seed, repro_dir=repro_dir, step_timeout=step_timeout,
                          shrink=shrink, known=frozenset(found))
    clauses = {}
    for clause_id in CLAUSE_IDS:
        clauses[clause_id] = _verdict(clause_id, result, fuzzed, probe, configuration, bounds, seed,
                                      repro_dir, shrink)
    error = result.error or (fuzzed.error if fuzzed is not None else None)
    notes = tuple(evidence_notes(result.evidence))
    return Profile(family, configuration, probe.version, clauses, notes, result.ran,
                   fuzzed.examples if fuzzed is not None else 0, time.perf_counter() - started, error)


def run_battery(make_adapter, bounds: Bounds, battery: list[Scenario], step_timeout) -> BatteryResult:
    """Run every scenario the adapter can express; violations go to the result's recorder."""
    result = BatteryResult(Recorder())
    for scenario in battery:
        probe_session = None
        ignore: set[str] = set()
        for _ in range(len(CLAUSE_IDS)):  # once more per new clause found, ignoring the found ones
            try:
                session = Session(make_adapter(), bounds.workflow, bounds.values, step_timeout=step_timeout,
                                  on_violation=result.recorder.violation, ignore=frozenset(ignore))
            except AdapterFailure as failure:
                result.error = str(failure)
                return result
            if any(not session.can(op) for op in scenario.needs):
                session.close()
                break
            probe_session = session
            violation = _run_scenario(session, scenario, result)
            if result.error is not None:
                return result
            if violation is None:
                break
            ignore |= set(violation.clauses)
        if probe_session is not None:
            result.ran += 1
    return result


def _run_scenario(session: Session, scenario: Scenario, result: BatteryResult) -> Violation | None:
    try:
        try:
            scenario.run(session)
        finally:  # the evidence is read before the drain, which removes the sink
            killed = any(o["status"] == CRASHED for step in session.steps for o in step["outcome"])
            seen = any(earlier is scenario for earlier, _ in result.evidence)
            if scenario.crash is not None and killed and not seen:
                result.evidence.append((scenario, session.sink.events()))
        session.finish()
    except Violation as violation:
        return violation
    except AdapterFailure as failure:
        result.error = f"scenario {scenario.name}: {failure}"
    finally:
        if not session.drained:
            session.close()
    return None


def _verdict(clause_id, battery: BatteryResult, fuzzed, probe, configuration, bounds, seed,
             repro_dir, shrink: bool) -> ClauseResult:
    not_applicable = not_expressible(unsupported_operations(probe))
    unjudged = unobservable(frozenset(probe.capabilities))
    if clause_id in not_applicable:
        return ClauseResult(NOT_APPLICABLE, reason=not_applicable[clause_id])
    if clause_id in unjudged:
        return ClauseResult(SKIPPED, reason=unjudged[clause_id])
    candidates = battery.recorder.shortest(clause_id)
    if candidates:
        return clause_repro(clause_id, candidates, configuration.adapter, probe, bounds, seed, repro_dir,
                            shrink)
    if fuzzed is None or not fuzzed.clauses:
        if battery.error is not None:
            return ClauseResult(SKIPPED, reason=f"the adapter failed: {battery.error}")
        return ClauseResult(HOLDS, reason=f"held in {battery.ran} targeted scenarios (no fuzzing)")
    result = fuzzed.clauses[clause_id]
    if result.verdict == HOLDS:
        reason = (f"held in {battery.ran} targeted scenarios and {fuzzed.examples} fuzzed examples "
                  f"({fuzzed.steps} steps)")
        return attrs.evolve(result, reason=reason)
    return result


# -- evidence --------------------------------------------------------------------------------

def evidence_notes(evidence: list[tuple[Scenario, list[SinkEvent]]]) -> list[str]:
    """What crash scenarios show about re-execution, in the profile's words.

    After a SIGKILL right after a stage's checkpoint was written (`after-commit`), a correct
    layer never runs that stage again; the note says whether this configuration did, with the
    scenarios as evidence (the sink's execution log of the crashed thread).
    """
    reran, kept = [], []
    for scenario, events in evidence:
        crash = scenario.crash
        if crash.when != "after-commit":
            continue
        runs = [e for e in events if e.kind == "execute" and e.thread == 0 and e.stage == crash.stage]
        if len(runs) > 1:
            roles = ", ".join(e.role or "?" for e in runs)
            reran.append(f"stage {crash.stage} ran {len(runs)} times ({roles})")
        elif len(runs) == 1:
            kept.append(crash.stage)
    notes = []
    if reran:
        notes.append("re-execution of durably recorded work after a SIGKILL: observed: "
                     + "; ".join(reran) + " (scenarios crash-stage-S-after-commit, the sink's execution log)")
    if kept:
        notes.append("re-execution of durably recorded work after a SIGKILL: not observed for stage(s) "
                     f"{', '.join(map(str, kept))}: killed right after the stage's checkpoint was written "
                     "and recovered, each ran once (scenarios crash-stage-S-after-commit, the sink's "
                     "execution log)")
    return notes
