"""Lamport's "Teaching Concurrency" algorithm with regular (not atomic) registers, N processes.

Encodes the TLA+ translation of the PlusCal algorithm in tlaplus/Examples
specifications/TeachingConcurrency/SimpleRegular.tla (Init, Next == (\\E self \\in 0..N-1 :
a1(self) \\/ a2(self) \\/ b(self)) \\/ Terminating; invariants PCorrect, TypeOK and Inv), checked
there with model SimpleRegular.cfg (N = 8).

A regular register x[i] is modelled as the set of values a read may return: writing 1 over 0
goes {0} -> {0, 1} -> {1}, and a read picks any element.

State: a tuple (x, y, pc), each a tuple indexed by process 0..N-1:
  x[i]  -- frozenset of {0, 1}, the regular register process i writes,
  y[i]  -- 0 or 1, process i's local register,
  pc[i] -- "a1" | "a2" | "b" | "Done".

TLC's counts for model SimpleRegular.cfg (N = 8), recorded in
specifications/TeachingConcurrency/manifest.json of tlaplus/Examples (commit
32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9): 277,726 distinct states, 1,454,776 states generated,
depth 25 (about a minute here). Check it with

    pymc-resume explore examples/simple_regular.py:model
"""

from __future__ import annotations

from collections.abc import Iterator

from tla import except_

from pymc_resume.explore import Invariant

ZERO = frozenset({0})
BOTH = frozenset({0, 1})
ONE = frozenset({1})
REGISTER_VALUES = frozenset({ZERO, BOTH, ONE})  # (SUBSET {0, 1}) \ {{}}
LABELS = frozenset({"a1", "a2", "b", "Done"})


class SimpleRegular:
    """SimpleRegular.tla with N processes."""

    reachability = ()
    deadlock_is_error = True  # the cfg checks deadlock; Terminating stutters at the end

    def __init__(self, n: int = 8) -> None:
        self.n = n
        self.procs = range(n)
        self.invariants = [
            Invariant("PCorrect", self.p_correct),
            Invariant("TypeOK", self.type_ok),
            Invariant("Inv", self.inv),
        ]

    def initial_states(self):
        return [((ZERO,) * self.n, (0,) * self.n, ("a1",) * self.n)]

    def a1(self, state, i):
        """a1: x[self] := {0, 1} (the write of 1 has begun)."""
        x, y, pc = state
        if pc[i] == "a1":
            yield (except_(x, i, BOTH), y, except_(pc, i, "a2"))

    def a2(self, state, i):
        """a2: x[self] := {1} (the write of 1 has ended)."""
        x, y, pc = state
        if pc[i] == "a2":
            yield (except_(x, i, ONE), y, except_(pc, i, "b"))

    def b(self, state, i):
        """b: with (v \\in x[(self-1) % N]) y[self] := v -- one successor per readable v."""
        x, y, pc = state
        if pc[i] == "b":
            for v in sorted(x[(i - 1) % self.n]):
                yield (x, except_(y, i, v), except_(pc, i, "Done"))

    def terminating(self, state):
        """Terminating: every process is Done and nothing changes (a stuttering step)."""
        if all(label == "Done" for label in state[2]):
            yield state

    def successors(self, state) -> Iterator[tuple[str, tuple]]:
        for i in self.procs:
            for name, action in (("a1", self.a1), ("a2", self.a2), ("b", self.b)):
                for next_state in action(state, i):
                    yield f"{name}({i})", next_state
        for next_state in self.terminating(state):
            yield "Terminating", next_state

    def p_correct(self, state) -> bool:
        """When every process is Done, some y[i] = 1."""
        _, y, pc = state
        return not all(label == "Done" for label in pc) or 1 in y

    def type_ok(self, state) -> bool:
        x, y, pc = state
        return (
            len(x) == len(y) == len(pc) == self.n
            and all(r in REGISTER_VALUES for r in x)
            and all(v in (0, 1) for v in y)
            and all(label in LABELS for label in pc)
        )

    def inv(self, state) -> bool:
        x, y, pc = state
        return (
            self.type_ok(state)
            and all(x[i] == ONE for i in self.procs if pc[i] in ("b", "Done"))
            and (any(label != "Done" for label in pc) or 1 in y)
        )


def model() -> SimpleRegular:
    """The model of the cfg above."""
    return SimpleRegular(8)
