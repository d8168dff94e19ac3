"""The edges of the state graph grouped by source, in memory up to a bound and on disk beyond it.

Deciding a temporal property walks the graph's edges forwards from any state (Tarjan's search
for strongly connected components, shortest paths inside a component), so they are kept as
adjacency lists: the edges of state `v` are `starts[v]` to `starts[v + 1]`, each a target id and
a *code* (its action's label id times two, plus one where the step changes the state). That is
8 bytes an edge and 8 a state. Edges are appended source by source in id order; once `in_memory`
of them are held, they are written to an anonymous temporary file (unlinked at once, so the
kernel frees it when the process ends, even after a SIGKILL, as the frontier's spill file is) and
read back one source at a time with `pread`. The file is read, not mapped: mapped pages would
count in the process's peak resident memory, which `--max-memory` budgets.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from typing import IO

import numpy as np

# Edges held in memory before they go to disk: 4 million, 32 MB.
IN_MEMORY = 1 << 22
_PAIR = 8  # bytes of an edge: two int32


def label_of(code: int) -> int:
    """The label id of an edge's code (which is `2 * label + 1` where the step changes the
    state, `2 * label` where it does not)."""
    return code >> 1


def moves(code: int) -> bool:
    return bool(code & 1)


class Adjacency:
    """Each state's out-edges as (target, code) pairs, appended a source at a time."""

    __slots__ = ("starts", "pairs", "on_disk", "file", "in_memory")

    def __init__(self, in_memory: int | None = None) -> None:
        self.starts = array("q", [0])  # source v's edges are starts[v] to starts[v + 1]
        self.pairs = array("i")  # the edges not on disk, flat: target, code, target, code, ...
        self.on_disk = 0  # the first `on_disk` edges are in the file
        self.file: IO[bytes] | None = None
        self.in_memory = IN_MEMORY if in_memory is None else in_memory

    def __len__(self) -> int:
        """The number of sources added."""
        return len(self.starts) - 1

    def edge_count(self) -> int:
        return self.starts[-1]

    def add_sources(self, counts: np.ndarray, pairs: np.ndarray) -> None:
        """The edges of the next sources: `counts[i]` edges for the i-th, and all of them flat
        (target, code, target, code, ...; int32). A source's edges are never split between
        memory and disk: `edges` reads each from one place."""
        base = self.on_disk + len(self.pairs) // 2
        self.starts.frombytes((base + np.cumsum(counts, dtype=np.int64)).tobytes())
        self.pairs.frombytes(pairs.astype(np.int32, copy=False).tobytes())
        if len(self.pairs) >= 2 * self.in_memory:
            self._spill()

    def _spill(self) -> None:
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="pymc-resume-graph-")
        self.file.seek(0, os.SEEK_END)
        self.file.write(memoryview(self.pairs))
        self.file.flush()
        self.on_disk += len(self.pairs) // 2
        self.pairs = array("i")

    def edges(self, source: int) -> array:
        """The edges of `source`, flat: targets at even positions, codes at odd ones."""
        start, end = self.starts[source], self.starts[source + 1]
        if start >= self.on_disk:
            return self.pairs[2 * (start - self.on_disk) : 2 * (end - self.on_disk)]
        found = array("i")
        if end > start:
            assert self.file is not None
            found.frombytes(os.pread(self.file.fileno(), (end - start) * _PAIR, start * _PAIR))
        return found

    def targets(self, source: int) -> array:
        """The targets of `source`'s edges."""
        return self.edges(source)[0::2]

    def close(self) -> None:
        """Free the file now (the kernel frees it anyway when the process ends)."""
        if self.file is not None:
            self.file.close()
            self.file = None
