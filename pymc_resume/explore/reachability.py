"""Graph properties "from every state a goal state is reachable", decided on the explored graph.

The search records every edge as two parallel int arrays; afterwards the edges are grouped by
target (a compressed predecessor list) and a backward breadth-first search from the goal states
marks every state that can reach one. The unmarked state with the smallest id is the shallowest
violation.
"""

from __future__ import annotations

from array import array


class EdgeLog:
    """Every explored transition as (source id, target id), in two flat arrays."""

    __slots__ = ("sources", "targets")

    def __init__(self) -> None:
        self.sources = array("q")
        self.targets = array("q")

    def __len__(self) -> int:
        return len(self.sources)

    def add(self, source: int, target: int) -> None:
        self.sources.append(source)
        self.targets.append(target)


def predecessor_lists(edges: EdgeLog, state_count: int) -> tuple[array, array]:
    """Group edges by target: the predecessors of `t` are `sources[start[t]:start[t + 1]]`."""
    start = array("q", bytes(8 * (state_count + 1)))
    for target in edges.targets:
        start[target + 1] += 1
    for i in range(state_count):
        start[i + 1] += start[i]
    fill = array("q", start)
    sources = array("q", bytes(8 * len(edges)))
    for source, target in zip(edges.sources, edges.targets):
        sources[fill[target]] = source
        fill[target] += 1
    return start, sources


def first_unable_to_reach(goal: bytearray, start: array, sources: array) -> int | None:
    """The smallest state id from which no goal state is reachable, or None if there is none."""
    can_reach = bytearray(goal)
    pending = [state_id for state_id, is_goal in enumerate(goal) if is_goal]
    while pending:
        target = pending.pop()
        for i in range(start[target], start[target + 1]):
            source = sources[i]
            if not can_reach[source]:
                can_reach[source] = 1
                pending.append(source)
    missing = can_reach.find(0)
    return None if missing < 0 else missing
