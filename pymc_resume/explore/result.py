"""The outcome of an exploration: counts, and each violated property with its trace."""

from __future__ import annotations

from typing import Any

import attrs

DEADLOCK = "deadlock"


@attrs.frozen
class Step:
    """One state of a trace and the action that led to it (None for an initial state)."""

    action: str | None
    state: Any


@attrs.frozen
class Violation:
    """A property that failed, with a shortest trace from an initial state; for a temporal
    property, a lasso: the trace's states from `cycle_start` on are a cycle, and the action
    `loops_back` leads from its last state back to the state at `cycle_start`."""

    property: str
    trace: tuple[Step, ...]
    cycle_start: int | None = None
    loops_back: str | None = None


@attrs.frozen
class ExplorationResult:
    """What an exploration found.

    `complete` is False when a limit stopped the search: then a property absent from
    `violations` was not refuted but not proved either.
    """

    distinct_states: int
    states_generated: int
    depth: int
    seconds: float
    complete: bool
    violations: dict[str, Violation]
    stopped_because: str | None = None
    # Temporal properties the search could not decide (a budget), with the reason.
    skipped: dict[str, str] = attrs.Factory(dict)
    # Per worker process (none for one worker): its peak resident bytes, as it reported them.
    worker_peak_rss: tuple[int, ...] = ()
    # Per worker process: its states, and the seconds it spent stepping levels (the rest of the
    # search it waited for the slowest worker): how even the partitions are.
    worker_load: tuple[tuple[int, float], ...] = ()
    # A bound on the chance that a fingerprint collision hid a state (0.0 where every
    # fingerprint was the state's key itself); None with an exact store (`--exact`).
    collision_probability: float | None = None
    # With coverage: (action, successors it generated, new states it found) per action label,
    # "(initial states)" first; the first counts sum to states_generated, the second to
    # distinct_states. Names the model declares in `actions` but never took come with 0, 0.
    coverage: tuple[tuple[str, int, int], ...] | None = None
    mode = "exhaustive"  # against a simulation's random walks (`simulate.SimulationResult`)

    def holds(self, name: str) -> bool:
        return self.complete and name not in self.violations and name not in self.skipped

    def unproved(self, graph_property: bool = False) -> str:
        """Why a property without a violation has no verdict (the search stopped early)."""
        return f"exploration incomplete: {self.stopped_because}"

    def counts_json(self) -> dict:
        """The counts every command's JSON reports, in one shape."""
        return {
            "mode": self.mode,
            "complete": self.complete,
            "stopped_because": self.stopped_because,
            "distinct_states": self.distinct_states,
            "states_generated": self.states_generated,
            "depth": self.depth,
            "seconds": round(self.seconds, 3),
            "store": "exact" if self.collision_probability is None else "fingerprints",
            "collision_probability": self.collision_probability,
        }
