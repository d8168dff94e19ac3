"""A partition as a snapshot sees it: every field `snapshots.snapshot` saves (`partition_record`)
and refills (`restore_partition`), read from and written to the collaborator that keeps it; and
the batches a partition takes ahead of its next level so that a snapshot is only partitions.

The snapshot's code knows partitions only by these names; this view is the one place that
says where each lives, so the collaborators can change without the file format noticing.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pymc_resume.explore.level.batches import Batch
from pymc_resume.explore.snapshots import increments, snapshot
from pymc_resume.explore.snapshots.chain import Piece
from pymc_resume.explore.snapshots.snapshot import Layout
from pymc_resume.explore.store import persisted

if TYPE_CHECKING:  # the partition makes the view; the view only names its type
    from pymc_resume.explore.level.partition import Partition


def _field(path: str, writable: bool = False) -> Any:
    """The partition's attribute at `path` ("admission.store"), read-only unless `writable`."""
    get = attrgetter(f"partition.{path}")
    owner_path, _, name = path.rpartition(".")
    owner_of = attrgetter(owner_path) if owner_path else None

    def put(view: SavedPartition, value: object) -> None:
        setattr(owner_of(view.partition) if owner_of else view.partition, name, value)

    return property(get, put if writable else None)


class SavedPartition:
    """What a snapshot of `partition` saves, and what restoring one refills."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.index, self.count, self.exact = partition.index, partition.count, partition.exact

    generated = _field("generated", writable=True)  # the run's count of states generated
    # How keys read (a restore refills the codec's tables in place, and checks each key).
    codec = _field("keys.codec")
    encode = _field("keys.encode")
    decode = _field("keys.decode")
    wire = _field("keys.wire")
    whole = _field("keys.whole")
    # The store, its levels, the edges into its states and the candidates for the next level.
    store = _field("admission.store")
    level_starts = _field("admission.level_starts", writable=True)
    ahead = _field("admission.ahead", writable=True)
    carry = _field("admission.carry", writable=True)
    edge_sources = _field("admission.edge_sources", writable=True)
    edge_targets = _field("admission.edge_targets", writable=True)
    settled_edges = _field("admission.settled_edges")
    edges_before_last_level = _field("admission.edges_before_last_level", writable=True)
    # The first violation of each property, and each state's goal flags.
    invariants = _field("verdicts.invariants")
    goals = _field("verdicts.goals")
    first_bad = _field("verdicts.first_bad", writable=True)
    goal_flags = _field("verdicts.goal_flags", writable=True)
    # What the other partitions were sent, and what their ids mean here.
    sent = _field("peers.sent", writable=True)
    translations = _field("peers.translations", writable=True)
    forwarded = _field("peers.forwarded", writable=True)
    # Where this partition's last snapshot piece ended (`increments.Marks`; None before one).
    snapshot_marks = _field("snapshot_marks", writable=True)

    def stored_levels(self) -> tuple[int, list[int]]:
        return self.partition.admission.stored_levels()

    def ahead_keys(self):
        return self.partition.admission.ahead_keys()


def snapshot_bytes(partition: Partition, base: bool = True) -> bytes:
    """Everything `partition` knows, except the model (a `base`), or what is new since its
    last piece, as a snapshot piece's bytes (`snapshot.partition_record` in the `persisted`
    format: never pickle)."""
    return snapshot.partition_bytes(SavedPartition(partition), base)


def write_snapshot(partition: Partition, path: str | Path, base: bool = True) -> Piece:
    """`partition`'s snapshot piece written at `path`, a MiB at a time (`snapshot.write_partition`)."""
    return snapshot.write_partition(path, SavedPartition(partition), base)


def restore(partition: Partition, pieces: Sequence[bytes], wheres: Sequence[str], layout: Layout) -> None:
    """Take the state a chain of snapshot pieces (read from `wheres`, its base first) holds,
    joined (`increments.join`), after checking it fits the model, this partition and the
    snapshot's `layout`; SnapshotError if it does not."""
    whole = None
    for data, where in zip(pieces, wheres, strict=True):
        whole = increments.join(whole, persisted.loads(data, where), where)
    snapshot.restore_partition(SavedPartition(partition), whole, wheres[-1], layout)


def take(partition: Partition, inbound: list[Batch]) -> None:
    """Take batches sent for the next level now, ahead of the partition's own candidates, as
    if its next `step` had been given them: before a snapshot, so that a snapshot is only
    partitions. Their keys become the partition's keys (a wire codec's tables absorb the
    senders' entries, as admission would, in the same order)."""
    keys, peers, admission = partition.keys, partition.peers, partition.admission
    taken: list[Batch] = []
    for candidates, repeats, tables in inbound:
        if tables is not None:  # (only a wire partition, which has translations, gets tables)
            candidates = peers.received(candidates, tables)
        elif keys.encode and not keys.wire:
            candidates = [(keys.encode(state), parent) for state, parent in candidates]
        taken.append((candidates, repeats, None))
    admission.carry[:0] = taken
