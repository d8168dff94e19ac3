"""Snapshots as increments: a chain of pieces joins into exactly the record a whole snapshot
holds, a recovery from a chain reaches an uninterrupted run's result, a run killed while an
increment is written recovers from the snapshot before, and chains are compacted."""

import json
import multiprocessing
import os
import signal

import pytest
from run_summary import summary
from two_phase import TwoPhase

from pymc_resume.explore import AlwaysReachable, explore
from pymc_resume.explore.search import SnapshotSchedule
from pymc_resume.explore.snapshots import chain, increments, snapshot
from pymc_resume.explore.snapshots.chain import Chain, Piece
from pymc_resume.explore.store import persisted, settled_edges
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel


def joined_records(folder) -> list[dict]:
    """Each partition's record, its chain's pieces joined (without the marks it continues)."""
    saved = snapshot.load(folder)
    records = []
    for pieces, wheres in zip(saved.partitions, saved.pieces):
        whole = None
        for data, where in zip(pieces, wheres):
            whole = increments.join(whole, persisted.loads(data, where), where)
        assert whole is not None
        whole.pop("since")
        records.append(whole)
    return records


def chain_of(folder) -> list[int]:
    current = (folder / "current").read_text().strip()
    return json.loads((folder / current / "manifest.json").read_text())["chain"]


def stopped_run(folder, model, workers, max_states, exact=False):
    snapshots = SnapshotSchedule(str(folder), every=0.0)
    canonical = getattr(model, "canonical", None)
    return explore(
        model, canonical=canonical, workers=workers, max_states=max_states, snapshots=snapshots, exact=exact
    )


class EveryoneCanCommit(TwoPhase):
    """TwoPhase with a reachability property: its workers exchange fingerprints, and goal
    flags and edges stay with each state's owner."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.reachability = [
            AlwaysReachable("EveryoneCanCommit", lambda state: set(state[0]) == {"committed"})
        ]


RUNS = {  # name: (model, workers, exact, edges kept in memory before they are settled on disk)
    "one-worker": (lambda: ResumeModel(load_bounds("small")), 1, False, None),
    "two-workers-mutant": (lambda: ResumeModel(load_bounds("small"), "stuck-claim"), 2, False, None),
    "settled-edges": (lambda: ResumeModel(load_bounds("small")), 2, False, 500),
    "exact": (lambda: ResumeModel(load_bounds("small")), 1, True, None),
    "exact-two-workers": (lambda: ResumeModel(load_bounds("small")), 2, True, None),
    "exchanging": (lambda: EveryoneCanCommit(4), 2, False, None),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_a_chain_joins_into_the_record_a_whole_snapshot_holds(tmp_path, monkeypatch, name):
    """The same run twice, snapshots after every level: as a chain of increments, and with
    every snapshot a base (as before increments); the last snapshots hold the same records.
    `small` keeps edges for its reachability properties (into states stored ahead, with a
    fingerprint store), codec tables and waiting candidates: every column a piece appends."""
    make, workers, exact, in_memory = RUNS[name]
    if in_memory is not None:
        monkeypatch.setattr(settled_edges, "IN_MEMORY", in_memory)  # (workers fork with it)
    monkeypatch.setattr(chain, "OUTWEIGH", float("inf"))  # (a long chain, compacted by count only)
    stopped_run(tmp_path / "chain", make(), workers, 6000, exact)
    monkeypatch.setattr(chain, "MAX_INCREMENTS", 0)  # (read by the coordinator: this process)
    stopped_run(tmp_path / "whole", make(), workers, 6000, exact)
    assert len(chain_of(tmp_path / "chain")) > 3 and len(chain_of(tmp_path / "whole")) == 1
    assert joined_records(tmp_path / "chain") == joined_records(tmp_path / "whole")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_recovered_from_a_chain_reaches_the_uninterrupted_result(
    tmp_path, monkeypatch, workers, explored
):
    monkeypatch.setattr(chain, "OUTWEIGH", float("inf"))
    model = ResumeModel(load_bounds("small"), "stuck-claim")
    stopped_run(tmp_path, model, workers, 5000)
    assert len(chain_of(tmp_path)) > 1
    snapshots = SnapshotSchedule(str(tmp_path), every=0.0)
    recovered = explore(
        model,
        canonical=model.canonical,
        workers=workers,
        from_snapshot=snapshot.load(tmp_path),
        snapshots=snapshots,
    )
    assert summary(recovered) == summary(explored("small", "stuck-claim", workers=workers))


def test_chains_are_compacted_and_every_snapshot_recovers(tmp_path, monkeypatch, explored):
    """At most `MAX_INCREMENTS` increments after a base; only the chain's folders are kept."""
    monkeypatch.setattr(chain, "MAX_INCREMENTS", 2)
    monkeypatch.setattr(chain, "OUTWEIGH", float("inf"))
    chains = []
    save = snapshot.save

    def recorded(*args):
        taken = save(*args)
        chains.append(taken.depths)
        folders = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
        assert folders == [snapshot.folder_name(depth) for depth in taken.depths]
        return taken

    monkeypatch.setattr(snapshot, "save", recorded)
    model = ResumeModel(load_bounds("small"))
    stopped_run(tmp_path, model, 2, 8000)
    assert max(map(len, chains)) == 3 and [len(depths) for depths in chains].count(1) > 2
    recovered = explore(model, canonical=model.canonical, workers=2, from_snapshot=snapshot.load(tmp_path))
    assert summary(recovered) == summary(explored("small", workers=2))


