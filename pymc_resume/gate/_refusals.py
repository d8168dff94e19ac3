"""What the gate raises instead of running a node. Every refusal is a `GateRefusal` with the
thread's id (and the claim, when there is one): nothing ran for the refused call."""

from __future__ import annotations


class GateRefusal(Exception):
    """A resume or recovery the gate refused before any node ran. `thread_id` names the thread."""

    def __init__(self, message: str, thread_id: str, claim=None) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.claim = claim


class InterruptAlreadyClaimed(GateRefusal):
    """Another delivery claimed this interrupt first; `claim.value` is the value it consumes."""


class InterruptAlreadyConsumed(GateRefusal):
    """The thread's head is not parked at the interrupt this resume aims at (it moved on, or it
    never parked there): nothing is recorded."""


class ClaimStillHeld(GateRefusal):
    """`recover` found the claim's holder alive: a live process on this host, or a holder on
    another host whose lease has not lapsed (`retry_after` seconds are left of it), or another
    recovery took the claim over first."""

    def __init__(self, message: str, thread_id: str, claim=None, retry_after: float | None = None) -> None:
        super().__init__(message, thread_id, claim)
        self.retry_after = retry_after


class ClaimLost(GateRefusal):
    """This holder's claim was taken over by a recovery (its lease had lapsed): its later writes
    to the checkpointer are refused (fenced), so that it cannot change the thread any more."""


class NotCovered(GateRefusal):
    """A resume the gate does not cover (an interrupt raised inside a subgraph): refused,
    instead of running it ungated."""
