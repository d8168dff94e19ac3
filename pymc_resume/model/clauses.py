"""The seven clauses and the `fork-intent` obligation as checks on one state.

Each check takes the workflow and a `World` and returns None when the clause holds there, or a
sentence saying what it observed when it does not: the explorer needs only the verdict, the
bridge reports the sentence. The history variables in `Thread` (crash flags, delivery counts,
second records) carry what a check needs from the past. `liveness` is a graph property:
`is_quiescent` is its goal.
"""

from __future__ import annotations

from pymc_resume.model.contract import (
    CHECKPOINT_VALIDITY,
    CONSUME_ONCE_CONSUMPTION,
    CONSUME_ONCE_VALUE,
    EFFECT_EXACTLY_ONCE,
    FORK_DETERMINISM,
    FORK_INTENT,
    PREFIX_CONTINUATION,
    RECOVERY_DETERMINISM,
)
from pymc_resume.model.state import EDIT, FAILED, FREE, IDLE, NEW, NO_VALUE, REPLAY, UPDATE, Thread, World
from pymc_resume.model.workflow import APPROVE, INVALID, UNSET, StageKind, Workflow, value_name


def lineage(threads: tuple[Thread, ...], t: int, stage: int) -> int:
    """The lineage of an effect at `stage` of thread `t`: the root, or the nearest edit fork
    on its ancestry whose edited interrupt precedes (or is) that stage."""
    while True:
        thread = threads[t]
        if thread.intent == EDIT and stage >= thread.chain[thread.base].pc:
            return t
        if thread.parent < 0:
            return t
        t = thread.parent


def effect_identity(workflow: Workflow, threads, t: int, stage: int, app: tuple) -> tuple:
    """An effect's identity, which is also its idempotency key: (lineage, node, inputs).

    `app` is the state the execution saw; a gated node's own value is one of its inputs.
    """
    node = workflow.stages[stage].node
    inputs = workflow.inputs_before(app, node)
    if workflow.stages[stage].kind is StageKind.GATED:
        inputs += (app[node],)
    return (lineage(threads, t, stage), node, inputs)


def is_quiescent(workflow: Workflow, world: World) -> bool:
    """No process is working; every thread is complete, failed (a node's output was refused),
    or parked with no claim outstanding."""
    if any(p.phase != IDLE for p in world.processes):
        return False
    for thread in world.threads:
        if thread.status == NEW or thread.runner != FREE:
            return False
        if thread.status == FAILED:
            continue
        pc = thread.head.pc
        if pc != workflow.end and not (workflow.consumes[pc] and thread.claims[pc] == NO_VALUE):
            return False
    return True


def _identity(identity: tuple) -> str:
    lineage, node, inputs = identity
    return f"(lineage t{lineage}, node {node}, inputs {[value_name(v) for v in inputs]})"


# Each check returns None where its clause holds in `world`, else what was observed, in words.
Reason = str | None


def prefix_continuation(workflow: Workflow, world: World) -> Reason:
    for t, thread in enumerate(world.threads):
        committed = [entry.stage for entry in thread.chain if entry.stage >= 0]
        if committed != list(range(len(committed))) or thread.head.pc != len(committed):
            return f"t{t} committed stages {committed} with its head at stage {thread.head.pc}"
    return None


def effect_exactly_once(workflow: Workflow, world: World) -> Reason:
    for identity, applications in world.sink:
        if applications > 1:
            return f"effect {_identity(identity)} applied {applications} times"
    if not is_quiescent(workflow, world):
        return None
    applied = dict(world.sink)
    for t, thread in enumerate(world.threads):
        for entry in thread.chain:
            if entry.stage < 0:
                continue
            stage = workflow.stages[entry.stage]
            fires = stage.kind is StageKind.EFFECT or (
                stage.kind is StageKind.GATED and entry.app[stage.node] == APPROVE
            )
            if fires:
                identity = effect_identity(workflow, world.threads, t, entry.stage, entry.app)
                if applied.get(identity) != 1:
                    return (
                        f"quiescent, t{t} committed stage {entry.stage} but its effect "
                        f"{_identity(identity)} was applied {applied.get(identity, 0)} times"
                    )
    return None


def recorded_inputs(thread: Thread) -> tuple:
    """What a thread consumed: its recorded resume values and its persisted updates."""
    updates = tuple(entry.app[-1] for entry in thread.chain if entry.stage == UPDATE)
    return thread.claims, updates


