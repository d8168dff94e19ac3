"""Termination detection in a ring with asynchronous messages: a model with a state constraint.

Encodes tlaplus/Examples specifications/ewd998/AsyncTerminationDetection.tla (Init, Next;
invariants TypeOK and Safe), checked there with model AsyncTerminationDetection.cfg: N = 4,
deadlock checked, and `CONSTRAINT StateConstraint` (at most 3 messages pending at any node).
The cfg's temporal properties (Quiescence, Live) do not change the explored states and are not
encoded.

TLC's counts, recorded in specifications/ewd998/manifest.json (tlaplus/Examples commit
32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9): 4,097 distinct states, 53,271 states generated,
depth 14. The generated count includes every successor outside the constraint (TLC generates
it and checks the invariants on it, but neither stores nor expands it), so it checks the
constraint's semantics as well as the model:

    pymc-resume explore examples/async_termination_detection.py:model

State: (active, pending, terminationDetected), where active is a tuple of N bools, pending a
tuple of N ints (messages waiting at each node), terminationDetected a bool.
"""

from __future__ import annotations

from itertools import product

from tla import except_

from pymc_resume.explore import Invariant


class AsyncTerminationDetection:
    """AsyncTerminationDetection.tla with N nodes, pending messages bounded by `max_pending`."""

    state_fields = ("active", "pending", "terminationDetected")

    def __init__(self, n: int = 4, max_pending: int = 3) -> None:
        self.nodes = range(n)
        self.max_pending = max_pending
        self.invariants = [Invariant("TypeOK", self.type_ok), Invariant("Safe", self.safe)]

    def terminated(self, active, pending) -> bool:
        return not any(active) and not any(pending)

    def initial_states(self):
        # active \in [Node -> BOOLEAN], pending all 0, terminationDetected \in {FALSE, terminated}
        pending = (0,) * len(self.nodes)
        for active in product((False, True), repeat=len(self.nodes)):
            for detected in dict.fromkeys((False, self.terminated(active, pending))):
                yield (active, pending, detected)

    def successors(self, state):
        active, pending, detected = state
        for i in self.nodes:
            if pending[i] > 0:  # RcvMsg(i)
                yield (
                    f"RcvMsg({i})",
                    (except_(active, i, True), except_(pending, i, pending[i] - 1), detected),
                )
            if active[i]:  # Terminate(i): terminationDetected' \in {it, terminated'}
                now = except_(active, i, False)
                for then in dict.fromkeys((detected, self.terminated(now, pending))):
                    yield f"Terminate({i})", (now, pending, then)
        for i, j in product(self.nodes, self.nodes):
            if active[i]:  # SendMsg(i, j)
                yield f"SendMsg({i},{j})", (active, except_(pending, j, pending[j] + 1), detected)
        if self.terminated(active, pending):  # DetectTermination
            yield "DetectTermination", (active, pending, True)

    def constraint(self, state) -> bool:
        """StateConstraint: \\A n \\in Node : pending[n] <= 3."""
        return max(state[1]) <= self.max_pending

    def type_ok(self, state) -> bool:
        active, pending, detected = state
        return (
            all(isinstance(a, bool) for a in active)
            and isinstance(detected, bool)
            and all(isinstance(p, int) and p >= 0 for p in pending)
        )

    def safe(self, state) -> bool:
        """Safe: terminationDetected => terminated."""
        active, pending, detected = state
        return not detected or self.terminated(active, pending)


def model() -> AsyncTerminationDetection:
    """The model of AsyncTerminationDetection.cfg."""
    return AsyncTerminationDetection()
