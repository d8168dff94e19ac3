"""The Two-Phase Commit protocol of Gray and Lamport, for N resource managers.

Encodes tlaplus/Examples specifications/transaction_commit/TwoPhase.tla (Init TPInit, next-state
action TPNext, invariant TPTypeOK), checked there with model TwoPhase.cfg (RM = {r1, r2, r3});
the spec's closing comment also records a TLC run with six RMs. N, the number of resource
managers, is a parameter so that larger instances can be explored too.
The module also states that TPSpec implements TCommit's TCSpec; we check the safety part of
that as the invariant TCConsistent (no RM aborted while another committed).

State: a tuple (rmState, tmState, tmPrepared, msgs) where
  rmState    -- tuple of N strings, rmState[i] is the state of resource manager i,
  tmState    -- "init" | "committed" | "aborted",
  tmPrepared -- frozenset of RM indices the TM has received "Prepared" from,
  msgs       -- frozenset of messages ever sent: ("Prepared", i), ("Commit",), ("Abort",).
Resource managers are indices 0..N-1 (printed r1..rN in action labels).

TLC's counts for model TwoPhase.cfg (RM = {r1, r2, r3}), recorded in
specifications/transaction_commit/manifest.json of tlaplus/Examples (commit
32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9): 288 distinct states, 1,146 states generated, depth
11. The spec's closing comment also records 50,816 distinct states for six RMs (`TwoPhase(6)`). Check it with

    pymc-resume explore examples/two_phase.py:model
"""

from __future__ import annotations

from collections.abc import Iterator

from tla import except_

from pymc_resume.explore import Invariant

RM_STATES = frozenset({"working", "prepared", "committed", "aborted"})
TM_STATES = frozenset({"init", "committed", "aborted"})

COMMIT = ("Commit",)
ABORT = ("Abort",)


def prepared(rm: int) -> tuple[str, int]:
    """The message [type |-> "Prepared", rm |-> rm]."""
    return ("Prepared", rm)


class TwoPhase:
    """TwoPhase.tla with RM = {r1, ..., rN}."""

    reachability = ()
    deadlock_is_error = True  # TwoPhase.cfg checks deadlock (TLC's default); there is none
    # TPNext's actions, for --coverage (it lists any never taken)
    actions = (
        "TMCommit",
        "TMAbort",
        "TMRcvPrepared",
        "RMPrepare",
        "RMChooseToAbort",
        "RMRcvCommitMsg",
        "RMRcvAbortMsg",
    )

    def __init__(self, n: int = 3) -> None:
        self.n = n
        self.rms = range(n)
        self.all_rms = frozenset(self.rms)
        self.messages = frozenset({COMMIT, ABORT} | {prepared(rm) for rm in self.rms})
        self.invariants = [
            Invariant("TPTypeOK", self.type_ok),
            Invariant("TCConsistent", self.consistent),
        ]

    # --- TPInit ---------------------------------------------------------------------------

    def initial_states(self):
        return [(("working",) * self.n, "init", frozenset(), frozenset())]

    # --- TM actions -----------------------------------------------------------------------

    def tm_rcv_prepared(self, state, rm):
        rm_state, tm_state, tm_prepared, msgs = state
        if tm_state == "init" and prepared(rm) in msgs:
            return (rm_state, tm_state, tm_prepared | {rm}, msgs)
        return None

    def tm_commit(self, state):
        rm_state, tm_state, tm_prepared, msgs = state
        if tm_state == "init" and tm_prepared == self.all_rms:
            return (rm_state, "committed", tm_prepared, msgs | {COMMIT})
        return None

    def tm_abort(self, state):
        rm_state, tm_state, tm_prepared, msgs = state
        if tm_state == "init":
            return (rm_state, "aborted", tm_prepared, msgs | {ABORT})
        return None

    # --- RM actions -----------------------------------------------------------------------

    def rm_prepare(self, state, rm):
        rm_state, tm_state, tm_prepared, msgs = state
        if rm_state[rm] == "working":
            return (except_(rm_state, rm, "prepared"), tm_state, tm_prepared, msgs | {prepared(rm)})
        return None

    def rm_choose_to_abort(self, state, rm):
        rm_state, tm_state, tm_prepared, msgs = state
        if rm_state[rm] == "working":
            return (except_(rm_state, rm, "aborted"), tm_state, tm_prepared, msgs)
        return None

    def rm_rcv_commit_msg(self, state, rm):
        rm_state, tm_state, tm_prepared, msgs = state
        if COMMIT in msgs:
            return (except_(rm_state, rm, "committed"), tm_state, tm_prepared, msgs)
        return None

    def rm_rcv_abort_msg(self, state, rm):
        rm_state, tm_state, tm_prepared, msgs = state
        if ABORT in msgs:
            return (except_(rm_state, rm, "aborted"), tm_state, tm_prepared, msgs)
        return None

    # --- TPNext ---------------------------------------------------------------------------

    def successors(self, state) -> Iterator[tuple[str, tuple]]:
        for name, action in (("TMCommit", self.tm_commit), ("TMAbort", self.tm_abort)):
            next_state = action(state)
            if next_state is not None:
                yield name, next_state
        for rm in self.rms:
            for name, action in (
                ("TMRcvPrepared", self.tm_rcv_prepared),
                ("RMPrepare", self.rm_prepare),
                ("RMChooseToAbort", self.rm_choose_to_abort),
                ("RMRcvCommitMsg", self.rm_rcv_commit_msg),
                ("RMRcvAbortMsg", self.rm_rcv_abort_msg),
            ):
                next_state = action(state, rm)
                if next_state is not None:
                    yield f"{name}(r{rm + 1})", next_state

    # --- invariants -----------------------------------------------------------------------

    def type_ok(self, state) -> bool:
        rm_state, tm_state, tm_prepared, msgs = state
        return (
            len(rm_state) == self.n
            and all(s in RM_STATES for s in rm_state)
            and tm_state in TM_STATES
            and tm_prepared <= self.all_rms
            and msgs <= self.messages
        )

    def consistent(self, state) -> bool:
        rm_state = state[0]
        return not ("aborted" in rm_state and "committed" in rm_state)


def model() -> TwoPhase:
    """The model of the cfg above."""
    return TwoPhase(3)