def fork_determinism(workflow: Workflow, world: World) -> Reason:
    threads = world.threads
    for t, thread in enumerate(threads):
        if thread.parent < 0:
            continue
        parent = threads[thread.parent]
        start = thread.chain[thread.base].pc
        if thread.chain[: thread.base + 1] != parent.chain[: thread.base + 1]:
            return (
                f"fork t{t} and its parent t{thread.parent} differ up to checkpoint "
                f"{thread.base} (not the checkpoint's state, or the parent changed)"
            )
        if thread.claims[:start] != parent.claims[:start]:
            return f"the parent t{thread.parent}'s recorded inputs changed under fork t{t}"
        if thread.ancestry_executed:
            return f"fork t{t} executed a stage of its checkpoint's ancestry"
    finished = [
        (t, th)
        for t, th in enumerate(threads)
        if th.parent >= 0 and th.head.pc == workflow.end and not th.crashed_since_fork
    ]
    for a, (t1, first) in enumerate(finished):
        for t2, second in finished[a + 1 :]:
            same_fork = (first.parent, first.base, first.intent, first.edit_value) == (
                second.parent,
                second.base,
                second.intent,
                second.edit_value,
            )
            if same_fork and recorded_inputs(first) == recorded_inputs(second):
                if first.head.app != second.head.app:
                    return (
                        f"forks t{t1} and t{t2} of one checkpoint, with the same intent and "
                        "inputs, reached different states"
                    )
    return None


def checkpoint_validity(workflow: Workflow, world: World) -> Reason:
    for t, thread in enumerate(world.threads):
        if INVALID in thread.claims:
            return f"t{t} claimed a schema-invalid resume value"
        for k, entry in enumerate(thread.chain):
            if not workflow.is_valid(entry.app):
                return f"t{t} checkpoint {k} holds a schema-invalid state {list(entry.app)}"
    return None


def consume_once_value(workflow: Workflow, world: World) -> Reason:
    for t, thread in enumerate(world.threads):
        if thread.second_records:
            stage, value = thread.second_records[0]
            return (
                f"a resume of {value_name(value)} to the interrupt at stage {stage} of t{t}, "
                "which had already consumed a value, was recorded instead of refused"
            )
        head = thread.head
        for position in workflow.consuming:
            claimed = thread.claims[position]
            if position < head.pc and claimed != NO_VALUE:
                used = head.app[workflow.stages[position].node]
                if used != claimed:
                    return (
                        f"t{t} continued with {value_name(used)} at stage {position}, whose "
                        f"interrupt consumed {value_name(claimed)}"
                    )
    return None


def consume_once_consumption(workflow: Workflow, world: World) -> Reason:
    for t, thread in enumerate(world.threads):
        for stage, count in enumerate(thread.deliveries):
            if count > 1:
                return f"{count} deliveries executed the interrupt at stage {stage} of t{t}"
    return None


def recovery_determinism(workflow: Workflow, world: World) -> Reason:
    for t, thread in enumerate(world.threads):
        if thread.crashed and thread.head.pc == workflow.end:
            recorded = {s: thread.claims[s] for s in workflow.consuming}
            updates = recorded_inputs(thread)[1]
            expected = workflow.replay(recorded, updates[-1] if updates else UNSET)
            if thread.head.app != expected:
                return (
                    f"t{t} completed after a crash with state {list(thread.head.app)}; the "
                    f"crash-free run of its inputs gives {list(expected)}"
                )
    return None


def fork_intent(workflow: Workflow, world: World) -> Reason:
    threads = world.threads
    for t, thread in enumerate(threads):
        if thread.parent < 0:
            continue
        parent = threads[thread.parent]
        if thread.intent == EDIT:
            edited = thread.chain[thread.base].pc
            # Only the fork's own record is compared: its new input is drawn unlike the parent's
            # record at fork time, and a parent parked at the fork point records its own value
            # later (a change to the parent's record is fork-determinism's to judge).
            if thread.claims[edited] != thread.edit_value:
                return (
                    f"edit fork t{t} consumed {value_name(thread.claims[edited])} at stage {edited}"
                    f", not its new input {value_name(thread.edit_value)}"
                )
        elif thread.intent == REPLAY:
            if thread.claims[: thread.inherited] != parent.claims[: thread.inherited]:
                return (
                    f"replay fork t{t} recorded inputs {[value_name(v) for v in thread.claims]}; "
                    f"its parent t{thread.parent} recorded "
                    f"{[value_name(v) for v in parent.claims]}"
                )
        else:
            return f"fork t{t} declares no intent"
    return None


# The state invariants, keyed by contract id (liveness is checked on the graph).
CHECKS = {
    PREFIX_CONTINUATION: prefix_continuation,
    EFFECT_EXACTLY_ONCE: effect_exactly_once,
    FORK_DETERMINISM: fork_determinism,
    CHECKPOINT_VALIDITY: checkpoint_validity,
    CONSUME_ONCE_VALUE: consume_once_value,
    CONSUME_ONCE_CONSUMPTION: consume_once_consumption,
    RECOVERY_DETERMINISM: recovery_determinism,
    FORK_INTENT: fork_intent,
}

# The checks that read nothing but `world.threads`: the explorer may judge them once per
# distinct tuple of threads, which recurs across many worlds (see `ResumeModel.all_hold`).
THREAD_ONLY = tuple(name for name in CHECKS if name != EFFECT_EXACTLY_ONCE)
