"""The catalogue of mutants: the reference semantics with one fault switched on.

Each mutant is a fault a real layer could have; `target` is the clause it is meant to break.
Most mutants are one fault switch and *separate* their target (they break it and keep every
other id); the fault matrix (`pymc-resume matrix`, `pymc_resume.checking.matrix`) checks which ones do.
Mutants that mirror a published framework behaviour say which in `mirrors`; those may switch on
several faults (`faults`) and break several clauses, since that is what the framework does.
Mutant ids are the same strings in code, CLI, JSON, docs and tests.
"""

from __future__ import annotations

import attrs

from pymc_resume.model.contract import (
    CHECKPOINT_VALIDITY,
    CONSUME_ONCE_CONSUMPTION,
    CONSUME_ONCE_VALUE,
    EFFECT_EXACTLY_ONCE,
    FORK_DETERMINISM,
    FORK_INTENT,
    LIVENESS,
    PREFIX_CONTINUATION,
    RECOVERY_DETERMINISM,
)


def _own_fault(mutant: Mutant) -> tuple[str, ...]:
    return (mutant.name,)


@attrs.frozen
class Mutant:
    name: str
    target: str  # the clause id this fault is meant to break
    fault: str  # what the faulty layer does, in one sentence
    mirrors: str | None = None  # the published framework behaviour it mirrors, if any
    # The fault switches of `semantics.ResumeModel` it turns on: its own name, unless it
    # combines switches to mirror a framework.
    faults: tuple[str, ...] = attrs.field(default=attrs.Factory(_own_fault, takes_self=True))
    # A node kind the fault acts on, when bounds without it cannot reach the fault at all
    # (`reachable_at`): the fault matrix reports such a mutant as out of reach, not as missed.
    needs: str | None = None

    def reachable_at(self, nodes: tuple[str, ...]) -> bool:
        return self.needs is None or self.needs in nodes


NO_CLAIM = "no-claim"
RERUN_STEP_ON_RECOVERY = "rerun-step-on-recovery"
REFIRE_COMMITTED_EFFECT = "refire-committed-effect"
FORK_BY_REFERENCE = "fork-by-reference"
PERSIST_UNVALIDATED = "persist-unvalidated"
RECORD_SECOND_RESUME = "record-second-resume"
RECOVERY_NONDETERMINISTIC_STEP = "recovery-nondeterministic-step"
FORK_WITHOUT_INTENT = "fork-without-intent"
STUCK_CLAIM = "stuck-claim"
UNKEYED_EFFECTS = "unkeyed-effects"
RERUN_NODE_ON_RECOVERY = "rerun-node-on-recovery"
RERUN_EFFECTS_ON_RESTART = "rerun-effects-on-restart"
NO_MID_NODE_RECOVERY = "no-mid-node-recovery"
VALIDATE_AFTER_CLAIM = "validate-after-claim"
CONCURRENT_RESUMES_CONSUMED = "concurrent-resumes-consumed"
PERSIST_INVALID_OUTPUT = "persist-invalid-output"
WARM_FORK_SHARES_STATE = "warm-fork-shares-state"

# A fault switch that no mutant turns on alone: recovery restarts the thread from its first
# stage with the restored state (a flow re-run from its start method).
RESTART_FROM_FIRST_STAGE = "restart-from-first-stage"

MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            NO_CLAIM,
            CONSUME_ONCE_CONSUMPTION,
            "deliveries are not claimed in the store: every delivery that read the parked "
            "interrupt executes it (commits stay compare-and-set, effects stay keyed)",
        ),
        Mutant(
            RERUN_STEP_ON_RECOVERY,
            PREFIX_CONTINUATION,
            "recovery re-applies the thread's last committed pure step and commits it again",
        ),
        Mutant(
            REFIRE_COMMITTED_EFFECT,
            EFFECT_EXACTLY_ONCE,
            "recovery re-sends the thread's last committed (non-gated) effect without its idempotency key",
        ),
        Mutant(
            FORK_BY_REFERENCE,
            FORK_DETERMINISM,
            "a fork shares the parent's checkpoint state object: the fork's commits overwrite "
            "the parent's checkpoint it was forked from",
        ),
        Mutant(
            PERSIST_UNVALIDATED,
            CHECKPOINT_VALIDITY,
            "updates, resume values and node outputs are persisted and claimed without schema validation",
            mirrors="LangGraph 1.2.9: schema-invalid state is persisted without error",
        ),
        Mutant(
            RECORD_SECOND_RESUME,
            CONSUME_ONCE_VALUE,
            "a resume to an interrupt that already consumed a value is durably recorded and "
            "silently ignored instead of refused",
            mirrors="LangGraph 1.2.9: a second resume value for an interrupt that was already "
            "resumed is durably recorded and never read",
        ),
        Mutant(
            RECOVERY_NONDETERMINISTIC_STEP,
            RECOVERY_DETERMINISM,
            "a pure step's output depends on whether it runs in a recovering process",
        ),
        Mutant(
            FORK_WITHOUT_INTENT,
            FORK_INTENT,
            "an edit fork reuses the recorded input instead of its new one (its effect keys "
            "are still those of a new lineage)",
        ),
        Mutant(
            STUCK_CLAIM,
            LIVENESS,
            "a claim held by a crashed process is never recovered: recovery parks the thread "
            "and the claim blocks every later delivery",
        ),
        Mutant(
            UNKEYED_EFFECTS,
            EFFECT_EXACTLY_ONCE,
            "effects are relayed to the sink without an idempotency key, so an effect fired in "
            "the window before its commit is applied again when recovery (or a replay fork) "
            "re-executes its node",
        ),
        Mutant(
            RERUN_NODE_ON_RECOVERY,
            PREFIX_CONTINUATION,
            "recovery re-executes the thread's last committed node, whatever its kind, and "
            "commits it again; its effects carry their stable key, so the sink dedupes them",
            mirrors="LangGraph 1.2.9: after a real SIGKILL, work whose result was already "
            "durably recorded runs again (at-least-once across crashes)",
        ),
        Mutant(
            RERUN_EFFECTS_ON_RESTART,
            EFFECT_EXACTLY_ONCE,
            "recovery restarts the thread from its first node with the restored state and "
            "re-runs every completed node, effects included, without idempotency keys",
            mirrors="CrewAI 1.15.2 (Flows with persistence): completed effect-bearing methods "
            "run again on restart, against the documented claim",
            faults=(RESTART_FROM_FIRST_STAGE, UNKEYED_EFFECTS),
        ),
        Mutant(
            NO_MID_NODE_RECOVERY,
            LIVENESS,
            "a crash between a node's execution and its commit leaves the thread marked as "
            "running forever: no process can recover it",
            mirrors="pydantic-graph 1.x: no resume is possible after a crash in the middle of a node",
        ),
        Mutant(
            VALIDATE_AFTER_CLAIM,
            CHECKPOINT_VALIDITY,
            "a resume value is validated when its node executes, after the claim: an invalid "
            "value is durably claimed, its execution is refused, and the claim stays, so the "
            "interrupt is consumed by a value it never accepted",
        ),
        Mutant(
            CONCURRENT_RESUMES_CONSUMED,
            CONSUME_ONCE_CONSUMPTION,
            "deliveries are not claimed and effects carry no stable key: every concurrent "
            "resume of one parked interrupt executes it and fires its gated effect",
            mirrors="the paper's concurrent-delivery finding: k processes that resume one "
            "parked interrupt fire the gated effect k times",
            faults=(NO_CLAIM, UNKEYED_EFFECTS),
        ),
        Mutant(
            PERSIST_INVALID_OUTPUT,
            CHECKPOINT_VALIDITY,
            "a node's output is committed without schema validation: an overflow node's "
            "out-of-bounds output, computed from valid inputs, is persisted and the thread runs on",
            mirrors="the published finding that frameworks persist schema-invalid node output",
            needs="overflow",
        ),
        Mutant(
            WARM_FORK_SHARES_STATE,
            FORK_DETERMINISM,
            "a fork from the head made by the warm client that parked the parent starts from "
            "that client's in-memory state object instead of a copy: the fork's commits write "
            "through to the parent's head",
        ),
    )
}

# Every fault switch `semantics.ResumeModel` knows.
FAULTS: frozenset[str] = frozenset(f for mutant in MUTANTS.values() for f in mutant.faults)
