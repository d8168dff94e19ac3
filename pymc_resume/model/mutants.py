"""The catalogue of mutants: the reference semantics with one fault switched on.

Each mutant is a fault a real layer could have; `target` is the one clause it is meant to break
(the fault matrix checks that it breaks that clause and, ideally, no other).
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Mutant:
    name: str
    target: str  # the clause id this fault is meant to break
    fault: str  # what the faulty layer does, in one sentence


NO_CLAIM = "no-claim"
RERUN_STEP_ON_RECOVERY = "rerun-step-on-recovery"
REFIRE_COMMITTED_EFFECT = "refire-committed-effect"
FORK_BY_REFERENCE = "fork-by-reference"
PERSIST_UNVALIDATED = "persist-unvalidated"
RECORD_SECOND_RESUME = "record-second-resume"
RECOVERY_NONDETERMINISTIC_STEP = "recovery-nondeterministic-step"
FORK_WITHOUT_INTENT = "fork-without-intent"
STUCK_CLAIM = "stuck-claim"

MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            NO_CLAIM,
            "consume-once-consumption",
            "deliveries are not claimed in the store: every delivery that read the parked "
            "interrupt executes it (commits stay compare-and-set, effects stay keyed)",
        ),
        Mutant(
            RERUN_STEP_ON_RECOVERY,
            "prefix-continuation",
            "recovery re-applies the thread's last committed pure step and commits it again",
        ),
        Mutant(
            REFIRE_COMMITTED_EFFECT,
            "effect-exactly-once",
            "recovery re-sends the thread's last committed (non-gated) effect without its "
            "idempotency key",
        ),
        Mutant(
            FORK_BY_REFERENCE,
            "fork-determinism",
            "a fork shares the parent's checkpoint state object: the fork's commits overwrite "
            "the parent's checkpoint it was forked from",
        ),
        Mutant(
            PERSIST_UNVALIDATED,
            "checkpoint-validity",
            "updates and resume values are persisted and claimed without schema validation",
        ),
        Mutant(
            RECORD_SECOND_RESUME,
            "consume-once-value",
            "a resume to an interrupt that already consumed a value is durably recorded and "
            "silently ignored instead of refused",
        ),
        Mutant(
            RECOVERY_NONDETERMINISTIC_STEP,
            "recovery-determinism",
            "a pure step's output depends on whether it runs in a recovering process",
        ),
        Mutant(
            FORK_WITHOUT_INTENT,
            "fork-intent",
            "an edit fork reuses the recorded input instead of its new one (its effect keys "
            "are still those of a new lineage)",
        ),
        Mutant(
            STUCK_CLAIM,
            "liveness",
            "a claim held by a crashed process is never recovered: recovery parks the thread "
            "and the claim blocks every later delivery",
        ),
    )
}
