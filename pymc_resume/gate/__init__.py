"""The consume-once gate for LangGraph: one delivery consumes a parked interrupt, the others are
refused before any node runs, also across hosts.

LangGraph takes no claim when `invoke(Command(resume=v))` resumes an interrupt: k processes that
resume one parked interrupt at once each run the interrupted node (and fire what it gates).
The gate puts a claim in front of the resume, in the same database as the checkpointer (the
SQLite file of a `SqliteSaver`, the PostgreSQL database of a `PostgresSaver`): a row keyed by
(thread id, checkpoint ns, parked checkpoint id, interrupt id), inserted atomically. The one
delivery whose insert wins resumes the graph; every other one gets `InterruptAlreadyClaimed`,
naming the thread and the claimed value, and runs nothing.

    from pymc_resume.gate import ConsumeOnceGate, InterruptAlreadyClaimed

    gate = ConsumeOnceGate.for_checkpointer(saver)   # or .for_sqlite(path) / .for_postgres(url)
    try:
        gate.resume(graph, config, "approve")        # `await gate.aresume(...)` for ainvoke
    except InterruptAlreadyClaimed as refused:
        print(refused)                               # someone else's answer won

    gate.recover(graph, config)   # after the claimant died: continue with the CLAIMED value

The claim records the value, its holder's host and a lease the holder renews while it runs.
When the holder dies, `recover` on any host takes the claim over (at once when the holder was
a process of its own host, once the lease lapsed otherwise) and continues with the claimed
value, never a new one; a live holder's claim is not taken. A takeover moves the claim's fence,
and every checkpoint write of the old holder is checked against it, so a holder that was
taken for dead but was not cannot write any more. A config that names a `checkpoint_id`
(LangGraph's time travel: a branch of the thread) is served at that branch's head, not at the
thread's newest checkpoint. See docs/gate.md.

The package's modules: `_gate` (the gate), `_claims` (the claims table, SQLite and
PostgreSQL), `_holders` (hosts and processes), `_graph` (what the gate reads of LangGraph),
`_refusals` (what it raises).
"""

from pymc_resume.gate._claims import DONE, FAILED, OUTSTANDING, RUNNING, STALE, TABLE, Claim
from pymc_resume.gate._gate import DEFAULT_LEASE, ConsumeOnceGate
from pymc_resume.gate._graph import Parked
from pymc_resume.gate._refusals import (
    ClaimLost,
    ClaimStillHeld,
    GateRefusal,
    InterruptAlreadyClaimed,
    InterruptAlreadyConsumed,
    NotCovered,
)

__all__ = [
    "DEFAULT_LEASE",
    "DONE",
    "FAILED",
    "OUTSTANDING",
    "RUNNING",
    "STALE",
    "TABLE",
    "Claim",
    "ClaimLost",
    "ClaimStillHeld",
    "ConsumeOnceGate",
    "GateRefusal",
    "InterruptAlreadyClaimed",
    "InterruptAlreadyConsumed",
    "NotCovered",
    "Parked",
]
