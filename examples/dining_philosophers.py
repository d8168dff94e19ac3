"""The Chandy-Misra solution to the dining philosophers, for NP philosophers.

Encodes the TLA+ translation of the PlusCal algorithm in tlaplus/Examples
specifications/DiningPhilosophers/DiningPhilosophers.tla (Init, Next == \\E self \\in 1..NP :
Loop(self) \\/ Think(self) \\/ Eat(self); invariants TypeOK and ExclusiveAccess), checked there
with model DiningPhilosophers.cfg (NP = 5). The cfg also checks the liveness property
NobodyStarves, which does not change the set of reachable states and is not encoded here.

State: a tuple (forks, hungry, pc), each a tuple indexed by philosopher/fork number - 1:
  forks[f - 1] = (holder, clean)   -- the record [holder |-> ..., clean |-> ...],
  hungry[p - 1]                    -- a bool,
  pc[p - 1]                        -- "Loop" | "Eat" | "Think".

TLC's counts for model DiningPhilosophers.cfg (NP = 5), recorded in
specifications/DiningPhilosophers/manifest.json of tlaplus/Examples (commit
32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9): 67 distinct states, 336 states generated, depth 29. Check it with

    pymc-resume explore examples/dining_philosophers.py:model
"""

from __future__ import annotations

from collections.abc import Iterator

from tla import except_

from pymc_resume.explore import Invariant

LABELS = frozenset({"Loop", "Eat", "Think"})


class DiningPhilosophers:
    """DiningPhilosophers.tla with NP philosophers."""

    reachability = ()
    deadlock_is_error = True  # the cfg checks deadlock (TLC's default); there is none

    def __init__(self, np: int = 5) -> None:
        self.np = np
        self.philosophers = range(1, np + 1)
        self.invariants = [
            Invariant("TypeOK", self.type_ok),
            Invariant("ExclusiveAccess", self.exclusive_access),
        ]

    # --- the define block -----------------------------------------------------------------

    def left_fork(self, p: int) -> int:
        return p

    def right_fork(self, p: int) -> int:
        return 1 if p == self.np else p + 1

    def left_philosopher(self, p: int) -> int:
        return self.np if p == 1 else p - 1

    def right_philosopher(self, p: int) -> int:
        return 1 if p == self.np else p + 1

    def can_eat(self, forks, p: int) -> bool:
        """CanEat(p) == IsHoldingBothForks(p) /\\ BothForksAreClean(p)."""
        left, right = forks[self.left_fork(p) - 1], forks[self.right_fork(p) - 1]
        return left == (p, True) and right == (p, True)

    # --- Init -----------------------------------------------------------------------------

    def initial_states(self):
        # Each fork starts dirty, held by the lower-numbered adjacent philosopher.
        forks = tuple((1 if fork == 2 else fork, False) for fork in range(1, self.np + 1))
        return [(forks, (True,) * self.np, ("Loop",) * self.np)]

    # --- the three labels of process Philosopher -------------------------------------------

    def loop(self, state, p: int):
        forks, hungry, pc = state
        if pc[p - 1] != "Loop":
            return None
        left, right = self.left_fork(p), self.right_fork(p)
        # Hand over a dirty fork we hold (left first), cleaning it.
        if forks[left - 1] == (p, False):
            forks2 = except_(forks, left - 1, (self.left_philosopher(p), True))
        elif forks[right - 1] == (p, False):
            forks2 = except_(forks, right - 1, (self.right_philosopher(p), True))
        else:
            forks2 = forks
        # Note: CanEat is evaluated on the old forks (PlusCal translates a label to one step).
        if hungry[p - 1]:
            label = "Eat" if self.can_eat(forks, p) else "Loop"
        else:
            label = "Think"
        return (forks2, hungry, except_(pc, p - 1, label))

    def think(self, state, p: int):
        forks, hungry, pc = state
        if pc[p - 1] != "Think":
            return None
        return (forks, except_(hungry, p - 1, True), except_(pc, p - 1, "Loop"))

    def eat(self, state, p: int):
        forks, hungry, pc = state
        if pc[p - 1] != "Eat":
            return None
        left, right = self.left_fork(p) - 1, self.right_fork(p) - 1
        forks2 = except_(forks, left, (forks[left][0], False))
        forks2 = except_(forks2, right, (forks2[right][0], False))
        return (forks2, except_(hungry, p - 1, False), except_(pc, p - 1, "Loop"))

    def successors(self, state) -> Iterator[tuple[str, tuple]]:
        for p in self.philosophers:
            for name, action in (("Loop", self.loop), ("Think", self.think), ("Eat", self.eat)):
                next_state = action(state, p)
                if next_state is not None:
                    yield f"{name}({p})", next_state

    # --- invariants -----------------------------------------------------------------------

    def type_ok(self, state) -> bool:
        forks, hungry, pc = state
        return (
            len(forks) == self.np
            and all(h in self.philosophers and isinstance(c, bool) for h, c in forks)
            and len(hungry) == self.np
            and all(isinstance(h, bool) for h in hungry)
            and len(pc) == self.np
            and all(label in LABELS for label in pc)
        )

    def share_fork(self, p: int, q: int) -> bool:
        return bool({self.left_fork(p), self.right_fork(p)} & {self.left_fork(q), self.right_fork(q)})

    def exclusive_access(self, state) -> bool:
        pc = state[2]
        return all(
            not (pc[p - 1] == "Eat" and pc[q - 1] == "Eat")
            for p in self.philosophers
            for q in self.philosophers
            if p != q and self.share_fork(p, q)
        )


def model() -> DiningPhilosophers:
    """The model of the cfg above."""
    return DiningPhilosophers(5)
