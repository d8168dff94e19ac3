"""Running the battery: every targeted scenario (`scenarios.py`) the adapter can express, each in
fresh sessions, `jobs` scenarios at a time.

A scenario that fails a clause is run again with the clauses already found ignored, so that one
early violation does not hide the others; those runs of one scenario follow each other, and
scenarios are independent of each other (each session has its own hosts, folder and store), so
they run side by side (`hosting/jobs.py`). What each scenario saw (its violations, in the order
it saw them, what its sessions exercised, the sink's counts) is kept apart while it runs, and
merged into the battery's result in the battery's order: the recorder sees the violations as
`--jobs 1` shows them, so the repro chosen for each clause and every count in a reason are the
same for every N. The battery stops at the first scenario (in its order) whose adapter failed,
or when the time budget is spent.
"""

from __future__ import annotations

import threading

import attrs

from pymc_resume.bridge.adapter import CRASHED
from pymc_resume.bridge.adapter.sink import SinkEvent
from pymc_resume.bridge.fuzzing.budget import BudgetSpent
from pymc_resume.bridge.fuzzing.recorder import Recorder
from pymc_resume.bridge.fuzzing.scenarios import Scenario
from pymc_resume.bridge.hosting.jobs import Cancelled, check, in_order
from pymc_resume.bridge.judging.evidence import EffectCounts, Evidence
from pymc_resume.bridge.judging.session import AdapterFailure, Session, Violation
from pymc_resume.model.bounds import Bounds
from pymc_resume.model.contract import CLAUSE_IDS


@attrs.define
class BatteryResult:
    recorder: Recorder
    ran: int = 0
    evidence: list[tuple[Scenario, list[SinkEvent]]] = attrs.Factory(list)  # crashed scenarios
    error: str | None = None
    stopped: bool = False  # the time budget ran out before every scenario ran
    exercise: Evidence = attrs.Factory(Evidence)  # what each scenario run exercised (once per scenario)
    effects: EffectCounts = attrs.Factory(EffectCounts)  # the sink's counts over every battery session
    sessions: int = 0  # battery sessions (a scenario run again ignoring found clauses counts again)


@attrs.define
class ScenarioRuns:
    """What the runs of one scenario saw, kept apart until it is merged in the battery's order."""

    scenario: Scenario
    ran: bool = False  # the adapter could express it (and the budget let it run)
    violations: list[Violation] = attrs.Factory(list)
    sessions: int = 0
    effects: EffectCounts = attrs.Factory(EffectCounts)
    exercised: dict[str, set[str]] = attrs.Factory(dict)
    variants: dict[str, set[str]] = attrs.Factory(dict)
    crash_events: list[SinkEvent] | None = None  # the sink of its first run that a crash killed
    error: str | None = None
    stopped: bool = False  # the budget ran out during it

    def closed(self, session: Session, events: list[SinkEvent]) -> None:
        self.sessions += 1
        self.effects = self.effects + EffectCounts.of(events, f"scenario {self.scenario.name}")
        for kind, places in session.exercised.items():
            self.exercised.setdefault(kind, set()).update(places)
        for kind, names in session.exercised_variants.items():
            self.variants.setdefault(kind, set()).update(names)

    def merge_into(self, result: BatteryResult) -> None:
        for violation in self.violations:
            result.recorder.violation(violation)
        result.sessions += self.sessions
        result.effects = result.effects + self.effects
        if self.crash_events is not None and not any(s is self.scenario for s, _ in result.evidence):
            result.evidence.append((self.scenario, self.crash_events))
        if self.ran and not self.stopped:  # a scenario the budget cut is not counted
            result.ran += 1
            result.exercise.add(self.exercised, self.variants)
        if self.error is not None:
            result.error = self.error
        if self.stopped:
            result.stopped = True


def run_battery(
    build,
    bounds: Bounds,
    battery: list[Scenario],
    step_timeout,
    result: BatteryResult | None = None,
    jobs: int = 1,
) -> BatteryResult:
    """Run every scenario the adapter can express, `jobs` at a time, into `result` (a fresh one
    by default); violations go to its recorder, which also says when the time budget is spent
    (checked between steps)."""
    result = result if result is not None else BatteryResult(Recorder())
    cancelled = threading.Event()
    tasks = [
        (
            lambda scenario=scenario: _runs_of(
                build, bounds, scenario, step_timeout, result.recorder, cancelled
            )
        )
        for scenario in battery
    ]
    try:
        for runs in in_order(tasks, jobs, cancelled):
            runs.merge_into(result)
            if result.error is not None or result.stopped:
                break
    except BudgetSpent:
        result.stopped = True
    return result


def _runs_of(
    build, bounds: Bounds, scenario: Scenario, step_timeout, recorder: Recorder, cancelled: threading.Event
) -> ScenarioRuns:
    """Run `scenario`, then again with each newly found clause ignored, until it finds no new
    one (see the module docstring)."""
    runs = ScenarioRuns(scenario)

    def before_step() -> None:
        check(cancelled)
        recorder.check_budget()

    ignore: set[str] = set()
    try:
        for _ in range(len(CLAUSE_IDS)):  # once more per new clause found, ignoring the found ones
            before_step()
            try:
                session = Session(
                    build,
                    bounds.workflow,
                    bounds.values,
                    step_timeout=step_timeout,
                    before_step=before_step,
                    on_violation=runs.violations.append,
                    ignore=frozenset(ignore),
                    variants=scenario.variants,
                )
            except AdapterFailure as failure:
                runs.error = str(failure)
                return runs
            if any(not session.can(op) for op in scenario.needs):
                session.close()
                return runs
            session.on_close = runs.closed
            runs.ran = True
            violation = _run_scenario(session, scenario, runs)
            if runs.error is not None or violation is None:
                return runs
            ignore |= set(violation.clauses)
    except (BudgetSpent, Cancelled):
        runs.stopped = True
    return runs


def _run_scenario(session: Session, scenario: Scenario, runs: ScenarioRuns) -> Violation | None:
    try:
        try:
            scenario.run(session)
        finally:  # the evidence is read before the drain, which removes the sink
            killed = any(o["status"] == CRASHED for step in session.steps for o in step["outcome"])
            if scenario.crash is not None and killed and runs.crash_events is None:
                runs.crash_events = session.sink.events()
        session.finish()
    except Violation as violation:
        return violation
    except AdapterFailure as failure:
        runs.error = f"scenario {scenario.name}: {failure}"
    finally:
        if not session.drained:
            session.close()
    return None


def evidence_notes(evidence: list[tuple[Scenario, list[SinkEvent]]]) -> list[str]:
    """What crash scenarios show about re-execution, in the profile's words.

    After a SIGKILL right after a stage's checkpoint was written (`after-commit`), a correct
    layer never runs that stage again; the note says whether this configuration did, with the
    scenarios as evidence (the sink's execution log of the crashed thread). A scenario run once
    per variant is evidence once per stage: each stage is named once.
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
    reran, kept = list(dict.fromkeys(reran)), list(dict.fromkeys(kept))
    notes = []
    if reran:
        notes.append(
            "re-execution of durably recorded work after a SIGKILL: observed: "
            + "; ".join(reran)
            + " (scenarios crash-stage-S-after-commit, the sink's execution log)"
        )
    if kept:
        notes.append(
            "re-execution of durably recorded work after a SIGKILL: not observed for stage(s) "
            f"{', '.join(map(str, kept))}: killed right after the stage's checkpoint was written "
            "and recovered, each ran once (scenarios crash-stage-S-after-commit, the sink's "
            "execution log)"
        )
    return notes
