"""Graph properties "from every state a goal state is reachable", decided on the explored graph.

Each partition records the edges into its states. After the search the edges are renumbered
densely (partition by partition), grouped by target into predecessor lists, and a backward
breadth-first search from the goal states marks every state that can reach one. Of the
unmarked states, the one admitted at the smallest level is reported: it has the shortest trace.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

import attrs


@attrs.frozen
class GraphPiece:
    """What one partition knows of the graph: its size, levels, goal flags and incoming edges."""

    size: int
    level_starts: list[int]
    goal_flags: list[bytearray]  # one per property, indexed by local id
    edge_sources: array  # global ids
    edge_targets: array  # local ids in this partition


def predecessor_lists(sources: array, targets: array, state_count: int) -> tuple[array, array]:
    """Group edges by target: the predecessors of `t` are `preds[start[t]:start[t + 1]]`."""
    start = array("q", bytes(8 * (state_count + 1)))
    for target in targets:
        start[target + 1] += 1
    for i in range(state_count):
        start[i + 1] += start[i]
    fill = array("q", start)
    preds = array("i", bytes(4 * len(sources)))
    for source, target in zip(sources, targets):
        preds[fill[target]] = source
        fill[target] += 1
    return start, preds


def can_reach(goal: bytearray, start: array, preds: array) -> bytearray:
    """Flags of the states from which some goal state is reachable."""
    reached = bytearray(goal)
    pending = [state for state, is_goal in enumerate(goal) if is_goal]
    while pending:
        target = pending.pop()
        for i in range(start[target], start[target + 1]):
            source = preds[i]
            if not reached[source]:
                reached[source] = 1
                pending.append(source)
    return reached


def dense_edges(pieces: list[GraphPiece]) -> tuple[array, array, list[int]]:
    """All edges with states renumbered 0..n-1, partition after partition."""
    count = len(pieces)
    offsets = [0]
    for piece in pieces[:-1]:
        offsets.append(offsets[-1] + piece.size)
    if count == 1:  # global ids are already dense
        return pieces[0].edge_sources, pieces[0].edge_targets, offsets
    sources, targets = array("i"), array("i")
    for index, piece in enumerate(pieces):
        sources.extend(offsets[g % count] + g // count for g in piece.edge_sources)
        base = offsets[index]
        targets.extend(base + local for local in piece.edge_targets)
    return sources, targets, offsets


def shallowest_unable(pieces: list[GraphPiece]) -> list[int | None]:
    """Per property: the global id of a shallowest state that cannot reach a goal, or None."""
    count = len(pieces)
    total = sum(piece.size for piece in pieces)
    sources, targets, offsets = dense_edges(pieces)
    start, preds = predecessor_lists(sources, targets, total)
    found: list[int | None] = []
    for prop in range(len(pieces[0].goal_flags)):
        goal = bytearray().join(piece.goal_flags[prop] for piece in pieces)
        reached = can_reach(goal, start, preds)
        best = None  # (level, gid)
        for index, piece in enumerate(pieces):
            local = reached.find(0, offsets[index], offsets[index] + piece.size)
            if local >= 0:
                local -= offsets[index]
                candidate = (bisect_right(piece.level_starts, local), local * count + index)
                best = candidate if best is None else min(best, candidate)
        found.append(None if best is None else best[1])
    return found
