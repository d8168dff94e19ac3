"""The edges a partition keeps for reachability properties, on disk once they are many.

"From every state a goal state is reachable" (AG EF) is decided after the search by a backward
search over every edge of the graph (`reachability`), so a partition keeps the edges into its
states: two int32 columns, 8 bytes an edge, 25 million a worker at the `paper` bounds. Only the
edges of the latest level have to stay in memory: a checkpoint taken between levels sets apart
the edges into states stored ahead (`snapshot._ahead_as_candidates`), and those are all recent.
So at the start of each level the edges that were already there when the previous level began
are *settled*: once there are `IN_MEMORY` of them, they are appended to an anonymous temporary
file (unlinked at once, freed by the kernel even after a SIGKILL, as the frontier's spill file
is), and the backward search and checkpoints read them back a chunk at a time.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import IO

import numpy as np

# Settled edges a partition keeps in memory before it writes them to disk: 32 MB.
IN_MEMORY = 1 << 22
_ITEM = 4  # bytes of an int32 end


class SettledEdges:
    """Edges written to disk in runs, each run its sources then its targets."""

    __slots__ = ("file", "runs", "count")

    def __init__(self) -> None:
        self.file: IO[bytes] | None = None  # made at the first write
        self.runs: list[tuple[int, int]] = []  # (file offset, edges) of each run
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def write(self, sources: memoryview, targets: memoryview) -> None:
        """Append a run of edges: views of two int32 arrays of one length (not copied)."""
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="pymc-resume-edges-")
        offset = self.file.seek(0, os.SEEK_END)
        self.file.write(sources)
        self.file.write(targets)
        self.file.flush()
        edges = sources.nbytes // _ITEM
        self.runs.append((offset, edges))
        self.count += edges

    def chunks(self, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every edge in the order written, as (sources, targets) int32 arrays of at most `size`."""
        return zip(self.column(0, size), self.column(1, size))

    def column(self, which: int, size: int, skip: int = 0) -> Iterator[np.ndarray]:
        """The sources (`which` 0) or the targets (1) of every edge but the first `skip`, in
        the same chunks (a snapshot's increment reads only the edges settled since the last)."""
        if self.file is None:
            return
        fd = self.file.fileno()
        for offset, edges in self.runs:
            first = offset + which * edges * _ITEM
            for start in range(min(skip, edges), edges, size):
                taken = min(size, edges - start)
                yield np.frombuffer(os.pread(fd, taken * _ITEM, first + start * _ITEM), dtype=np.int32)
            skip = max(0, skip - edges)

    def close(self) -> None:
        """Free the file now (the kernel frees it anyway when the process ends)."""
        if self.file is not None:
            self.file.close()
            self.file = None
        self.runs, self.count = [], 0


def int32_view(values) -> np.ndarray:
    """An `array('i')` of edge ends (or an empty sequence) as numpy, without a copy."""
    return np.frombuffer(values, dtype=np.int32) if len(values) else np.empty(0, dtype=np.int32)
