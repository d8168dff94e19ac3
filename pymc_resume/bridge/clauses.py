"""Judging an observed run: the model's clause predicates on the observed world, what the bridge
sees directly (a refusal that did not come), the liveness drain's outcome, and which clauses an
adapter cannot be judged on.

Each violation comes with a sentence saying what was observed.
"""

from __future__ import annotations

from pymc_resume.model.clauses import CHECKS, effect_identity, is_quiescent, recorded_inputs
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.model.state import NO_VALUE, World
from pymc_resume.model.workflow import APPROVE, UNSET, StageKind, Workflow

# What an adapter must let the bridge observe for a clause to be judged.
REQUIRES: dict[str, frozenset[str]] = {
    "consume-once-consumption": frozenset({"executions"}),
    "fork-determinism": frozenset({"executions"}),
    "fork-intent": frozenset({"recorded-inputs"}),
    "liveness": frozenset({"leases"}),
}


def unobservable(capabilities: frozenset[str]) -> dict[str, str]:
    """Clause id -> why it cannot be judged on an adapter with these capabilities."""
    missing = {}
    for clause_id, needed in REQUIRES.items():
        lacking = sorted(needed - capabilities)
        if lacking:
            missing[clause_id] = f"the adapter cannot observe {', '.join(lacking)}"
    return missing


def judge_world(workflow: Workflow, world: World, skip: dict[str, str]) -> dict[str, str]:
    """Clause id -> what was observed, for every state predicate that fails on `world`."""
    violated = {}
    for clause_id, check in CHECKS.items():
        if clause_id not in skip and not check(workflow, world):
            violated[clause_id] = explain(clause_id, workflow, world)
    return violated


def judge_liveness(workflow: Workflow, world: World) -> str | None:
    """After the drain: why the run is not quiescent, or None when it is."""
    if is_quiescent(workflow, world):
        return None
    stuck = []
    for t, thread in enumerate(world.threads):
        pc = thread.head.pc
        if pc == workflow.end:
            continue
        if workflow.consumes[pc] and thread.claims[pc] == NO_VALUE and thread.runner == 0:
            continue
        stuck.append(f"t{t} at stage {pc} ({_lease(thread.runner)}, "
                     f"claim {_value(thread.claims[pc]) if workflow.consumes[pc] else 'n/a'})")
    return "after recovering every crashed thread and starting every new one, not quiescent: " + "; ".join(stuck)


def ordered(violations: dict[str, str]) -> dict[str, str]:
    return {cid: violations[cid] for cid in CLAUSE_IDS if cid in violations}


# -- what was observed ---------------------------------------------------------------------

def _lease(runner: int) -> str:
    return {0: "lease free", 1: "lease held", 2: "lease held by a crashed process"}.get(runner, "stuck")


def _value(value: int) -> str:
    return "none" if value == NO_VALUE else ("invalid" if value < 0 else f"v{value}")


def explain(clause_id: str, workflow: Workflow, world: World) -> str:
    threads = world.threads
    if clause_id == "prefix-continuation":
        for t, thread in enumerate(threads):
            committed = [e.stage for e in thread.chain if e.stage >= 0]
            if committed != list(range(len(committed))) or thread.head.pc != len(committed):
                return f"t{t} committed stages {committed} with head at stage {thread.head.pc}"
    if clause_id == "effect-exactly-once":
        for identity, count in world.sink:
            if count > 1:
                return f"effect {_identity(identity)} applied {count} times"
        applied = dict(world.sink)
        for t, thread in enumerate(threads):
            for entry in thread.chain:
                if entry.stage < 0:
                    continue
                stage = workflow.stages[entry.stage]
                if stage.kind is StageKind.EFFECT or (
                    stage.kind is StageKind.GATED and entry.app[stage.node] == APPROVE
                ):
                    identity = effect_identity(workflow, threads, t, entry.stage, entry.app)
                    if applied.get(identity) != 1:
                        return (f"quiescent, t{t} committed stage {entry.stage} but its effect "
                                f"{_identity(identity)} was applied {applied.get(identity, 0)} times")
    if clause_id == "fork-determinism":
        for t, thread in enumerate(threads):
            if thread.parent < 0:
                continue
            parent = threads[thread.parent]
            if thread.chain[: thread.base + 1] != parent.chain[: thread.base + 1]:
                return f"fork t{t} and its parent t{thread.parent} differ up to checkpoint {thread.base}"
            if thread.ancestry_executed:
                return f"fork t{t} executed a stage of its checkpoint's ancestry"
        return "two forks from one checkpoint with the same intent and inputs reached different states"
    if clause_id == "checkpoint-validity":
        for t, thread in enumerate(threads):
            for k, entry in enumerate(thread.chain):
                if not workflow.is_valid(entry.app):
                    return f"t{t} checkpoint {k} holds a schema-invalid state {list(entry.app)}"
            if any(v < 0 and v != NO_VALUE for v in thread.claims):
                return f"t{t} recorded a schema-invalid resume value"
    if clause_id == "consume-once-value":
        for t, thread in enumerate(threads):
            if thread.second_records:
                stage, value = thread.second_records[0]
                return (f"a resume of {_value(value)} to the interrupt at stage {stage} of t{t}, "
                        "which had already consumed a value, was accepted instead of refused")
            return f"t{t} continued with a value other than the one its interrupt consumed"
    if clause_id == "consume-once-consumption":
        for t, thread in enumerate(threads):
            for stage, count in enumerate(thread.deliveries):
                if count > 1:
                    return f"{count} deliveries executed the interrupt at stage {stage} of t{t}"
    if clause_id == "recovery-determinism":
        for t, thread in enumerate(threads):
            if thread.crashed and thread.head.pc == workflow.end:
                recorded = {s: thread.claims[s] for s in workflow.consuming}
                updates = recorded_inputs(thread)[1]
                expected = workflow.replay(recorded, updates[-1] if updates else UNSET)
                if thread.head.app != expected:
                    return (f"t{t} completed after a crash with state {list(thread.head.app)}; the "
                            f"crash-free run of its inputs gives {list(expected)}")
    if clause_id == "fork-intent":
        for t, thread in enumerate(threads):
            if thread.parent < 0:
                continue
            parent = threads[thread.parent]
            if thread.intent == 2:
                edited = thread.chain[thread.base].pc
                wrong = thread.claims[edited] != thread.edit_value
            else:
                wrong = thread.claims[: thread.inherited] != parent.claims[: thread.inherited]
            if wrong:
                return (f"fork t{t} ({'edit' if thread.intent == 2 else 'replay'}) recorded inputs "
                        f"{[_value(v) for v in thread.claims]}; its parent t{thread.parent} recorded "
                        f"{[_value(v) for v in threads[thread.parent].claims]}")
    return "the clause's predicate fails on the observed store and sink"


def _identity(identity: tuple) -> str:
    lineage, node, inputs = identity
    return f"(lineage t{lineage}, node {node}, inputs {[_value(v) for v in inputs]})"
