"""Graph properties "from every state a goal state is reachable", decided on the explored graph.

Each partition records the edges into its states (source global id, target local id) as it
admits them, and keeps them after the search: the graph is never gathered in one process. A
backward breadth-first search from the goal states runs in rounds. In a round each partition
marks the states that arrived for it, then finds, in numpy over its edges, the sources of the
edges into the states it marked last, and sends each source to its owner. When a round sends
nothing, every state that can reach a goal is marked; of the unmarked states, the one admitted
at the smallest level is reported: it has the shortest trace.

A round scans a partition's edges once, a chunk at a time, so that its temporaries stay small
(the settled ones are read back from disk, `settled_edges`), and there are as many rounds as
the longest backward distance to a goal: at the `paper` bounds, about fifty scans of 25
million edges a worker, a few seconds, where gathering the edges into the coordinator took its
memory to 1.1 GiB.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Protocol

import numpy as np

# Edges scanned at once in a round: the temporaries of a chunk take about 13 bytes an edge, and
# the search's peak memory is the search's own plus theirs (13 MiB; numpy's cost a call is nothing
# at a million edges).
EDGE_CHUNK = 1 << 20
NOTHING = np.empty(0, dtype=np.int64)


class BackwardSearch:
    """One partition's side of the backward search for one property's goal states."""

    def __init__(self, partition, prop: int) -> None:
        self.count, self.index = partition.count, partition.index
        self.level_starts = partition.level_starts
        self.edge_chunks = partition.edge_chunks  # (source global ids, target local ids)
        flags = partition.goal_flags[prop]
        self.reached = np.zeros(len(partition), dtype=bool)
        self.reached[: len(flags)] = np.frombuffer(bytes(flags), dtype=np.uint8).astype(bool)
        self.marked = self.reached.copy()  # reached since the last round: whose sources to find
        self.flag_count = 0  # flags a round's sources took last round (the edges do not change)

    def round(self, arrivals: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Mark the states (local ids) that arrived; return, for each partition, the local ids
        of the sources of the edges into the states marked since the last round."""
        for local_ids in arrivals:
            new = local_ids[~self.reached[local_ids]]
            self.reached[new] = True
            self.marked[new] = True
        if not self.marked.any():
            return [NOTHING] * self.count
        # The sources found, as one flag per global id (a byte a state of the whole run, and
        # no sorting): partition p's are then every count-th flag from p, in local id order.
        found = np.zeros(self.flag_count, dtype=bool)
        for sources, targets in self.edge_chunks(EDGE_CHUNK):
            hits = sources[self.marked[targets]]
            if hits.size:
                highest = int(hits.max())
                if highest >= len(found):  # (grown by doubling: a copy now and then, not a chunk)
                    grown = max(highest + 1, 2 * len(found))
                    found = np.concatenate([found, np.zeros(grown - len(found), dtype=bool)])
                found[hits] = True
        self.marked[:] = False
        self.flag_count = len(found)
        return [
            np.flatnonzero(found[owner :: self.count]).astype(np.int64, copy=False)
            for owner in range(self.count)
        ]

    def shallowest_unreached(self) -> tuple[int, int] | None:
        """(level, global id) of the first state admitted here that reaches no goal, or None.
        Local ids are given in admission order, so the first is the shallowest."""
        unreached = np.flatnonzero(~self.reached)
        if not unreached.size:
            return None
        local = int(unreached[0])
        return bisect_right(self.level_starts, local), local * self.count + self.index


class BackwardRounds(Protocol):
    """What an engine offers the backward search: one `BackwardSearch` per partition."""

    count: int

    def reach_begin(self, prop: int) -> None: ...

    def reach_round(self, inbound: list[list[np.ndarray]]) -> list[list[np.ndarray]]: ...

    def reach_end(self) -> list[tuple[int, int] | None]: ...


def shallowest_unable(engine: BackwardRounds, properties: int) -> list[int | None]:
    """Per property: the global id of a shallowest state that cannot reach a goal, or None."""
    found: list[int | None] = []
    for prop in range(properties):
        engine.reach_begin(prop)
        inbound: list[list[np.ndarray]] = [[] for _ in range(engine.count)]
        while True:
            outbound = engine.reach_round(inbound)  # per partition: its sources, by owner
            inbound = [[sent[to] for sent in outbound if len(sent[to])] for to in range(engine.count)]
            del outbound  # (its arrays are `inbound`'s: an engine may let go of them once sent)
            if not any(inbound):
                break
        candidates = [candidate for candidate in engine.reach_end() if candidate is not None]
        found.append(min(candidates)[1] if candidates else None)
    return found
