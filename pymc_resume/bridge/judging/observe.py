"""From what an adapter observes to a state of the model, so the model's own clause predicates
judge a live run.

`build_world` turns the observed checkpoint chains, recorded inputs, run leases and the effect
sink, plus the history the bridge itself keeps (the forks it made and their intents, which
threads crashed, resumes that were accepted where a refusal was due), into a
`pymc_resume.model.state.World`. The predicates in `pymc_resume.model.clauses` then run
unchanged: a live run is judged by exactly the definitions the explorer uses.
"""

from __future__ import annotations

import attrs

from pymc_resume.bridge.adapter import Observation
from pymc_resume.bridge.adapter.sink import SinkEvent
from pymc_resume.model.clauses import effect_identity
from pymc_resume.model.state import (
    DEAD,
    EDIT,
    FAILED,
    FREE,
    LIVE,
    NEW,
    NO_VALUE,
    REPLAY,
    ROOT,
    STARTED,
    Budget,
    Checkpoint,
    Thread,
    World,
)
from pymc_resume.model.workflow import DONE, NodeKind, StageKind, Workflow, value_name

RUNNERS = {"new": FREE, "free": FREE, "live": LIVE, "dead": DEAD, "failed": FREE}
STATUSES = {"new": NEW, "failed": FAILED}  # any other run state: started
INTENTS = {"replay": REPLAY, "edit": EDIT}


@attrs.frozen
class ForkRecord:
    """A fork the bridge made: from checkpoint `base` of `parent`, with its declared intent."""

    parent: int
    base: int
    intent: str  # "replay" or "edit"
    edit_value: int  # NO_VALUE for a replay fork
    inherited: int  # stages below this take their recorded input from the parent
    snapshot: tuple[Checkpoint, ...]  # the parent's chain up to `base` when the fork was made
    # The parent as it was when the fork was made: its whole chain, and its recorded inputs and
    # claims (None without `recorded-inputs`), pending records at the fork point included. Any
    # later change to them is a fork-determinism violation (`parent_changes`).
    parent_chain: tuple[Checkpoint, ...] = ()
    parent_inputs: dict[int, int] | None = None
    # How many values had been sent to the parent's parked interrupts when the fork was made
    # (`History.sent`): a record appearing at the fork point later is the parent's own only if
    # one of the values sent since made it.
    parent_sent: int = 0


@attrs.define
class History:
    """What the bridge remembers across steps that no store keeps."""

    forks: dict[int, ForkRecord] = attrs.Factory(dict)
    crashed: set[int] = attrs.Factory(set)  # a crash in the thread's history (forks inherit it)
    crashed_since_fork: set[int] = attrs.Factory(set)
    second_records: dict[int, list[tuple[int, int]]] = attrs.Factory(dict)  # accepted late resumes
    findings: list[tuple[str, str]] = attrs.Factory(list)  # (clause id, what was observed)
    # (clause id, what was observed): faults that follow from that clause's fault, counted
    # there only (docs/contract.md, "Where a derived fault is counted")
    derived: list[tuple[str, str]] = attrs.Factory(list)
    # thread -> (stage, head) where a schema-invalid resume value was refused while it was parked
    refused_invalid: dict[int, tuple[int, object]] = attrs.Factory(dict)
    # thread -> the values resumes sent to its parked interrupts, in order (not late resumes),
    # accepted or refused: a framework may record a value and then refuse the resume (the run
    # failed in a later node), and that record is still the thread's own
    sent: dict[int, list[int]] = attrs.Factory(dict)
    # (thread, stage, value) of an accepted late resume -> what the framework did with it
    late_seen: dict[tuple[int, int, int], str] = attrs.Factory(dict)


