"""The seven clauses and the `fork-intent` obligation as predicates on one state.

Each check takes the workflow and a `World` and returns True when the clause holds there; the
history variables in `Thread` (crash flags, delivery counts, second records) carry what a check
needs from the past. `liveness` is a graph property: `is_quiescent` is its goal.
"""

from __future__ import annotations

from pymc_resume.model.state import EDIT, FREE, IDLE, NEW, NO_VALUE, REPLAY, UPDATE, Thread, World
from pymc_resume.model.workflow import APPROVE, INVALID, UNSET, StageKind, Workflow


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
    """No process is working; every thread is complete or parked with no claim outstanding."""
    if any(p.phase != IDLE for p in world.processes):
        return False
    for thread in world.threads:
        if thread.status == NEW or thread.runner != FREE:
            return False
        pc = thread.head.pc
        if pc != workflow.end and not (
            workflow.consumes[pc] and thread.claims[pc] == NO_VALUE
        ):
            return False
    return True


def prefix_continuation(workflow: Workflow, world: World) -> bool:
    for thread in world.threads:
        committed = [entry.stage for entry in thread.chain if entry.stage >= 0]
        if committed != list(range(len(committed))) or thread.head.pc != len(committed):
            return False
    return True


def effect_exactly_once(workflow: Workflow, world: World) -> bool:
    if any(applications > 1 for _, applications in world.sink):
        return False
    if not is_quiescent(workflow, world):
        return True
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
                    return False
    return True


def recorded_inputs(thread: Thread) -> tuple:
    """What a thread consumed: its recorded resume values and its persisted updates."""
    updates = tuple(entry.app[-1] for entry in thread.chain if entry.stage == UPDATE)
    return thread.claims, updates


def fork_determinism(workflow: Workflow, world: World) -> bool:
    threads = world.threads
    for thread in threads:
        if thread.parent < 0:
            continue
        parent = threads[thread.parent]
        start = thread.chain[thread.base].pc
        if thread.chain[: thread.base + 1] != parent.chain[: thread.base + 1]:
            return False  # not c's state and ancestry, or the parent's checkpoints changed
        if thread.claims[:start] != parent.claims[:start]:
            return False  # the parent's recorded inputs changed
        if thread.ancestry_executed:
            return False
    finished = [
        th for th in threads
        if th.parent >= 0 and th.head.pc == workflow.end and not th.crashed_since_fork
    ]
    for a, first in enumerate(finished):
        for second in finished[a + 1 :]:
            same_fork = (first.parent, first.base, first.intent, first.edit_value) == (
                second.parent, second.base, second.intent, second.edit_value
            )
            if same_fork and recorded_inputs(first) == recorded_inputs(second):
                if first.head.app != second.head.app:
                    return False
    return True


def checkpoint_validity(workflow: Workflow, world: World) -> bool:
    for thread in world.threads:
        if INVALID in thread.claims:
            return False
        for entry in thread.chain:
            if not workflow.is_valid(entry.app):
                return False
    return True


def consume_once_value(workflow: Workflow, world: World) -> bool:
    for thread in world.threads:
        if thread.second_records:
            return False
        head = thread.head
        for position in workflow.consuming:
            claimed = thread.claims[position]
            if position < head.pc and claimed != NO_VALUE:
                if head.app[workflow.stages[position].node] != claimed:
                    return False
    return True


def consume_once_consumption(workflow: Workflow, world: World) -> bool:
    return all(count <= 1 for thread in world.threads for count in thread.deliveries)


def recovery_determinism(workflow: Workflow, world: World) -> bool:
    for thread in world.threads:
        if thread.crashed and thread.head.pc == workflow.end:
            recorded = {s: thread.claims[s] for s in workflow.consuming}
            updates = recorded_inputs(thread)[1]
            note = updates[-1] if updates else UNSET
            if thread.head.app != workflow.replay(recorded, note):
                return False
    return True


def fork_intent(workflow: Workflow, world: World) -> bool:
    threads = world.threads
    for thread in threads:
        if thread.parent < 0:
            continue
        parent = threads[thread.parent]
        if thread.intent == EDIT:
            edited = thread.chain[thread.base].pc
            if thread.claims[edited] != thread.edit_value or thread.edit_value == parent.claims[edited]:
                return False
        elif thread.intent == REPLAY:
            if thread.claims[: thread.inherited] != parent.claims[: thread.inherited]:
                return False
        else:
            return False  # a fork without a declared intent
    return True


# The state invariants, keyed by contract id (liveness is checked on the graph).
CHECKS = {
    "prefix-continuation": prefix_continuation,
    "effect-exactly-once": effect_exactly_once,
    "fork-determinism": fork_determinism,
    "checkpoint-validity": checkpoint_validity,
    "consume-once-value": consume_once_value,
    "consume-once-consumption": consume_once_consumption,
    "recovery-determinism": recovery_determinism,
    "fork-intent": fork_intent,
}
