"""What a partition finds about the states it expands: the first state that violates each
invariant (or deadlocks), each state's reachability goal flags, and whether the search stops
there. The properties are the model's; this is only where their answers are kept, so that the
hot loops call one bound method a state and look nothing up."""

from __future__ import annotations

from collections.abc import Hashable

from pymc_resume.explore.level.peers import Peers
from pymc_resume.explore.result import DEADLOCK
from pymc_resume.explore.validate import ValidModel


class Verdicts:
    """The invariant verdicts and goal flags of partition `index` of `count`."""

    def __init__(self, model: ValidModel, index: int, count: int, stop_at_first: bool, peers: Peers) -> None:
        self.index, self.count = index, count
        self.invariants = list(model.invariants)
        # Optional fast path: a model's `all_hold(state)` is True only where every invariant
        # holds; where it is False (or absent) each invariant is asked.
        self.all_hold = model.all_hold
        self.goals = [prop.goal for prop in model.reachability]
        # Per goal, a 0/1 flag for each of this partition's states, by local id.
        self.goal_flags = [bytearray() for _ in self.goals]
        # property -> (level, gid, successor index): the first state found that violates it,
        # or, for a successor outside the constraints (never stored), its parent's gid and its
        # position among the parent's successors (else -1).
        self.first_bad: dict[str, tuple[int, int, int]] = {}
        self.stop_at_first = stop_at_first
        self.stopped = False  # a violation (with `stop_at_first`) or a tick stopped the level
        self.stop_reason: str | None = None  # why, when the partition itself decided it
        # Exchanging, the goal flags of another owner's states expanded here go to that owner
        # with this level's queries (`peers.queries`, replaced each level).
        self.peers = peers

    def check(self, state: Hashable, gid: int, level: int) -> None:
        """Check a state being expanded: each invariant not yet violated, then its goal flags."""
        all_hold = self.all_hold
        if all_hold is None or not all_hold(state):
            first_bad = self.first_bad
            for invariant in self.invariants:
                if invariant.name not in first_bad and not invariant.holds(state):
                    first_bad[invariant.name] = (level, gid, -1)
                    self.stop_if_first()
        if not self.goals:
            return
        if gid % self.count != self.index:  # exchanging: another owner's state, held here
            reports = self.peers.queries.reports[gid % self.count]  # type: ignore[index]  # (with goals)
            reports.gids.append(gid)
            reports.flags.extend(1 if goal(state) else 0 for goal in self.goals)
            return
        local = gid // self.count
        for flags, goal in zip(self.goal_flags, self.goals):
            if local == len(flags):  # (always, but where partitions exchange fingerprints)
                flags.append(1 if goal(state) else 0)
                continue
            if local > len(flags):
                flags.extend(bytes(local + 1 - len(flags)))
            flags[local] = 1 if goal(state) else 0

    def check_outside(self, state: Hashable, level: int, parent: int, position: int) -> None:
        """Check the invariants of a state outside the constraints (TLC checks each one every
        time it is generated); a violation is recorded by its parent and position."""
        all_hold = self.all_hold
        if all_hold is None or not all_hold(state):
            first_bad = self.first_bad
            for invariant in self.invariants:
                if invariant.name not in first_bad and not invariant.holds(state):
                    first_bad[invariant.name] = (level, parent, position)
                    self.stop_if_first()

    def deadlocked(self, level: int, gid: int) -> None:
        """A state with no successor, where the model counts that an error (the first only)."""
        if DEADLOCK not in self.first_bad:
            self.first_bad[DEADLOCK] = (level, gid, -1)
            self.stop_if_first()

    def stop_if_first(self) -> None:
        if self.stop_at_first:
            self.stopped = True
            self.stop_reason = "stopped at the first violation (--stop-at-first)"