def test_a_chain_is_compacted_once_its_increments_outweigh_its_base():
    base = Chain().extended(3, [Piece(1000, "a" * 64), Piece(1000, "b" * 64)], base=True)
    assert Chain().next_is_base() and not base.next_is_base()
    grown = base.extended(4, [Piece(600, "c" * 64), Piece(600, "d" * 64)], base=False)
    assert grown.depths == (3, 4) and grown.increment_bytes() == 1200 and not grown.next_is_base()
    grown = grown.extended(5, [Piece(500, "e" * 64), Piece(300, "f" * 64)], base=False)
    assert grown.increment_bytes() == 2000 and grown.next_is_base()


def _killed_while_writing_an_increment(folder, workers):
    """Run in a child process: the process that writes a partition's third increment (the
    child itself, or a worker) SIGKILLs itself halfway through that file."""
    write = snapshot.write_partition
    begun = []

    def half_written(path, partition, base=True):
        if not base:
            begun.append(path)
            if len(begun) == 3:
                with open(path, "wb") as stream:
                    stream.write(b"PYMCSNAP" + bytes(100))
                os.kill(os.getpid(), signal.SIGKILL)
        return write(path, partition, base)

    snapshot.write_partition = half_written  # (workers fork with it)
    model = ResumeModel(load_bounds("small"), "stuck-claim")
    stopped_run(folder, model, workers, 10**6)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_killed_while_writing_an_increment_recovers_from_the_snapshot_before(
    tmp_path, workers, explored
):
    child = multiprocessing.get_context("fork").Process(
        target=_killed_while_writing_an_increment, args=(tmp_path, workers)
    )
    child.start()
    child.join(120)
    # Killed (one process), or stopped by its killed worker; never finished.
    assert child.exitcode not in (None, 0)
    saved = snapshot.load(tmp_path)
    torn = [p.name for p in tmp_path.iterdir() if p.is_dir() and p.name > snapshot.folder_name(saved.depth)]
    assert len(torn) == 1, "the half-written snapshot is beside the published one, unpublished"
    model = ResumeModel(load_bounds("small"), "stuck-claim")
    recovered = explore(
        model,
        canonical=model.canonical,
        workers=workers,
        from_snapshot=saved,
        snapshots=SnapshotSchedule(str(tmp_path), every=0.0),
    )
    assert summary(recovered) == summary(explored("small", "stuck-claim", workers=workers))
    assert torn[0] not in {p.name for p in tmp_path.iterdir()}  # (removed by the recovery)
