"""Conformance profiles: the clause-by-clause verdict of one adapter configuration.

A profile is a deterministic battery followed by a Hypothesis budget. The battery runs every
targeted scenario (`fuzzing/scenarios.py`) in a fresh session; a scenario that fails a clause is run
again with the clauses already found ignored, so that one early violation does not hide the
others. The budget then fuzzes the configuration (`fuzz.run_fuzz`) for whatever the scenarios
did not find. Every violation gets a minimal repro, confirmed by a replay, that
`pymc-resume replay` reproduces.

As in `fuzz`, findings are written as soon as they are known: a violated clause's repro when a
scenario first shows it, the confirmed and minimized one right after the battery, and the
profile so far through `publish` at each of these moments. A time budget (`Budget`) stops the
battery between scenarios and the fuzzing between steps; the profile then reports what it found.

Verdicts: `violated` (with its repro, and in how many of how many replays it reproduced),
`unconfirmed` (seen, never reproduced by a replay; never counted as violated), `holds` (no
scenario and no fuzzed example failed it; the reason counts only those that ran the id's
operations, and says where, `bridge/judging/evidence.py`), `not-applicable` (the framework cannot
express what the clause is about) or `skipped` (the adapter cannot observe what the clause
needs, or nothing ran its operations). Notes record evidence a reader needs next to the
verdicts: whether work whose checkpoint was durably written ran again after a SIGKILL (the
profile's), and the sink's counts of fires and applications, the key it deduplicated by and
every re-fire a key hid (the `effect-exactly-once` cell's). Each profile also carries its
operation table (`operation_table`): each contract operation and the framework call the adapter
declares for it.

May import: `bridge.adapter`, `bridge.hosting`, `bridge.judging`, `bridge.repro`,
`bridge.fuzzing` and `pymc_resume.model` (adapters only by name, through the registry).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import attrs

from pymc_resume.bridge.adapter import (
    CONTRACT_OPERATIONS,
    INTENTS,
    WARM_CLIENTS,
    declared_variants,
    expressible_workflow,
    framework_calls,
    unsupported_operations,
    variants_of,
)
from pymc_resume.bridge.fuzzing.battery import BatteryResult, evidence_notes, run_battery
from pymc_resume.bridge.fuzzing.budget import Budget
from pymc_resume.bridge.fuzzing.fuzz import (
    UNCONFIRMED,
    ClauseResult,
    Findings,
    FuzzReport,
    Recorder,
    Target,
    being_confirmed,
    declared_names,
    run_fuzz,
)
from pymc_resume.bridge.fuzzing.scenarios import scenarios
from pymc_resume.bridge.hosting.host import AdapterInfo
from pymc_resume.bridge.hosting.registry import Configuration, factory
from pymc_resume.bridge.hosting.template import HostTemplates, templates_in
from pymc_resume.bridge.hosting.workdirs import sweep
from pymc_resume.bridge.judging.clauses import not_expressible, unobservable
from pymc_resume.bridge.judging.evidence import (
    EffectCounts,
    Evidence,
    effect_notes,
    effects_json,
    holds_reason,
    not_exercised_reason,
    variants_exercising,
    variants_in,
    variants_phrase,
)
from pymc_resume.model.bounds import Bounds
from pymc_resume.model.contract import (
    CLAUSE_IDS,
    CONSUME_ONCE_VALUE,
    EFFECT_EXACTLY_ONCE,
    HOLDS,
    NOT_APPLICABLE,
    SKIPPED,
    VIOLATED,
)

# An operation the adapter performs without naming the framework call it uses.
NOT_DECLARED = "(not declared)"
NOT_APPLICABLE_CALL = "not-applicable: "


def operation_table(info: AdapterInfo) -> dict[str, str]:
    """Contract operation -> the framework's public call(s) the adapter declares for it (its
    variants' calls, joined by " | "; a crash as `framework_calls` names it),
    `not-applicable: <reason>` for one it declares `unsupported`, or `(not declared)`, in
    contract order. Raises ValueError for a malformed declaration."""
    unsupported = unsupported_operations(info)
    declared = framework_calls(info)
    table = {}
    for operation in CONTRACT_OPERATIONS:
        if operation in unsupported:
            table[operation] = NOT_APPLICABLE_CALL + unsupported[operation]
        else:
            table[operation] = declared.get(operation, NOT_DECLARED)
    return table


def variant_table(info: AdapterInfo) -> dict[str, list[dict]]:
    """Operation -> its variants (name, call, docs, a fork's intents), in contract order."""
    return {op: [v.as_json() for v in variants] for op, variants in declared_variants(info).items()}


def battery_variants(info: AdapterInfo) -> dict[str, dict[str, tuple[str, ...]]]:
    """Operation -> intent ("" but for forks) -> the names of its variants, as the battery
    wants them (`fuzzing/scenarios.py`)."""
    declared = declared_variants(info)
    table = {op: {"": tuple(v.name for v in variants)} for op, variants in declared.items()}
    for intent in INTENTS:
        table.setdefault("fork", {})[intent] = tuple(v.name for v in variants_of(declared, "fork", intent))
    return table


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
    stopped: str | None = None  # why the profile ended early (a time budget)
    finished: bool = True  # False while the run is still going (a profile published on the way)
    operations: dict[str, str] = attrs.Factory(dict)  # `operation_table`
    variants: dict[str, list[dict]] = attrs.Factory(dict)  # `variant_table`
    effects: dict | None = None  # the sink's counts, the key and why (`evidence.effects_json`)
    # Where the time went: hosts started, calls into them, the bridge's own CPU (`HostStats`).
    hosting: dict | None = None

    @property
    def violated(self) -> list[str]:
        return [cid for cid, result in self.clauses.items() if result.verdict == VIOLATED]

    @property
    def unconfirmed(self) -> list[str]:
        """Ids seen violated whose repro no replay reproduced: listed apart, never violated."""
        return [cid for cid, result in self.clauses.items() if result.verdict == UNCONFIRMED]

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
            "operations": dict(self.operations),
            "variants": {op: list(variants) for op, variants in self.variants.items()},
            "clauses": {cid: result.as_json() for cid, result in self.clauses.items()},
            "notes": list(self.notes),
            "effects": self.effects,
            "scenarios": self.scenarios,
            "examples": self.examples,
            "seconds": round(self.seconds, 1),
            "error": self.error,
            "stopped": self.stopped,
            "finished": self.finished,
            "hosting": self.hosting,
        }


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
    budget: Budget | None = None,
    publish: Callable[[Profile], None] | None = None,
    jobs: int = 1,
    templates: HostTemplates | None = None,
) -> Profile:
    """The conformance profile of one configuration: the battery, then `examples` fuzzed ones.
    `shrink=False` keeps each violation's failing steps as found (confirmed by a replay).
    `budget` limits the time (see `bridge/fuzzing/budget.py`); `publish` gets the profile so far
    whenever a finding changes it. `jobs`: how many scenarios, fuzz shards and confirmations
    run side by side (the verdicts are the same for any number); `templates`: where hosts are
    forked from (`hosting/template.py`; None: templates of this profile's own).

    Raises `registry.AdapterSpecError` when the adapter cannot be built.
    """
    return ProfileRun(
        family,
        configuration,
        bounds,
        examples=examples,
        steps=steps,
        seed=seed,
        repro_dir=Path(repro_dir),
        step_timeout=step_timeout,
        shrink=shrink,
        say=progress or (lambda message: None),
        budget=budget or Budget(),
        publish=publish,
        jobs=jobs,
        templates=templates,
    ).run()


