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
from pymc_resume.bridge.sink import SinkEvent
from pymc_resume.model.clauses import effect_identity
from pymc_resume.model.state import (
    DEAD, EDIT, FAILED, FREE, LIVE, NEW, NO_VALUE, REPLAY, ROOT, STARTED, Budget, Checkpoint, Thread, World,
)
from pymc_resume.model.workflow import Workflow

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


@attrs.define
class History:
    """What the bridge remembers across steps that no store keeps."""

    forks: dict[int, ForkRecord] = attrs.Factory(dict)
    crashed: set[int] = attrs.Factory(set)  # a crash in the thread's history (forks inherit it)
    crashed_since_fork: set[int] = attrs.Factory(set)
    second_records: dict[int, list[tuple[int, int]]] = attrs.Factory(dict)  # accepted late resumes
    findings: list[tuple[str, str]] = attrs.Factory(list)  # (clause id, what was observed)
    # thread -> (stage, head) where a schema-invalid resume value was refused while it was parked
    refused_invalid: dict[int, tuple[int, object]] = attrs.Factory(dict)


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
    workflow: Workflow, history: History, observation: Observation, events: list[SinkEvent],
    capabilities: frozenset[str],
) -> World:
    stages = len(workflow.stages)
    deliveries = first_deliveries(workflow, events) if "executions" in capabilities else {}
    threads = []
    for t, view in enumerate(observation.threads):
        if view.inputs is not None:
            claims = tuple(view.inputs.get(s, NO_VALUE) for s in range(stages))
        else:  # without recorded inputs, what the committed checkpoints consumed
            consumed = {e.stage: e.app[workflow.stages[e.stage].node]
                        for e in view.chain if e.stage >= 0 and workflow.consumes[e.stage]}
            claims = tuple(consumed.get(s, NO_VALUE) for s in range(stages))
        fork = history.forks.get(t)
        base_pc = view.chain[fork.base].pc if fork is not None and fork.base < len(view.chain) else 0
        ancestry_executed = fork is not None and any(
            e.kind == "execute" and e.thread == t and e.stage < base_pc for e in events
        )
        second = tuple(history.second_records.get(t, ())) + tuple(view.late_inputs or ())
        threads.append(Thread(
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
        ))
    threads = tuple(threads)
    applied: dict[tuple, int] = {}
    for event in events:
        if event.kind == "fire" and event.applied and event.thread < len(threads):
            identity = effect_identity(workflow, threads, event.thread, event.stage, event.app)
            applied[identity] = applied.get(identity, 0) + 1
    return World(Budget(0, 0, 0, 0), (), threads, tuple(sorted(applied.items())))
