"""Counterexamples as step tables a person can follow: who acted, and what changed in the
durable store and the effect sink at each step."""

from __future__ import annotations

from pymc_resume.model.state import (
    DEAD,
    FAILED,
    FREE,
    INTENT_NAMES,
    LIVE,
    NO_VALUE,
    STUCK,
    UPDATE,
    World,
)
from pymc_resume.model.workflow import Workflow, value_name

LEASE_NAMES = {
    FREE: "free",
    LIVE: "held",
    DEAD: "held by a crashed process",
    STUCK: "held by a process that crashed mid-node (unrecoverable)",
}


def split_action(action: str | None) -> tuple[str, str]:
    """Action labels read "<actor> <what>"; the initial state has no action."""
    if action is None:
        return "-", "initial state"
    actor, _, what = action.partition(" ")
    return actor, what


def store_changes(workflow: Workflow, before: World | None, after: World) -> list[str]:
    """What one step changed in the store and the sink, in plain words."""
    if before is None:
        return [f"t0 created at stage 0 of {workflow.end}"]
    changes: list[str] = []
    for t, thread in enumerate(after.threads):
        if t >= len(before.threads):
            intent = INTENT_NAMES[thread.intent]
            changes.append(
                f"t{t} created: {intent} fork of t{thread.parent} from checkpoint {thread.base}"
                f" (stage {thread.chain[thread.base].pc})"
            )
            continue
        old = before.threads[t]
        for index, entry in enumerate(thread.chain):
            if index >= len(old.chain):
                if entry.stage == UPDATE:
                    changes.append(f"t{t} checkpoint {index}: client update persisted {entry.app}")
                else:
                    changes.append(
                        f"t{t} checkpoint {index}: stage {entry.stage} committed, state {entry.app}"
                    )
            elif entry != old.chain[index]:
                changes.append(f"t{t} checkpoint {index} overwritten: state {entry.app}")
        for stage, (was, now) in enumerate(zip(old.claims, thread.claims)):
            if was != now and now != NO_VALUE:
                changes.append(f"t{t} stage {stage} input recorded: {value_name(now)}")
        for stage, value in thread.second_records[len(old.second_records) :]:
            changes.append(f"t{t} stage {stage} second value recorded: {value_name(value)}")
        if thread.status == FAILED and old.status != FAILED:
            changes.append(f"t{t} failed: a node's output was refused, nothing persisted")
        if thread.runner != old.runner:
            changes.append(f"t{t} run lease {LEASE_NAMES[thread.runner]}")
    old_sink = dict(before.sink)
    for identity, applications in after.sink:
        if applications != old_sink.get(identity, 0):
            lineage, node, inputs = identity
            changes.append(
                f"sink applies effect of node {node} (lineage t{lineage}, inputs "
                f"{[value_name(v) for v in inputs]}): {applications}x"
            )
    return changes
