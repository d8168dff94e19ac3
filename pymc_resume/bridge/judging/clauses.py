"""Judging an observed run: the model's clause predicates on the observed world, what the bridge
sees directly (a refusal that did not come), the liveness drain's outcome, and which clauses an
adapter cannot be judged on.

Each violation comes with a sentence saying what was observed.
"""

from __future__ import annotations

from pymc_resume.model.clauses import CHECKS, is_quiescent
from pymc_resume.model.contract import (
    CHECKPOINT_VALIDITY,
    CLAUSE_IDS,
    CONSUME_ONCE_CONSUMPTION,
    CONSUME_ONCE_VALUE,
    FORK_DETERMINISM,
    FORK_INTENT,
    LIVENESS,
)
from pymc_resume.model.state import NO_VALUE, World
from pymc_resume.model.workflow import Workflow, value_name

# What an adapter must let the bridge observe for a clause to be judged.
REQUIRES: dict[str, frozenset[str]] = {
    CONSUME_ONCE_CONSUMPTION: frozenset({"executions"}),
    FORK_DETERMINISM: frozenset({"executions"}),
    FORK_INTENT: frozenset({"recorded-inputs"}),
    LIVENESS: frozenset({"leases"}),
}


def unobservable(capabilities: frozenset[str]) -> dict[str, str]:
    """Clause id -> why it cannot be judged on an adapter with these capabilities."""
    missing = {}
    for clause_id, needed in REQUIRES.items():
        lacking = sorted(needed - capabilities)
        if lacking:
            missing[clause_id] = f"the adapter cannot observe {', '.join(lacking)}"
    return missing


# The client operations a clause is about: it is judged when the framework expresses any of them.
NEEDS_ANY_OF: dict[str, tuple[str, ...]] = {
    CONSUME_ONCE_VALUE: ("resume",),
    CONSUME_ONCE_CONSUMPTION: ("resume-together",),
    FORK_DETERMINISM: ("fork",),
    FORK_INTENT: ("fork",),
    CHECKPOINT_VALIDITY: ("update", "resume"),  # an invalid state or an invalid resume value
}


def not_expressible(unsupported: dict[str, str]) -> dict[str, str]:
    """Clause id -> why it is not applicable: the framework cannot express what it is about."""
    missing = {}
    for clause_id, operations in NEEDS_ANY_OF.items():
        if all(op in unsupported for op in operations):
            reasons = "; ".join(f"{op}: {unsupported[op]}" for op in operations)
            missing[clause_id] = f"the framework cannot express it ({reasons})"
    return missing


def judge_world(workflow: Workflow, world: World, skip: dict[str, str]) -> dict[str, str]:
    """Clause id -> what was observed, for every state predicate that fails on `world`."""
    violated = {}
    for clause_id, check in CHECKS.items():
        if clause_id not in skip and (reason := check(workflow, world)) is not None:
            violated[clause_id] = reason
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
        stuck.append(
            f"t{t} at stage {pc} ({_lease(thread.runner)}, "
            f"claim {value_name(thread.claims[pc]) if workflow.consumes[pc] else 'n/a'})"
        )
    return "after recovering every crashed thread and starting every new one, not quiescent: " + "; ".join(
        stuck
    )


def ordered(violations: dict[str, str]) -> dict[str, str]:
    return {cid: violations[cid] for cid in CLAUSE_IDS if cid in violations}


# -- what was observed ---------------------------------------------------------------------


def _lease(runner: int) -> str:
    return {0: "lease free", 1: "lease held", 2: "lease held by a crashed process"}.get(runner, "stuck")