@attrs.define
class ProfileRun:
    """One `run_profile`: its settings, then what the battery and the fuzzing found."""

    family: str
    configuration: Configuration
    bounds: Bounds
    examples: int
    steps: int
    seed: int | None
    repro_dir: Path
    step_timeout: float | None
    shrink: bool
    say: Callable[[str], None]
    budget: Budget
    publish: Callable[[Profile], None] | None
    jobs: int = 1
    templates: HostTemplates | None = None
    started: float = attrs.Factory(time.perf_counter)
    hosting: tuple | None = None  # (the run's HostStats, a snapshot at the start, process time then)
    target: Target | None = None
    findings: Findings | None = None
    battery: BatteryResult | None = None
    fuzzed: FuzzReport | None = None

    def run(self) -> Profile:
        sweep()  # work directories a killed run left behind
        with templates_in(self.templates, self.say) as templates:
            return self._run(templates)

    def _run(self, templates: HostTemplates) -> Profile:
        self.hosting = (templates.stats, templates.stats.snapshot(), time.process_time())
        configuration, bounds = self.configuration, self.bounds
        builder = factory(
            configuration.adapter, configuration.options, timeout=self.step_timeout, templates=templates
        )
        self.target = Target(
            configuration.adapter,
            builder.info,
            bounds,
            self.seed,
            self.repro_dir,
            self.step_timeout,
            templates,
        )
        self.findings = Findings(self.target, changed=self._publish)
        unsupported = unsupported_operations(builder.info)
        workflow = expressible_workflow(bounds.workflow, unsupported)
        warm = WARM_CLIENTS in builder.info.capabilities
        every = scenarios(workflow, bounds.processes, battery_variants(builder.info), warm)
        battery = [s for s in every if not set(s.needs) & set(unsupported)]  # those that can run
        self.say(f"{self.family} {configuration.name}: {len(battery)} targeted scenarios")
        # No shrink budget here: the battery's scenarios are short already, and are not shrunk.
        recorder = Recorder(self.budget, shrink=False, on_violation=self.findings.seen)
        self.battery = BatteryResult(recorder)  # filled in as it runs: what is published on the way
        run_battery(builder, bounds, battery, self.step_timeout, self.battery, self.jobs)
        found = [cid for cid in CLAUSE_IDS if cid in recorder.first_by_clause]
        self.findings.confirm_all(found, recorder, self.budget, self.shrink, self.jobs)
        if self.examples > 0 and self.battery.error is None and not self.budget.spent():
            self.say(f"{self.family} {configuration.name}: fuzzing, {self.examples} examples")
            self.fuzzed = run_fuzz(
                configuration.adapter,
                configuration.options,
                bounds,
                examples=self.examples,
                steps=self.steps,
                seed=self.seed,
                repro_dir=self.repro_dir,
                step_timeout=self.step_timeout,
                shrink=self.shrink,
                known=frozenset(found),
                budget=self.budget,
                publish=self._fuzzing,
                jobs=self.jobs,
                templates=templates,
            )
        self.findings.check_written()
        profile = self.profile(finished=True)
        if self.publish is not None:
            self.publish(profile)
        return profile

    def _fuzzing(self, report: FuzzReport) -> None:
        self.fuzzed = report
        self._publish()

    def _publish(self) -> None:
        if self.publish is not None:
            self.publish(self.profile(finished=False))

    def profile(self, finished: bool) -> Profile:
        battery, fuzzed, info = self.battery, self.fuzzed, self.target.info
        clauses = {}
        for cid in CLAUSE_IDS:
            result = self._with_variants_seen(cid, self._verdict(cid, finished))
            clauses[cid] = self._with_late_resumes_seen(cid, result)
        error = (battery.error if battery is not None else None) or (
            fuzzed.error if fuzzed is not None else None
        )
        stopped = None
        if (battery is not None and battery.stopped) or (fuzzed is not None and fuzzed.stopped):
            stopped = self.budget.stopped_reason()
        notes = tuple(evidence_notes(battery.evidence)) if battery is not None else ()
        effects = self._effects()
        if clauses[EFFECT_EXACTLY_ONCE].verdict != NOT_APPLICABLE:
            clauses[EFFECT_EXACTLY_ONCE] = attrs.evolve(
                clauses[EFFECT_EXACTLY_ONCE],
                notes=clauses[EFFECT_EXACTLY_ONCE].notes
                + effect_notes(info.effect_key, effects, self._sessions_text()),
            )
        return Profile(
            self.family,
            self.configuration,
            info.version,
            clauses,
            notes,
            battery.ran if battery is not None else 0,
            fuzzed.examples if fuzzed is not None else 0,
            time.perf_counter() - self.started,
            error,
            stopped,
            finished,
            operation_table(info),
            variant_table(info),
            effects_json(info.effect_key, effects),
            self._hosting(),
        )

    def _hosting(self) -> dict | None:
        """The hosts this profile started and its calls into them, and the CPU seconds of the
        bridge itself (every thread of it; the hosts' CPU is theirs, see bench/bridge.py)."""
        if self.hosting is None:
            return None
        stats, before, cpu = self.hosting
        return {**stats.since(before).as_json(), "bridge_cpu_seconds": round(time.process_time() - cpu, 3)}

    def _with_variants_seen(self, clause_id: str, result: ClauseResult) -> ClauseResult:
        """A violated cell noting every variant its battery violations were seen with (the repro
        shows one of them), so that a cell decided under several calls says so."""
        if result.verdict not in (VIOLATED, UNCONFIRMED) or self.battery is None:
            return result
        seen = self.battery.recorder.violations
        variants = sorted({name for v in seen if clause_id in v.clauses for name in variants_in(v.steps)})
        if not variants:
            return result
        note = f"seen violated in the targeted scenarios with: {', '.join(variants)}"
        return attrs.evolve(result, notes=(*result.notes, note), variants=tuple(variants))

    def _with_late_resumes_seen(self, clause_id: str, result: ClauseResult) -> ClauseResult:
        """A violated consume-once-value cell noting what the framework did with every late
        resume of the battery, where they differ: the repro shows one of them (Google ADK
        ignores a second confirmation to a completed call, and runs an uncommitted one with it)."""
        if clause_id != CONSUME_ONCE_VALUE or self.battery is None:
            return result
        if result.verdict not in (VIOLATED, UNCONFIRMED):
            return result
        seen = self.battery.exercise.where(clause_id)
        if len(seen) < 2:
            return result
        note = f"late resumes in the targeted scenarios: {'; '.join(seen)}"
        return attrs.evolve(result, notes=(*result.notes, note))

    def _effects(self) -> EffectCounts:
        """The sink's counts over the battery's sessions and the fuzzed examples."""
        effects = self.battery.effects if self.battery is not None else EffectCounts()
        if self.fuzzed is not None and self.fuzzed.effects is not None:
            fuzzed = self.fuzzed.effects
            effects = effects + EffectCounts(
                fuzzed["fires"],
                fuzzed["applications"],
                fuzzed["keyed_fires"],
                fuzzed["keyed_applications"],
                fuzzed["hidden_refires"],
                tuple(fuzzed["hidden_refire_examples"]),
                tuple(fuzzed["example_keys"]),
            )
        return effects

    def _sessions_text(self) -> str:
        sessions = self.battery.sessions if self.battery is not None else 0
        text = f"{sessions} battery sessions"
        if self.fuzzed is not None:
            text += f" and {self.fuzzed.examples} fuzzed examples"
        return text

    def _evidence_parts(self) -> list[tuple[Evidence, str]]:
        parts = [(self.battery.exercise, "targeted scenarios")]
        if self.fuzzed is not None:
            parts.append((self.fuzzed.evidence, "fuzzed examples"))
        return parts

    def _unfailed(self, clause_id: str, suffix: str = "") -> ClauseResult:
        """A clause nothing failed: `holds`, counting the scenarios and examples that ran its
        operations and where; `skipped` when none did (it was not checked)."""
        parts = self._evidence_parts()
        reason = holds_reason(clause_id, parts)
        if reason is None:
            return ClauseResult(SKIPPED, reason=not_exercised_reason(clause_id, parts) + suffix)
        reason += variants_phrase(clause_id, parts, declared_names(self.target.info))
        return ClauseResult(
            HOLDS, reason=reason + suffix, variants=tuple(variants_exercising(clause_id, parts))
        )

    def _verdict(self, clause_id: str, finished: bool) -> ClauseResult:
        battery, fuzzed, info = self.battery, self.fuzzed, self.target.info
        not_applicable = not_expressible(unsupported_operations(info))
        unjudged = unobservable(info.capabilities)
        if clause_id in not_applicable:
            return ClauseResult(NOT_APPLICABLE, reason=not_applicable[clause_id])
        if clause_id in unjudged:
            return ClauseResult(SKIPPED, reason=unjudged[clause_id])
        if clause_id in self.findings.results:
            return self.findings.results[clause_id]
        if battery is None:
            return ClauseResult(HOLDS, reason="no scenario has failed it so far (the run is still going)")
        if clause_id in battery.recorder.first_by_clause:
            return being_confirmed(battery.recorder, clause_id)
        if not finished and fuzzed is None:
            return ClauseResult(
                HOLDS,
                reason=f"held in the {battery.ran} targeted scenarios run so far (the run is still going)",
            )
        if fuzzed is None or not fuzzed.clauses:
            if battery.error is not None:
                return ClauseResult(SKIPPED, reason=f"the adapter failed: {battery.error}")
            if battery.stopped and battery.ran == 0:
                return ClauseResult(
                    SKIPPED, reason=f"not judged: {self.budget.stopped_reason()} before any scenario ran"
                )
            if battery.stopped:
                return self._unfailed(clause_id, f"; stopped early: {self.budget.stopped_reason()}")
            return self._unfailed(clause_id, " (no fuzzing)")
        result = fuzzed.clauses[clause_id]
        if result.verdict in (VIOLATED, UNCONFIRMED) or fuzzed.error is not None:
            return result
        suffix = f"; {fuzzed.steps} fuzzed steps"
        if fuzzed.stopped:
            suffix += f"; stopped early: {fuzzed.stopped}"
        if not fuzzed.finished:
            suffix += " so far (the run is still going)"
        return self._unfailed(clause_id, suffix)
