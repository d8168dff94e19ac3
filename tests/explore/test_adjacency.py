"""The temporal pass's edges by source (`explore.adjacency`): the same read back from memory and
from disk, and the file nameless and freed."""

import os

import numpy as np
import pytest

from pymc_resume.explore.properties.adjacency import Adjacency

# Five sources with 2, 0, 3, 1 and 2 edges: (target, code) each.
EDGES = [[(1, 2), (2, 3)], [], [(0, 0), (2, 5), (4, 1)], [(3, 7)], [(0, 2), (1, 3)]]


def _filled(in_memory: int) -> Adjacency:
    edges = Adjacency(in_memory)
    for block in (EDGES[:2], EDGES[2:3], EDGES[3:]):  # blocks of sources, as the graph pass adds them
        flat = [value for source in block for pair in source for value in pair]
        edges.add_sources(np.array([len(source) for source in block]), np.array(flat, dtype=np.int32))
    return edges


@pytest.mark.parametrize("in_memory", [100, 1])  # all in memory; every block written to disk
def test_edges_read_back_the_same_from_memory_and_from_disk(in_memory):
    edges = _filled(in_memory)
    assert (len(edges), edges.edge_count()) == (5, 8)
    assert edges.on_disk == (0 if in_memory == 100 else 8)
    for source, expected in enumerate(EDGES):
        pairs = edges.edges(source)
        assert list(zip(pairs[0::2], pairs[1::2])) == expected
        assert edges.targets(source).tolist() == [target for target, _code in expected]
    if in_memory == 1:
        assert os.fstat(edges.file.fileno()).st_nlink == 0  # no name: freed even after a SIGKILL
    edges.close()
    assert edges.file is None
