"""Lamport's distributed mutual exclusion (CACM 1978): a model whose states carry strings.

Encodes tlaplus/Examples specifications/lamport_mutex/LamportMutex.tla (Init, Next; invariants
TypeOK, BoundedNetwork and Mutex), checked there with model MCLamportMutex.cfg: N = 3,
maxClock = 6, Nat overridden by 0..MaxNat with MaxNat = 7, deadlock checked, and
`CONSTRAINT ClockConstraint` (no process's clock beyond maxClock).

TLC's counts, recorded in specifications/lamport_mutex/manifest.json (tlaplus/Examples commit
32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9): 724,274 distinct states, 2,729,079 states
generated, depth 61. As with AsyncTerminationDetection, the generated count includes the
successors outside the constraint, which TLC generates and checks but neither stores nor
expands. Check it with

    pymc-resume explore examples/lamport_mutex.py:model

State: (clock, req, ack, network, crit), with processes numbered 0..N-1 (the spec's 1..N):
clock a tuple of N ints; req a tuple of N tuples of N ints (req[p][q]: the clock of q's request
as p received it, 0 for none); ack a tuple of N frozensets; network a tuple of N tuples of N
channels (network[p][q]: the messages from p to q, oldest first), each message a (type, clock)
pair whose type is the string "req", "ack" or "rel"; crit a frozenset. The strings are why
this model is in the bench: a state's hash goes through its strings, as in a plainly written
model of a protocol, where TwoPhase's states are ints and tuples.
"""

from __future__ import annotations

from tla import except_

from pymc_resume.explore import Invariant

ACK = ("ack", 0)
REL = ("rel", 0)


class LamportMutex:
    """LamportMutex.tla with N processes, clocks bounded by the constraint `maxClock`."""

    state_fields = ("clock", "req", "ack", "network", "crit")

    def __init__(self, n: int = 3, max_clock: int = 6, max_nat: int = 7) -> None:
        self.procs = range(n)
        self.max_clock = max_clock
        self.max_nat = max_nat  # Nat <- 0..MaxNat, so Clock == 1..MaxNat
        self.clocks = range(1, max_nat + 1)
        self.invariants = [
            Invariant("TypeOK", self.type_ok),
            Invariant("BoundedNetwork", self.bounded_network),
            Invariant("Mutex", self.mutex),
        ]

    def initial_states(self):
        n = len(self.procs)
        empty = tuple(() for _ in self.procs)
        yield ((1,) * n, ((0,) * n,) * n, (frozenset(),) * n, (empty,) * n, frozenset())

    def constraint(self, state) -> bool:
        """ClockConstraint: no clock beyond maxClock."""
        return all(c <= self.max_clock for c in state[0])

    # --- the actions -------------------------------------------------------------------------

    def broadcast(self, network, s: int, message):
        """network with `message` appended to every channel from s to another process."""
        row = network[s]
        return except_(network, s, tuple(row[r] if r == s else row[r] + (message,) for r in self.procs))

    def beats(self, req, p: int, q: int) -> bool:
        """p's request has priority over q's, as far as p knows."""
        mine, theirs = req[p][p], req[p][q]
        return theirs == 0 or mine < theirs or (mine == theirs and p < q)

    def request(self, state, p: int):
        clock, req, ack, network, crit = state
        if req[p][p] != 0:
            return None
        return (
            clock,
            except_(req, p, except_(req[p], p, clock[p])),
            except_(ack, p, frozenset((p,))),
            self.broadcast(network, p, ("req", clock[p])),
            crit,
        )

    def enter(self, state, p: int):
        clock, req, ack, network, crit = state
        if len(ack[p]) != len(self.procs) or not all(self.beats(req, p, q) for q in self.procs if q != p):
            return None
        return (clock, req, ack, network, crit | {p})

    def exit(self, state, p: int):
        clock, req, ack, network, crit = state
        if p not in crit:
            return None
        return (
            clock,
            except_(req, p, except_(req[p], p, 0)),
            except_(ack, p, frozenset()),
            self.broadcast(network, p, REL),
            crit - {p},
        )

    def receive(self, state, p: int, q: int):
        """ReceiveRequest(p, q), ReceiveAck(p, q) or ReceiveRelease(p, q): whichever the head of
        the channel from q to p enables (at most one of them is)."""
        clock, req, ack, network, crit = state
        channel = network[q][p]
        if not channel:
            return None
        (kind, c), rest = channel[0], channel[1:]
        network = except_(network, q, except_(network[q], p, rest))
        if kind == "req":
            new_clock = c + 1 if c > clock[p] else clock[p] + 1
            network = except_(network, p, except_(network[p], q, network[p][q] + (ACK,)))
            state = (except_(clock, p, new_clock), except_(req, p, except_(req[p], q, c)), ack, network, crit)
            return "ReceiveRequest", state
        if kind == "ack":
            return "ReceiveAck", (clock, req, except_(ack, p, ack[p] | {q}), network, crit)
        return "ReceiveRelease", (clock, except_(req, p, except_(req[p], q, 0)), ack, network, crit)

    def successors(self, state):
        for p in self.procs:
            for name, act in (("Request", self.request), ("Enter", self.enter), ("Exit", self.exit)):
                successor = act(state, p)
                if successor is not None:
                    yield f"{name}({p + 1})", successor
        for p in self.procs:
            for q in self.procs:
                if q != p:
                    received = self.receive(state, p, q)
                    if received is not None:
                        yield f"{received[0]}({p + 1},{q + 1})", received[1]

    # --- invariants --------------------------------------------------------------------------

    def type_ok(self, state) -> bool:
        clock, req, ack, network, crit = state
        procs, clocks = frozenset(self.procs), self.clocks
        messages_ok = all(
            message in (ACK, REL) or (message[0] == "req" and message[1] in clocks)
            for row in network
            for channel in row
            for message in channel
        )
        return (
            all(c in clocks for c in clock)
            and all(0 <= r <= self.max_nat for row in req for r in row)
            and all(a <= procs for a in ack)
            and messages_ok
            and crit <= procs
        )

    def bounded_network(self, state) -> bool:
        return all(len(channel) <= 3 for row in state[3] for channel in row)

    def mutex(self, state) -> bool:
        return len(state[4]) <= 1


def model() -> LamportMutex:
    """The model of MCLamportMutex.cfg."""
    return LamportMutex(3, 6, 7)