def parent_changes(
    history: History, observation: Observation, workflow: Workflow | None = None
) -> dict[int, str]:
    """Parent thread -> what changed in its checkpoints or recorded inputs since a fork was
    made from it (the first such fork), for every parent that changed; with `workflow`, also
    a checkpoint the parent committed after the fork that holds a fork's value where its own
    inputs give another (`future_change`)."""
    changed: dict[int, str] = {}
    for f, fork in sorted(history.forks.items()):
        if fork.parent in changed or fork.parent >= len(observation.threads):
            continue
        now = observation.threads[fork.parent]
        made = f"after fork t{f} was made from its checkpoint {fork.base}"
        if workflow is not None and (leaked := future_change(workflow, history, observation, f)) is not None:
            changed[fork.parent] = leaked
            continue
        point = fork.snapshot[-1].pc if fork.snapshot else None
        if tuple(now.chain[: len(fork.parent_chain)]) != fork.parent_chain:
            k = next(
                (k for k, (was, is_) in enumerate(zip(fork.parent_chain, now.chain)) if was != is_),
                min(len(now.chain), len(fork.parent_chain)),
            )
            changed[fork.parent] = f"the parent t{fork.parent}'s checkpoint {k} changed {made}"
            continue
        if fork.parent_inputs is None or now.inputs is None or point is None:
            continue
        own = set(history.sent.get(fork.parent, ())[fork.parent_sent :])
        for stage in sorted({*fork.parent_inputs, *now.inputs}):
            was, is_ = fork.parent_inputs.get(stage), now.inputs.get(stage)
            if stage > point or was == is_:
                continue
            if was is None and stage == point and is_ in own:
                continue  # the parent's own delivery to the interrupt it was parked at
            where = " (the fork point)" if stage == point else ""
            had = "no record" if was is None else value_name(was)
            became = "no record" if is_ is None else value_name(is_)
            changed[fork.parent] = (
                f"the parent t{fork.parent}'s recorded input at stage {stage}{where} "
                f"changed from {had} to {became} {made}"
            )
            break
    return changed


def future_change(workflow: Workflow, history: History, observation: Observation, f: int) -> str | None:
    """A checkpoint the parent of fork `f` committed after the fork was made that holds, at a
    node, a value its own recorded inputs do not give and one of its forks holds there: the
    fork's value in the parent's future (a client that kept the fork's state in memory and
    committed it as the parent's). The parent's future must be what it would have been without
    the fork (docs/contract.md). Judged only on a parent whose chain agreed with its own inputs
    when the fork was made and that never crashed (a crash's divergence is recovery's to judge);
    a value no fork holds is counted where it is seen, not here."""
    fork = history.forks[f]
    now = observation.threads[fork.parent]
    if now.inputs is None or fork.parent in history.crashed:
        return None
    if any(_disagreeing(workflow, entry, now.inputs) for entry in fork.parent_chain):
        return None
    forks = [
        t
        for t, other in history.forks.items()
        if other.parent == fork.parent and t < len(observation.threads)
    ]
    held = {
        (entry.pc, node, entry.app[node])
        for t in forks
        for entry in observation.threads[t].chain
        for node in range(len(entry.app))
    }
    for k in range(len(fork.parent_chain), len(now.chain)):
        entry = now.chain[k]
        for node, expected in _disagreeing(workflow, entry, now.inputs):
            if any(value == entry.app[node] and n == node for _, n, value in held):
                return (
                    f"the parent t{fork.parent}'s checkpoint {k}, committed after fork t{f} was made from "
                    f"its checkpoint {fork.base}, holds {value_name(entry.app[node])} at node {node}, a "
                    f"value of its fork, where its own inputs give {value_name(expected)}"
                )
    return None


def _disagreeing(workflow: Workflow, entry: Checkpoint, inputs: dict[int, int]) -> list[tuple[int, int]]:
    """(node, expected value) for each node of a stage `entry` committed whose value is not the
    one a crash-free run with `inputs` gives it (nodes past an input not recorded are unknown)."""
    app = list(workflow.initial_state())
    known: list[int] = []  # nodes whose value follows from the inputs, in stage order
    for position, stage in enumerate(workflow.stages[: entry.pc]):
        if stage.kind is StageKind.STEP:
            app[stage.node] = workflow.step_output(tuple(app), stage.node)
        elif stage.consumes:
            if inputs.get(position, NO_VALUE) == NO_VALUE:
                break
            app[stage.node] = inputs[position]
        elif workflow.nodes[stage.node] is NodeKind.EFFECT:
            app[stage.node] = DONE
        if stage.node not in known:
            known.append(stage.node)
    return [(node, app[node]) for node in known if entry.app[node] != app[node]]


