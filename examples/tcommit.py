"""The abstract Transaction Commit specification of Gray and Lamport, for N resource managers.

Encodes tlaplus/Examples specifications/transaction_commit/TCommit.tla (Init TCInit, next-state
action TCNext, invariants TCTypeOK and TCConsistent), checked there with model TCommit.cfg
(RM = {r1, r2, r3}, CHECK_DEADLOCK FALSE).

State: rmState, a tuple of N strings; rmState[i] is the state of resource manager i
(printed r{i+1} in action labels).

TLC's counts for model TCommit.cfg (RM = {r1, r2, r3}, CHECK_DEADLOCK FALSE), recorded in
specifications/transaction_commit/manifest.json of tlaplus/Examples (commit
32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9): 34 distinct states, 94 states generated, depth 7. Check it with

    pymc-resume explore examples/tcommit.py:model
"""

from __future__ import annotations

from collections.abc import Iterator

from tla import except_

from pymc_resume.explore import Invariant

RM_STATES = frozenset({"working", "prepared", "committed", "aborted"})


def can_commit(rm_state) -> bool:
    """canCommit: every RM is prepared or committed."""
    return all(s in ("prepared", "committed") for s in rm_state)


def not_committed(rm_state) -> bool:
    """notCommitted: no RM has committed."""
    return all(s != "committed" for s in rm_state)


class TCommit:
    """TCommit.tla with RM = {r1, ..., rN}."""

    reachability = ()
    deadlock_is_error = False  # TCommit.cfg: CHECK_DEADLOCK FALSE

    def __init__(self, n: int = 3) -> None:
        self.n = n
        self.rms = range(n)
        self.invariants = [
            Invariant("TCTypeOK", self.type_ok),
            Invariant("TCConsistent", self.consistent),
        ]

    def initial_states(self):
        """TCInit: every RM is working."""
        return [("working",) * self.n]

    def prepare(self, rm_state, rm):
        if rm_state[rm] == "working":
            return except_(rm_state, rm, "prepared")
        return None

    def decide(self, rm_state, rm):
        """Decide(rm) is a disjunction of two cases (commit, abort): each yields a successor."""
        if rm_state[rm] == "prepared" and can_commit(rm_state):
            yield except_(rm_state, rm, "committed")
        if rm_state[rm] in ("working", "prepared") and not_committed(rm_state):
            yield except_(rm_state, rm, "aborted")

    def successors(self, rm_state) -> Iterator[tuple[str, tuple]]:
        """TCNext == \\E rm \\in RM : Prepare(rm) \\/ Decide(rm)."""
        for rm in self.rms:
            next_state = self.prepare(rm_state, rm)
            if next_state is not None:
                yield f"Prepare(r{rm + 1})", next_state
            for next_state in self.decide(rm_state, rm):
                yield f"Decide(r{rm + 1})", next_state

    def type_ok(self, rm_state) -> bool:
        return len(rm_state) == self.n and all(s in RM_STATES for s in rm_state)

    def consistent(self, rm_state) -> bool:
        """TCConsistent: no RM aborted while another committed."""
        return not ("aborted" in rm_state and "committed" in rm_state)


def model() -> TCommit:
    """The model of the cfg above."""
    return TCommit(3)
