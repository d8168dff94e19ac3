"""Edges kept for reachability, settled to disk past a bound (`explore.settled_edges`): read
back in order, saved in checkpoints as the arrays they were, and deciding what memory decides."""

import os
from array import array

import pytest
from run_summary import summary

from pymc_resume.explore import explore
from pymc_resume.explore.search import SnapshotSchedule
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.explore.store import persisted, settled_edges
from pymc_resume.explore.store.settled_edges import SettledEdges
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel


def test_edges_read_back_in_order_in_chunks_and_the_file_has_no_name():
    settled = SettledEdges()
    sources, targets = array("i", range(10)), array("i", range(100, 110))
    settled.write(memoryview(sources)[:7], memoryview(targets)[:7])
    settled.write(memoryview(sources)[7:], memoryview(targets)[7:])
    chunks = [(s.tolist(), t.tolist()) for s, t in settled.chunks(3)]
    assert chunks == [
        ([0, 1, 2], [100, 101, 102]),
        ([3, 4, 5], [103, 104, 105]),
        ([6], [106]),
        ([7, 8, 9], [107, 108, 109]),
    ]
    assert len(settled) == 10 and os.fstat(settled.file.fileno()).st_nlink == 0
    settled.close()
    assert list(settled.chunks(3)) == []


def test_an_array_saved_from_pieces_reads_back_as_the_array_it_would_have_been():
    pieces = persisted.ArrayPieces("i", 5, lambda: iter([array("i", [1, 2]), array("i", [3, 4, 5])]))
    assert persisted.loads(persisted.dumps(pieces), "test") == array("i", [1, 2, 3, 4, 5])
    short = persisted.ArrayPieces("i", 6, lambda: iter([array("i", [1, 2])]))
    with pytest.raises(ValueError, match="8 bytes, not the 24"):
        persisted.dumps(short)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("mutant", [None, "stuck-claim"])
def test_settled_edges_decide_reachability_as_edges_in_memory_do(monkeypatch, workers, mutant, explored):
    """At `small`, the reference (every state can reach a goal) and `stuck-claim` (the liveness
    violation's shortest trace), with a bound of 500 edges: nearly every level settles some."""
    in_memory = summary(explored("small", mutant, workers=workers))  # (before the bound is set)
    monkeypatch.setattr(settled_edges, "IN_MEMORY", 500)  # (workers fork with it)
    runs = []
    write = SettledEdges.write

    def counted(self, sources, targets):
        runs.append(len(sources))
        write(self, sources, targets)

    monkeypatch.setattr(SettledEdges, "write", counted)
    model = ResumeModel(load_bounds("small"), mutant)
    settled = explore(model, canonical=model.canonical, workers=workers)
    assert summary(settled) == in_memory
    if workers == 1:  # (workers count their writes in their own processes)
        assert runs


@pytest.mark.parametrize("workers", [1, 2])
def test_a_checkpoint_with_settled_edges_recovers_to_the_same_result(
    tmp_path, monkeypatch, workers, explored
):
    in_memory = summary(explored("small", "stuck-claim", workers=workers))  # (before the bound is set)
    monkeypatch.setattr(settled_edges, "IN_MEMORY", 500)
    model = ResumeModel(load_bounds("small"), "stuck-claim")
    snapshots = SnapshotSchedule(str(tmp_path), every=0.0, run={"what": "stuck-claim"})
    first = explore(model, canonical=model.canonical, workers=workers, max_states=12000, snapshots=snapshots)
    assert not first.complete
    saved = snapshot.load(tmp_path)
    recovered = explore(
        model, canonical=model.canonical, workers=workers, from_snapshot=saved, snapshots=snapshots
    )
    assert summary(recovered) == in_memory