def as_when_forked(history: History, observation: Observation) -> Observation:
    """`observation` read as if no fork had changed its parent: every fork parent's checkpoints
    and recorded inputs as they were when its first fork was made (what was added since is
    kept), and without the forks made from a record already changed (the first such fork and
    every thread after it: what they ran follows from the change). Threads are numbered in
    creation order, so the threads kept never name a dropped one as their parent."""
    views = list(observation.threads)
    original: dict[int, dict[int, int]] = {}  # parent -> its recorded inputs before any fork changed them
    for _f, fork in sorted(history.forks.items(), reverse=True):  # the earliest overlays last
        if fork.parent >= len(views):
            continue
        view = views[fork.parent]
        chain = fork.parent_chain + tuple(view.chain[len(fork.parent_chain) :])
        inputs = view.inputs
        if inputs is not None and fork.parent_inputs is not None:
            inputs = {**inputs, **fork.parent_inputs}
            point = fork.snapshot[-1].pc if fork.snapshot else -1
            own = history.sent.get(fork.parent, ())[fork.parent_sent :]
            if point not in fork.parent_inputs and point in inputs and inputs[point] not in own:
                # a record that appeared at the fork point and that no value the parent was
                # sent since made: as it would read had the fork not written there
                if own:
                    inputs[point] = own[0]
                else:
                    del inputs[point]
            original[fork.parent] = {**original.get(fork.parent, {}), **fork.parent_inputs}
        views[fork.parent] = attrs.evolve(view, chain=chain, inputs=inputs)
    for f, fork in sorted(history.forks.items()):
        before = original.get(fork.parent, {})
        copied = fork.parent_inputs or {}
        if any(before.get(stage, value) != value for stage, value in copied.items()):
            return Observation(tuple(views[:f]))
    return Observation(tuple(views))


def committed_upto(chain) -> int:
    return max((entry.stage + 1 for entry in chain if entry.stage >= 0), default=0)


def first_deliveries(workflow: Workflow, events: list[SinkEvent]) -> dict[tuple[int, int], set[str]]:
    """(thread, consuming stage) -> the delivery operations that executed it.

    A delivery is counted at the first consuming stage it executes (what it delivered to);
    recovery continuing a claim is role "recovery", not a second delivery.
    """
    seen: set[str] = set()
    executed: dict[tuple[int, int], set[str]] = {}
    for event in events:
        if event.kind != "execute" or event.role != "delivery" or event.op in seen:
            continue
        if workflow.consumes[event.stage]:
            seen.add(event.op)
            executed.setdefault((event.thread, event.stage), set()).add(event.op)
    return executed


def build_world(
    workflow: Workflow,
    history: History,
    observation: Observation,
    events: list[SinkEvent],
    capabilities: frozenset[str],
) -> World:
    stages = len(workflow.stages)
    deliveries = first_deliveries(workflow, events) if "executions" in capabilities else {}
    threads = []
    for t, view in enumerate(observation.threads):
        if view.inputs is not None:
            claims = tuple(view.inputs.get(s, NO_VALUE) for s in range(stages))
        else:  # without recorded inputs, what the committed checkpoints consumed
            consumed = {
                e.stage: e.app[workflow.stages[e.stage].node]
                for e in view.chain
                if e.stage >= 0 and workflow.consumes[e.stage]
            }
            claims = tuple(consumed.get(s, NO_VALUE) for s in range(stages))
        fork = history.forks.get(t)
        base_pc = view.chain[fork.base].pc if fork is not None and fork.base < len(view.chain) else 0
        ancestry_executed = fork is not None and any(
            e.kind == "execute" and e.thread == t and e.stage < base_pc for e in events
        )
        second = tuple(history.second_records.get(t, ())) + tuple(view.late_inputs or ())
        threads.append(
            Thread(
                chain=tuple(view.chain),
                status=STATUSES.get(view.run, STARTED),
                runner=RUNNERS[view.run],
                claims=claims,
                parent=fork.parent if fork else -1,
                base=fork.base if fork else -1,
                intent=INTENTS[fork.intent] if fork else ROOT,
                edit_value=fork.edit_value if fork else NO_VALUE,
                inherited=fork.inherited if fork else 0,
                by_reference=False,
                crashed=t in history.crashed,
                crashed_since_fork=t in history.crashed_since_fork,
                deliveries=tuple(len(deliveries.get((t, s), ())) for s in range(stages)),
                second_records=second,
                ancestry_executed=ancestry_executed,
            )
        )
    threads = tuple(threads)
    applied: dict[tuple, int] = {}
    for event in events:
        if event.kind == "fire" and event.applied and event.thread < len(threads):
            identity = effect_identity(workflow, threads, event.thread, event.stage, event.app)
            applied[identity] = applied.get(identity, 0) + 1
    return World(Budget(0, 0, 0, 0), (), threads, tuple(sorted(applied.items())))
