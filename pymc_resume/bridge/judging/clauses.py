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
from pymc_resume.model.state import IDLE, NEW, NO_VALUE, World
from pymc_resume.model.workflow import Workflow, value_name

# What an adapter must let the bridge observe for a clause to be judged: every capability of
# one of the sets. `liveness` is judged on leases (the drain recovers what a dead holder left),
# or on `stuck-runs`: the adapter's chains show a thread as parked at an interrupt only when a
# documented resume continues it, so a thread the drain's recovery cannot finish is seen stuck
# (neither complete nor parked), whether or not the framework has leases.
REQUIRES: dict[str, tuple[frozenset[str], ...]] = {
    CONSUME_ONCE_CONSUMPTION: (frozenset({"executions"}),),
    FORK_DETERMINISM: (frozenset({"executions"}),),
    FORK_INTENT: (frozenset({"recorded-inputs"}),),
    LIVENESS: (frozenset({"leases"}), frozenset({"stuck-runs"})),
}


def unobservable(capabilities: frozenset[str]) -> dict[str, str]:
    """Clause id -> why it cannot be judged on an adapter with these capabilities."""
    missing = {}
    for clause_id, alternatives in REQUIRES.items():
        if not any(needed <= capabilities for needed in alternatives):
            lacking = " or ".join(", ".join(sorted(needed - capabilities)) for needed in alternatives)
            missing[clause_id] = f"the adapter cannot observe {lacking}"
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
    if not stuck:  # a process still working, or a thread never started: say so, never nothing
        stuck = [f"t{t} {_status(thread)}" for t, thread in enumerate(world.threads) if _status(thread)]
        stuck += [f"a process {p.phase}" for p in world.processes if p.phase != IDLE] or ["(see the store)"]
    return "after recovering every crashed thread and starting every new one, not quiescent: " + "; ".join(
        stuck
    )


def ordered(violations: dict[str, str]) -> dict[str, str]:
    return {cid: violations[cid] for cid in CLAUSE_IDS if cid in violations}


# -- what was observed ---------------------------------------------------------------------


def _status(thread) -> str:
    return "never started" if thread.status == NEW else ""


def _lease(runner: int) -> str:
    return {0: "lease free", 1: "lease held", 2: "lease held by a crashed process"}.get(runner, "stuck")
