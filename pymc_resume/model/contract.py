"""The resume contract's ids and one-line definitions: the one place in code they are written.

The full wording, in the project's own words, is docs/contract.md; code, CLI, JSON, docs and
tests all take the ids from here. Order is the contract's: seven clauses, then two obligations.
"""

from __future__ import annotations

import attrs

# The ids, each written once: every module names a clause by these constants.
PREFIX_CONTINUATION = "prefix-continuation"
EFFECT_EXACTLY_ONCE = "effect-exactly-once"
FORK_DETERMINISM = "fork-determinism"
CHECKPOINT_VALIDITY = "checkpoint-validity"
CONSUME_ONCE_VALUE = "consume-once-value"
CONSUME_ONCE_CONSUMPTION = "consume-once-consumption"
RECOVERY_DETERMINISM = "recovery-determinism"
FORK_INTENT = "fork-intent"
LIVENESS = "liveness"


@attrs.frozen
class Clause:
    id: str
    kind: str  # "clause" or "obligation"
    summary: str


CLAUSES: tuple[Clause, ...] = (
    Clause(
        PREFIX_CONTINUATION,
        "clause",
        "committed nodes form a prefix of the workflow, each committed once; "
        "no rewind, no skip after a resume or recovery",
    ),
    Clause(
        EFFECT_EXACTLY_ONCE,
        "clause",
        "a committed node's effect is applied at most once per identity, exactly once "
        "when quiescent; re-fires carry a stable idempotency key",
    ),
    Clause(
        FORK_DETERMINISM,
        "clause",
        "a fork starts from exactly its checkpoint, never changes the parent, never "
        "re-executes the ancestry; equal forks reach equal states",
    ),
    Clause(
        CHECKPOINT_VALIDITY,
        "clause",
        "every checkpoint satisfies the state schema; invalid updates, outputs and "
        "resume values are refused before anything is persisted or claimed",
    ),
    Clause(
        CONSUME_ONCE_VALUE,
        "clause",
        "a resume to an interrupt that already consumed a value is refused, never "
        "recorded or applied; the continuation uses exactly the consumed value",
    ),
    Clause(
        CONSUME_ONCE_CONSUMPTION,
        "clause",
        "of k concurrent deliveries to one parked interrupt at most one is consumed; "
        "the others are refused before any node executes",
    ),
    Clause(
        RECOVERY_DETERMINISM,
        "clause",
        "a completed thread with a crash in its history has the state of the "
        "crash-free replay of its consumed inputs",
    ),
    Clause(
        FORK_INTENT,
        "obligation",
        "every fork declares replay (reuse recorded inputs) or edit (take a new input, "
        "never the recorded one)",
    ),
    Clause(
        LIVENESS,
        "obligation",
        "from every reachable state a quiescent state is reachable",
    ),
)

CLAUSE_IDS: tuple[str, ...] = tuple(clause.id for clause in CLAUSES)

HOLDS = "holds"
VIOLATED = "violated"
NOT_APPLICABLE = "not-applicable"
SKIPPED = "skipped"
# Live runs only: a violation seen once whose repro never reproduced (never counted as violated).
UNCONFIRMED = "unconfirmed"
VERDICTS = (HOLDS, VIOLATED, UNCONFIRMED, NOT_APPLICABLE, SKIPPED)


def clause(clause_id: str) -> Clause:
    """The clause with this id (KeyError names the unknown id)."""
    for candidate in CLAUSES:
        if candidate.id == clause_id:
            return candidate
    raise KeyError(clause_id)
