"""TwoPhase.tla with the whole state packed into one Python int: the explorer benchmark model.

Encodes the same specification as examples/two_phase.py -- tlaplus/Examples
specifications/transaction_commit/TwoPhase.tla (Init TPInit, next-state action TPNext, invariant
TPTypeOK, and TCConsistent from TCommit.tla, which TwoPhase implements) for N resource managers --
but a state is a single non-negative int of 4N + 4 bits instead of a tuple of strings and
frozensets. Hashing and deduplicating small ints is the cheapest thing the explorer can do, so
this model measures the explorer rather than the model. Ints also hash the same in every
interpreter (str hashes are salted per process), so the state is safe for any worker layout.

The two encodings have the same reachable graph: `TwoPhasePacked(n).decode` maps a packed state
to the readable model's (rmState, tmState, tmPrepared, msgs) and tests/explore/
test_packed_two_phase.py checks the counts and reachable sets agree (TLC: N=3 288, N=6 50816,
N=7 296448, N=8 1745408 distinct states). Successors are yielded in the readable model's order,
stuttering steps included (TMRcvPrepared of an RM already in tmPrepared, RMRcvCommitMsg of an RM
already committed, ...), so `states_generated` agrees too.
"""

from __future__ import annotations

from collections.abc import Iterator

from pymc_resume.explore import Invariant

# --- Bit layout, least significant bit first, for RM = {0, ..., N-1} ------------------------
#
#   rmState[rm]              2 bits at 2*rm         WORKING, PREPARED, COMMITTED, ABORTED
#   tmState                  2 bits at 2*N          INIT, TM_COMMITTED, TM_ABORTED (3: unused)
#   rm \in tmPrepared        1 bit  at 2*N + 2 + rm
#   Prepared(rm) \in msgs    1 bit  at 3*N + 2 + rm
#   Commit \in msgs          1 bit  at 4*N + 2
#   Abort \in msgs           1 bit  at 4*N + 3
#
# WORKING is 0, so TPInit is the int 0; ABORTED is 0b11, so aborting an RM sets its whole field.

WORKING, PREPARED, COMMITTED, ABORTED = 0, 1, 2, 3
INIT, TM_COMMITTED, TM_ABORTED = 0, 1, 2
FIELD = 0b11  # a 2-bit field (one rmState, or tmState) before shifting


def rm_shift(rm: int) -> int:
    return 2 * rm


def tm_shift(n: int) -> int:
    return 2 * n


def tm_prepared_bit(n: int, rm: int) -> int:
    return 1 << (2 * n + 2 + rm)


def prepared_msg_bit(n: int, rm: int) -> int:
    return 1 << (3 * n + 2 + rm)


def commit_msg_bit(n: int) -> int:
    return 1 << (4 * n + 2)


def abort_msg_bit(n: int) -> int:
    return 1 << (4 * n + 3)


def state_bits(n: int) -> int:
    return 4 * n + 4


# The readable model's vocabulary (examples/two_phase.py), for decode/encode.
RM_STATE_NAMES = ("working", "prepared", "committed", "aborted")
TM_STATE_NAMES = ("init", "committed", "aborted")
COMMIT = ("Commit",)
ABORT = ("Abort",)


