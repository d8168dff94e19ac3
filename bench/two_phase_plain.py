"""TwoPhase.tla written plainly: tuples, strings and frozensets, no codec, no packing.

The same specification, successor order and stuttering steps as bench/two_phase_packed.py and
examples/two_phase.py (tlaplus/Examples specifications/transaction_commit/TwoPhase.tla,
invariants TPTypeOK and TCConsistent), written the way a newcomer writes a model: the state is
the spec's four variables as a tuple

    (rmState, tmState, tmPrepared, msgs)
     tuple of N strs, a str, a frozenset of RM indices, a frozenset of messages

and the explorer derives a compact encoding itself (`pymc_resume.explore.store.plain`). The benchmark
compares it with the hand-packed model: a model written plainly should gain what the packed one
gains. TLC: N=3 288, N=6 50816, N=7 296448, N=8 1745408 distinct states.
"""

from __future__ import annotations

from collections.abc import Iterator

from pymc_resume.explore import Invariant

RM_STATES = frozenset({"working", "prepared", "committed", "aborted"})
TM_STATES = frozenset({"init", "committed", "aborted"})
COMMIT, ABORT = ("Commit",), ("Abort",)


class TwoPhasePlain:
    """TwoPhase.tla with RM = {r1, ..., rN}; a state is (rmState, tmState, tmPrepared, msgs)."""

    def __init__(self, n: int = 3) -> None:
        self.n = n
        self.all_rms = frozenset(range(n))
        self.messages = frozenset({COMMIT, ABORT} | {("Prepared", rm) for rm in range(n)})
        # Per RM: its five action labels and its Prepared message, written once.
        self.rms = [
            (
                rm,
                f"TMRcvPrepared(r{rm + 1})",
                f"RMPrepare(r{rm + 1})",
                f"RMChooseToAbort(r{rm + 1})",
                f"RMRcvCommitMsg(r{rm + 1})",
                f"RMRcvAbortMsg(r{rm + 1})",
                ("Prepared", rm),
            )
            for rm in range(n)
        ]
        self.invariants = [Invariant("TPTypeOK", self.type_ok), Invariant("TCConsistent", self.consistent)]

    def initial_states(self):
        return [(("working",) * self.n, "init", frozenset(), frozenset())]

    def successors(self, state) -> Iterator[tuple[str, tuple]]:
        rm_state, tm_state, tm_prepared, msgs = state
        tm_init = tm_state == "init"
        if tm_init:
            if tm_prepared == self.all_rms:
                yield "TMCommit", (rm_state, "committed", tm_prepared, msgs | {COMMIT})
            yield "TMAbort", (rm_state, "aborted", tm_prepared, msgs | {ABORT})
        commit_sent, abort_sent = COMMIT in msgs, ABORT in msgs
        for rm, rcv_prepared, prepare, choose_to_abort, rcv_commit, rcv_abort, message in self.rms:
            if tm_init and message in msgs:
                yield rcv_prepared, (rm_state, tm_state, tm_prepared | {rm}, msgs)
            if rm_state[rm] == "working":
                yield prepare, (set_at(rm_state, rm, "prepared"), tm_state, tm_prepared, msgs | {message})
                yield choose_to_abort, (set_at(rm_state, rm, "aborted"), tm_state, tm_prepared, msgs)
            if commit_sent:
                yield rcv_commit, (set_at(rm_state, rm, "committed"), tm_state, tm_prepared, msgs)
            if abort_sent:
                yield rcv_abort, (set_at(rm_state, rm, "aborted"), tm_state, tm_prepared, msgs)

    def type_ok(self, state) -> bool:
        rm_state, tm_state, tm_prepared, msgs = state
        return (
            len(rm_state) == self.n
            and RM_STATES.issuperset(rm_state)
            and tm_state in TM_STATES
            and tm_prepared <= self.all_rms
            and msgs <= self.messages
        )

    def consistent(self, state) -> bool:
        rm_state = state[0]
        return not ("aborted" in rm_state and "committed" in rm_state)


def set_at(values: tuple, index: int, value) -> tuple:
    """TLA+'s `[values EXCEPT ![index] = value]` for a function written as a tuple."""
    return values[:index] + (value,) + values[index + 1 :]
