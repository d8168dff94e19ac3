"""Dijkstra's termination detection on a ring (EWD 840), for N nodes.

Encodes tlaplus/Examples specifications/ewd840/EWD840.tla (Init, Next == System \\/ Environment;
invariants TypeOK, TerminationDetection and Inv), checked there with model EWD840.cfg (N = 3,
CHECK_DEADLOCK FALSE). The cfg also checks the temporal properties Liveness and TDSpec, which
do not change the set of reachable states and are not encoded here.

Unlike the other models here, Init is not a single state: active and color may start with
any value, so there are 2^N * 2^N * N initial states.

State: a tuple (active, color, tpos, tcolor) where active and color are tuples indexed by
node 0..N-1, tpos is the token's node and tcolor its color ("white" | "black").

TLC's counts for model EWD840.cfg (N = 3, CHECK_DEADLOCK FALSE), recorded in
specifications/ewd840/manifest.json of tlaplus/Examples (commit
32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9): 302 distinct states, 2,001 states generated, depth 10
(9 in the first recording, commit b7d2d8c; 9 is the breadth-first diameter). TLC's 2,001 counts
a successor once per true disjunct of a guard; this encoding yields each successor once, 1,817
generated (tests/explore/test_tlc_counts.py shows the difference is exactly those duplicates).
Check it with

    pymc-resume explore examples/ewd840.py:model
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product

from tla import except_

from pymc_resume.explore import Invariant

COLORS = ("white", "black")


class EWD840:
    """EWD840.tla with N nodes."""

    reachability = ()
    deadlock_is_error = False  # EWD840.cfg: CHECK_DEADLOCK FALSE

    def __init__(self, n: int = 3) -> None:
        self.n = n
        self.nodes = range(n)
        self.invariants = [
            Invariant("TypeOK", self.type_ok),
            Invariant("TerminationDetection", self.termination_detection),
            Invariant("Inv", self.inv),
        ]

    def initial_states(self):
        """Init: any active, any color, any tpos; the token is black."""
        for active in product((False, True), repeat=self.n):
            for color in product(COLORS, repeat=self.n):
                for tpos in self.nodes:
                    yield (active, color, tpos, "black")

    # --- System: token passing ------------------------------------------------------------

    def initiate_probe(self, state):
        active, color, tpos, tcolor = state
        if tpos == 0 and (tcolor == "black" or color[0] == "black"):
            return (active, except_(color, 0, "white"), self.n - 1, "white")
        return None

    def pass_token(self, state, i: int):
        active, color, tpos, tcolor = state
        if tpos == i and (not active[i] or color[i] == "black" or tcolor == "black"):
            new_tcolor = "black" if color[i] == "black" else tcolor
            return (active, except_(color, i, "white"), i - 1, new_tcolor)
        return None

    # --- Environment: the underlying computation ------------------------------------------

    def send_msg(self, state, i: int):
        """SendMsg(i): one successor per receiver j (the \\E j \\in Node \\ {i})."""
        active, color, tpos, tcolor = state
        if not active[i]:
            return
        for j in self.nodes:
            if j != i:
                new_color = except_(color, i, "black") if j > i else color
                yield j, (except_(active, j, True), new_color, tpos, tcolor)

    def deactivate(self, state, i: int):
        active, color, tpos, tcolor = state
        if active[i]:
            return (except_(active, i, False), color, tpos, tcolor)
        return None

    def successors(self, state) -> Iterator[tuple[str, tuple]]:
        next_state = self.initiate_probe(state)
        if next_state is not None:
            yield "InitiateProbe", next_state
        for i in self.nodes:
            if i != 0:
                next_state = self.pass_token(state, i)
                if next_state is not None:
                    yield f"PassToken({i})", next_state
        for i in self.nodes:
            for j, next_state in self.send_msg(state, i):
                yield f"SendMsg({i}->{j})", next_state
            next_state = self.deactivate(state, i)
            if next_state is not None:
                yield f"Deactivate({i})", next_state

    # --- invariants -----------------------------------------------------------------------

    def type_ok(self, state) -> bool:
        active, color, tpos, tcolor = state
        return (
            len(active) == self.n
            and all(isinstance(a, bool) for a in active)
            and len(color) == self.n
            and all(c in COLORS for c in color)
            and tpos in self.nodes
            and tcolor in COLORS
        )

    def termination_detection(self, state) -> bool:
        """terminationDetected => terminated."""
        active, color, tpos, tcolor = state
        detected = tpos == 0 and tcolor == "white" and color[0] == "white" and not active[0]
        return not detected or not any(active)

    def inv(self, state) -> bool:
        """Dijkstra's inductive invariant P0 \\/ P1 \\/ P2."""
        active, color, tpos, tcolor = state
        p0 = all(not active[i] for i in self.nodes if tpos < i)
        p1 = any(color[j] == "black" for j in range(tpos + 1))
        p2 = tcolor == "black"
        return p0 or p1 or p2


def model() -> EWD840:
    """The model of the cfg above."""
    return EWD840(3)