class TwoPhasePacked:
    """TwoPhase.tla with RM = {r1, ..., rN}, each state one int (layout above)."""

    reachability = ()
    deadlock_is_error = True  # as TwoPhase.cfg (TLC's default); the spec has no deadlock

    def __init__(self, n: int = 3) -> None:
        self.n = n
        self.bits = state_bits(n)
        self.tm_mask = FIELD << tm_shift(n)
        self.tm_committed = TM_COMMITTED << tm_shift(n)
        self.tm_aborted = TM_ABORTED << tm_shift(n)
        self.commit_msg = commit_msg_bit(n)
        self.abort_msg = abort_msg_bit(n)
        self.all_tm_prepared = sum(tm_prepared_bit(n, rm) for rm in range(n))  # tmPrepared = RM
        self.rm_low_bits = sum(1 << rm_shift(rm) for rm in range(n))  # low bit of each rmState
        # Everything an RM's actions need, precomputed once: the action labels, then the masks.
        self._rms = tuple(
            (
                f"TMRcvPrepared(r{rm + 1})",
                f"RMPrepare(r{rm + 1})",
                f"RMChooseToAbort(r{rm + 1})",
                f"RMRcvCommitMsg(r{rm + 1})",
                f"RMRcvAbortMsg(r{rm + 1})",
                FIELD << rm_shift(rm),  # rmState[rm]; also rmState[rm] = "aborted"
                ~(FIELD << rm_shift(rm)),  # everything but rmState[rm]
                PREPARED << rm_shift(rm),
                COMMITTED << rm_shift(rm),
                tm_prepared_bit(n, rm),
                prepared_msg_bit(n, rm),
            )
            for rm in range(n)
        )
        self.invariants = [
            Invariant("TPTypeOK", self.type_ok),
            Invariant("TCConsistent", self.consistent),
        ]

    # --- TPInit ---------------------------------------------------------------------------

    def initial_states(self) -> list[int]:
        # rmState = [rm \in RM |-> "working"], tmState = "init", tmPrepared = {}, msgs = {}
        return [0]

    # --- TPNext ---------------------------------------------------------------------------

    def successors(self, s: int) -> Iterator[tuple[str, int]]:
        tm_init = not s & self.tm_mask  # tmState = "init"
        if tm_init:
            # TMCommit: tmState = "init" /\ tmPrepared = RM
            #   /\ tmState' = "committed" /\ msgs' = msgs \cup {[type |-> "Commit"]}
            if s & self.all_tm_prepared == self.all_tm_prepared:
                yield "TMCommit", s | self.tm_committed | self.commit_msg
            # TMAbort: tmState = "init" /\ tmState' = "aborted" /\ msgs' = msgs \cup {Abort}
            yield "TMAbort", s | self.tm_aborted | self.abort_msg
        commit_sent = s & self.commit_msg  # [type |-> "Commit"] \in msgs
        abort_sent = s & self.abort_msg  # [type |-> "Abort"] \in msgs
        for (
            tm_rcv_prepared,
            rm_prepare,
            rm_choose_to_abort,
            rm_rcv_commit_msg,
            rm_rcv_abort_msg,
            rm_field,
            other_fields,
            prepared,
            committed,
            in_tm_prepared,
            prepared_msg,
        ) in self._rms:
            # TMRcvPrepared(rm): tmState = "init" /\ [type |-> "Prepared", rm |-> rm] \in msgs
            #   /\ tmPrepared' = tmPrepared \cup {rm}
            if tm_init and s & prepared_msg:
                yield tm_rcv_prepared, s | in_tm_prepared
            if not s & rm_field:  # rmState[rm] = "working"
                # RMPrepare(rm): rmState' = [rmState EXCEPT ![rm] = "prepared"]
                #   /\ msgs' = msgs \cup {[type |-> "Prepared", rm |-> rm]}
                yield rm_prepare, s | prepared | prepared_msg
                # RMChooseToAbort(rm): rmState' = [rmState EXCEPT ![rm] = "aborted"]
                yield rm_choose_to_abort, s | rm_field
            if commit_sent:
                # RMRcvCommitMsg(rm): rmState' = [rmState EXCEPT ![rm] = "committed"]
                yield rm_rcv_commit_msg, (s & other_fields) | committed
            if abort_sent:
                # RMRcvAbortMsg(rm): rmState' = [rmState EXCEPT ![rm] = "aborted"]
                yield rm_rcv_abort_msg, s | rm_field

    # --- invariants -----------------------------------------------------------------------

    def type_ok(self, s) -> bool:
        """TPTypeOK: every rmState value is one of four (any 2 bits), tmPrepared \\subseteq RM
        and msgs \\subseteq Messages (any bits below 4N+4), tmState one of three (not 0b11)."""
        return type(s) is int and s >= 0 and not s >> self.bits and s & self.tm_mask != self.tm_mask

    def consistent(self, s: int) -> bool:
        """TCConsistent: ~ \\E rm1, rm2 : rmState[rm1] = "aborted" /\\ rmState[rm2] = "committed",
        with all RMs tested at once: aborted = 0b11 (both bits), committed = 0b10 (high only)."""
        low = s & self.rm_low_bits
        high = (s >> 1) & self.rm_low_bits
        return not (low & high and high & ~low)

    # --- the readable model's vocabulary --------------------------------------------------

    def decode(self, s: int) -> tuple[tuple[str, ...], str, frozenset, frozenset]:
        """(rmState, tmState, tmPrepared, msgs) as in examples/two_phase.py."""
        n = self.n
        rm_state = tuple(RM_STATE_NAMES[(s >> rm_shift(rm)) & FIELD] for rm in range(n))
        tm_state = TM_STATE_NAMES[(s >> tm_shift(n)) & FIELD]
        tm_prepared = frozenset(rm for rm in range(n) if s & tm_prepared_bit(n, rm))
        msgs = {("Prepared", rm) for rm in range(n) if s & prepared_msg_bit(n, rm)}
        if s & self.commit_msg:
            msgs.add(COMMIT)
        if s & self.abort_msg:
            msgs.add(ABORT)
        return rm_state, tm_state, tm_prepared, frozenset(msgs)

    def encode(self, state) -> int:
        """The inverse of `decode`."""
        rm_state, tm_state, tm_prepared, msgs = state
        n = self.n
        s = TM_STATE_NAMES.index(tm_state) << tm_shift(n)
        for rm, name in enumerate(rm_state):
            s |= RM_STATE_NAMES.index(name) << rm_shift(rm)
        for rm in tm_prepared:
            s |= tm_prepared_bit(n, rm)
        for message in msgs:
            if message == COMMIT:
                s |= self.commit_msg
            elif message == ABORT:
                s |= self.abort_msg
            else:
                s |= prepared_msg_bit(n, message[1])
        return s
