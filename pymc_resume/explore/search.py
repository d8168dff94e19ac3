"""Breadth-first exhaustive search: the serial explorer.

Every violated invariant is reported with a shortest trace (breadth-first discovery order),
reachability properties are decided on the explored graph once the search is complete, and
deadlocks are reported where the model asks for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

from pymc_resume.explore.progress import Snapshot
from pymc_resume.explore.protocol import Model
from pymc_resume.explore.reachability import EdgeLog, first_unable_to_reach, predecessor_lists
from pymc_resume.explore.result import DEADLOCK, ExplorationResult, Violation
from pymc_resume.explore.trace import shortest_trace
from pymc_resume.explore.visited import NO_PARENT, VisitedStore

ProgressCallback = Callable[..., None]

# How many states to expand between looks at the clock (progress and time limit).
CLOCK_EVERY = 4096


def explore(
    model: Model,
    *,
    max_states: int | None = None,
    max_seconds: float | None = None,
    canonical: Callable[[Hashable], Hashable] | None = None,
    progress: ProgressCallback | None = None,
) -> ExplorationResult:
    """Enumerate every state reachable in `model` and check its properties.

    `canonical` maps a state to the representative of its symmetry class (symmetry
    reduction); traces are still made of real, unreduced states.
    """
    started = time.monotonic()
    store = VisitedStore()
    invariants = list(model.invariants)
    goals = [prop.goal for prop in model.reachability]
    goal_flags = [bytearray() for _ in goals]
    edges = EdgeLog() if goals else None
    first_bad: dict[str, int] = {}
    generated = 0
    stopped_because = None

    def admit(state: Hashable, parent: int) -> tuple[int, bool]:
        state_id, new = store.add(canonical(state) if canonical else state, parent)
        if new:
            for invariant in invariants:
                if invariant.name not in first_bad and not invariant.holds(state):
                    first_bad[invariant.name] = state_id
            for flags, goal in zip(goal_flags, goals):
                flags.append(1 if goal(state) else 0)
        return state_id, new

    frontier = []
    for state in model.initial_states():
        generated += 1
        state_id, new = admit(state, NO_PARENT)
        if new:
            frontier.append((state_id, state))

    depth = 1 if frontier else 0
    expanded = 0
    successors = model.successors
    while frontier and stopped_because is None:
        next_frontier = []
        for state_id, state in frontier:
            fanout = 0
            for _action, successor in successors(state):
                fanout += 1
                successor_id, new = admit(successor, state_id)
                if new:
                    next_frontier.append((successor_id, successor))
                if edges is not None:
                    edges.add(state_id, successor_id)
            generated += fanout
            if fanout == 0 and model.deadlock_is_error and DEADLOCK not in first_bad:
                first_bad[DEADLOCK] = state_id
            expanded += 1
            if expanded % CLOCK_EVERY == 0:
                elapsed = time.monotonic() - started
                if progress:
                    progress(Snapshot(len(store), generated, len(next_frontier), depth, elapsed))
                if max_seconds is not None and elapsed > max_seconds:
                    stopped_because = f"time limit of {max_seconds:g}s reached"
                    break
            if max_states is not None and len(store) >= max_states:
                stopped_because = f"state limit of {max_states:,} reached"
                break
        frontier = next_frontier
        if frontier and stopped_because is None:
            depth += 1

    complete = stopped_because is None
    if complete and edges is not None:
        start, sources = predecessor_lists(edges, len(store))
        for prop, flags in zip(model.reachability, goal_flags):
            missing = first_unable_to_reach(flags, start, sources)
            if missing is not None:
                first_bad[prop.name] = missing

    violations = {
        name: Violation(name, shortest_trace(model, store, state_id, canonical))
        for name, state_id in first_bad.items()
    }
    seconds = time.monotonic() - started
    if progress:
        progress(Snapshot(len(store), generated, 0, depth, seconds), final=True)
    return ExplorationResult(
        distinct_states=len(store),
        states_generated=generated,
        depth=depth,
        seconds=seconds,
        complete=complete,
        violations=violations,
        stopped_because=stopped_because,
    )
