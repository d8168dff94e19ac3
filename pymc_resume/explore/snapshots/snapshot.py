"""The explorer's own checkpoints: a run killed at any moment continues from the last one.

A snapshot is taken between two levels: every partition's store, codec tables and the candidates
waiting for the next level (the coordinator first hands each partition the batches routed to it,
so a snapshot is nothing but its partitions). It is written into a fresh folder `level-NNNNNN`
(one file per partition and a `manifest.json`), flushed, and only then published by atomically
replacing the `current` pointer file, so a SIGKILL at any moment leaves either the previous
snapshot or the new one, never a torn one. A partition's file there is a piece of a chain: the
run's first snapshot (and one after every compaction, `chain`) is a base, holding everything;
the others hold only what is new since the previous piece (`increments`), and the manifest
names the chain's folders and each piece's length and SHA-256. Folders outside the published
chain, and temporary pointer files, are removed when a snapshot is published and when a
recovery starts.

A checkpoint folder is read back as untrusted input: partition files are in the `persisted`
format (never pickle), and `load` and `restore_partition` check everything against the manifest
and the model, so a damaged or crafted folder is a `SnapshotError` (one line, exit 2), never
code run, a crash, or a report of impossible counts. The folder names no code and sets no
bound: what is checked (the model, its bounds and mutant) comes from the recovering command
line and must match the manifest's record of the run; how much may be read comes from the run's
limits (its memory budget, else the memory the machine has free), never from the counts the
manifest claims; the pointer file is read only as a regular file and its text is never shown.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from array import array
from collections.abc import Callable
from itertools import chain, islice
from pathlib import Path
from typing import NoReturn, TypeVar, cast

import attrs
import numpy as np

from pymc_resume.errors import EnvironmentProblem
from pymc_resume.explore.result import DEADLOCK
from pymc_resume.explore.snapshots.chain import MAX_CHAIN, Chain, Piece, Written
from pymc_resume.explore.snapshots.increments import BASE, Marks
from pymc_resume.explore.store import persisted
from pymc_resume.explore.store.frontier import Frontier
from pymc_resume.explore.store.memory import available_bytes
from pymc_resume.explore.store.persisted import SnapshotError
from pymc_resume.explore.store.settled_edges import int32_view
from pymc_resume.files import UnreadableFile, read_bounded, write_atomically

_T = TypeVar("_T")

FORMAT = 8  # 3: partition files in the `persisted` format, the manifest holds every level's start;
# 4: with the derived plain codec, partitions store (and carry) states, not keys; 5: a set's
# stable hash spreads its parts' hashes, and exchanging partitions store stable fingerprints;
# 6: the plain codec's shape tags start at -2 (`plain._tag`), and ints wider than 64 bits are
# fingerprinted by their 60-bit limbs (`fingerprints._limbs`); 7: partitions of a model whose
# codec fingerprints its keys, or with reachability properties, exchange fingerprints too; 8:
# snapshots as increments: a manifest names its chain, each piece with its length and SHA-256
POINTER = "current"
MANIFEST = "manifest.json"
_FOLDER = re.compile(r"level-\d{6}")
MAX_MANIFEST_BYTES = 16 * 2**20  # a manifest lists a few numbers per partition
MAX_POINTER_BYTES = 64  # "level-NNNNNN" and a newline
PARTITION_BASE_BYTES = 256 * 2**20
PARTITION_BYTES_A_STATE = 4096
# The partition files together may take at most this share of the run's memory budget: their
# bytes are held while the states they decode to are built.
READ_SHARE = 2
MAX_COUNT = 2**63 - 1  # a counter of generated states: past it, a file is not a run's
_POINTER_TEMPORARY = f".{POINTER}."  # write_atomically's temporary files beside the pointer

__all__ = [
    "Layout",
    "Snapshot",
    "SnapshotError",
    "load",
    "partition_record",
    "remove_stale",
    "restore_partition",
    "save",
    "write_partition",
    "write_partition_bytes",
]


@attrs.frozen
class Layout:
    """Where each level's states are in each partition when the snapshot was taken.

    `level_starts[p][k]` is the local id of the first state partition `p` admitted at level
    `k + 1`, and `sizes[p]` how many states it held. A restored partition is checked against it.
    """

    level_starts: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]

    def level(self, partition: int, level: int) -> tuple[int, int]:
        """The local ids [start, end) of the states `partition` admitted at `level` (from 1)."""
        starts = self.level_starts[partition]
        end = starts[level] if level < len(starts) else self.sizes[partition]
        return starts[level - 1], end


@attrs.frozen
class Snapshot:
    run: dict  # what was being checked (opaque here; the caller checks it matches)
    depth: int
    elapsed: float  # seconds spent before this snapshot
    partitions: list[tuple[bytes, ...]]  # each partition's pieces, its chain's base first
    layout: Layout
    files: tuple[str, ...] = ()  # each partition's last piece, in the published folder (for messages)
    pieces: tuple[tuple[str, ...], ...] = ()  # where each partition's pieces were read from


def folder_name(depth: int) -> str:
    return f"level-{depth:06d}"


def partition_file(folder: Path, index: int) -> Path:
    return folder / f"partition-{index}.state"


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())


def _since(partition, base: bool) -> Marks:
    """Where `partition`'s next piece starts: at nothing for a base, else where its last
    piece ended (the coordinator asks for an increment only after a piece of this run)."""
    if base:
        return BASE
    assert partition.snapshot_marks is not None, "an increment without a piece before it"
    return partition.snapshot_marks


def write_partition(path: str | Path, partition, base: bool = True) -> Piece:
    """Write `partition`'s piece (`partition_record`, in the `persisted` format: whole for a
    `base`, else what is new since its last piece) at `path`, a MiB at a time: where the
    partition lives, without its bytes held whole. Returns what the manifest records of it."""
    record, marks = partition_record(partition, _since(partition, base))
    with open(path, "wb") as stream:
        length, digest = persisted.dump(record, stream)
        stream.flush()
        os.fsync(stream.fileno())
    partition.snapshot_marks = marks
    return Piece(length, digest)


def partition_bytes(partition, base: bool = True) -> bytes:
    """`partition`'s piece (see `write_partition`) as bytes, for a partition on another host
    (a Ray actor's), which the coordinator writes (`write_partition_bytes`)."""
    record, marks = partition_record(partition, _since(partition, base))
    data = persisted.dumps(record)
    partition.snapshot_marks = marks
    return data


def write_partition_bytes(path: str | Path, data: bytes) -> Piece:
    """Write a partition's piece that was encoded elsewhere (a Ray actor's)."""
    _write_file(Path(path), data)
    return Piece(*persisted.identity(data))


def _sync_folder(folder: Path) -> None:
    """Make the folder's new entries durable (the files' names, not only their bytes)."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def save(
    directory: str | Path,
    run: dict,
    depth: int,
    elapsed: float,
    write_partitions: Callable[[Path, bool], Written],
    chain: Chain | None = None,
) -> Chain:
    """Write a snapshot into a fresh folder, then publish it and remove what it supersedes;
    returns the run's chain with it.

    `write_partitions(folder, base)` writes every partition's piece there (`partition_file`;
    each where its partition lives, see `write_partition`): whole when `base`, else what is new
    since the last snapshot of `chain`. Then the manifest, naming the chain, is written and the
    pointer moved to the folder, atomically: a SIGKILL at any moment leaves the previous
    snapshot published, or this one."""
    root = Path(directory)
    name = folder_name(depth)
    folder = root / name
    chain = chain or Chain()
    base = chain.next_is_base()
    try:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(folder, ignore_errors=True)  # a folder of this depth a killed run left
        folder.mkdir()
        written = write_partitions(folder, base)
        chain = chain.extended(depth, written.pieces, base)
        _write_file(folder / MANIFEST, _manifest_text(run, depth, elapsed, written, chain))
        _sync_folder(folder)
        write_atomically(root / POINTER, name + "\n")
    except OSError as error:
        raise EnvironmentProblem(
            f"cannot write a checkpoint into {root}: {error.strerror or error}"
        ) from None
    remove_stale(root)
    return chain


def _manifest_text(run: dict, depth: int, elapsed: float, written: Written, chain: Chain) -> bytes:
    manifest = {
        "format": FORMAT,
        "run": run,
        "depth": depth,
        "elapsed": elapsed,
        "chain": list(chain.depths),
        "partitions": [
            {"states": size, "level_starts": list(starts), "pieces": [piece.as_record() for piece in pieces]}
            for starts, size, pieces in zip(written.level_starts, written.sizes, chain.pieces)
        ],
    }
    return (json.dumps(manifest, indent=2) + "\n").encode()


def _current_name(root: Path) -> str | None:
    """The snapshot folder the pointer file names; its text is never shown (a pointer swapped
    for a link to another file would otherwise print that file's first line)."""
    pointer = root / POINTER
    if not os.path.lexists(pointer):
        return None
    if pointer.is_symlink():
        raise SnapshotError(f"{pointer}: a link, not the pointer file a run writes")
    try:
        name = read_bounded(pointer, MAX_POINTER_BYTES, "a checkpoint pointer").decode("utf-8").strip()
    except UnreadableFile as error:
        raise SnapshotError(f"{pointer}: unreadable: {error.reason}") from None
    except UnicodeDecodeError:
        name = ""
    if not _FOLDER.fullmatch(name):
        raise SnapshotError(f"{pointer}: does not name a snapshot folder (like level-000012)")
    return name


def remove_stale(directory: str | Path) -> None:
    """Remove what a killed run left beside the published snapshot: snapshot folders that are
    not in its chain (the current one and those its manifest names), and temporary pointer
    files. Nothing else in the folder is touched."""
    root = Path(directory)
    try:
        current = _current_name(root)
    except SnapshotError:
        return  # no trustworthy pointer: keep everything
    if current is None:
        return
    kept = _chain_folders(root, current)
    if kept is None:
        return  # a manifest that names no chain: keep everything (a recovery refuses it)
    for entry in root.iterdir():
        if entry.name not in kept and _FOLDER.fullmatch(entry.name) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.name.startswith(_POINTER_TEMPORARY) and entry.is_file():
            entry.unlink(missing_ok=True)


def _chain_folders(root: Path, current: str) -> set[str] | None:
    """The folders the current snapshot's chain takes (its manifest's `chain`), or None when
    the manifest cannot say (only which folders to keep is read here, nothing is trusted)."""
    try:
        text = read_bounded(root / current / MANIFEST, MAX_MANIFEST_BYTES, "a checkpoint manifest")
        manifest = json.loads(text)
    except (UnreadableFile, ValueError, RecursionError):
        return None
    depths = manifest.get("chain") if isinstance(manifest, dict) else None
    if type(depths) is not list or not all(_is_int(depth) and 0 < depth < 10**6 for depth in depths):
        return None
    return {current, *map(folder_name, depths)}


def load(directory: str | Path, max_memory: int | None = None) -> Snapshot:
    """The published snapshot of a checkpoint folder, its manifest checked, and the pieces of
    its chain read as bytes, each checked against the manifest's length and SHA-256; their
    values are checked as each partition joins them and restores itself (`increments.join`,
    `restore_partition`). `max_memory` is the recovering run's budget in bytes (None: the
    memory the machine has free); the files together may take a `READ_SHARE` of it, checked
    before any is read."""
    root = Path(directory)
    if not root.is_dir():
        raise SnapshotError(f"{root}: no such folder")
    name = _current_name(root)
    if name is None:
        raise SnapshotError(f"{root}: no checkpoint to recover from (no '{POINTER}' file)")
    where = root / name / MANIFEST
    manifest = _read_manifest(where)
    depth, elapsed, layout, chain = _check_manifest(manifest, str(where))
    files = tuple(
        tuple(str(partition_file(root / folder_name(at), index)) for at in chain.depths)
        for index in range(len(layout.sizes))
    )
    limits = _read_limits(files, chain, layout.sizes, max_memory)
    partitions = []
    for pieces_files, pieces, pieces_limits in zip(files, chain.pieces, limits):
        read = []
        for file, piece, limit in zip(pieces_files, pieces, pieces_limits):
            try:
                data = read_bounded(file, limit, "a checkpoint partition")
            except UnreadableFile as error:
                raise SnapshotError(f"{file}: unreadable: {error.reason}") from None
            if persisted.identity(data) != (piece.length, piece.sha256):  # (changed since checked)
                raise SnapshotError(f"{file}: {_NOT_THE_PIECE}")
            read.append(data)
        partitions.append(tuple(read))
    last = tuple(pieces_files[-1] for pieces_files in files)
    return Snapshot(cast(dict, manifest)["run"], depth, elapsed, partitions, layout, last, files)


_NOT_THE_PIECE = "not the piece the manifest names (its length or SHA-256 differs)"


def _read_manifest(where: Path) -> object:
    try:
        text = read_bounded(where, MAX_MANIFEST_BYTES, "a checkpoint manifest").decode("utf-8")
        return json.loads(text)
    except UnicodeDecodeError as error:
        raise SnapshotError(f"{where}: not UTF-8 text (byte {error.start})") from None
    except UnreadableFile as error:
        raise SnapshotError(f"{where}: unreadable: {error.reason}") from None
    except ValueError as error:
        if "digits" in str(error):  # (Python's advice to raise its limit is not ours to give)
            too_long = "a number has more digits than Python converts"
            raise SnapshotError(f"{where}: unreadable: {too_long}") from None
        raise SnapshotError(f"{where}: unreadable: {error}") from None
    except (OSError, RecursionError) as error:
        raise SnapshotError(f"{where}: unreadable: {getattr(error, 'strerror', None) or error}") from None


def _read_limits(
    files: tuple[tuple[str, ...], ...], chain: Chain, sizes: tuple[int, ...], max_memory: int | None
) -> list[list[int]]:
    """How many bytes each piece may have, checked on the files before any is read.

    A piece is refused when it does not start as a snapshot file, when its length or its
    header's SHA-256 is not the manifest's, or when the files together exceed a `READ_SHARE`
    of the run's budget (or of the memory free). A generous 4 KiB a state beyond 256 MiB
    caps each file further; the manifest's counts can only lower a limit, never raise one
    above the budget."""
    known = [limit for limit in (max_memory, available_bytes()) if limit]
    budget = (min(known) if known else 2**62) // READ_SHARE
    total = 0
    limits: list[list[int]] = []
    for pieces_files, pieces, size in zip(files, chain.pieces, sizes):
        limits.append([])
        for file, piece in zip(pieces_files, pieces):
            declared, digest = _declared_identity(file)
            if (declared, digest) != (piece.length, piece.sha256):
                raise SnapshotError(f"{file}: {_NOT_THE_PIECE}")
            total += declared
            if total > budget:
                raise SnapshotError(
                    f"{file}: the partition files take more than the {budget:,} bytes this run may read "
                    f"(half its memory budget, or of the memory free; --max-memory sets it)"
                )
            limits[-1].append(min(declared, PARTITION_BASE_BYTES + PARTITION_BYTES_A_STATE * size))
    return limits


def _declared_identity(file: str) -> tuple[int, str]:
    """The length a piece's header gives it (header included) and the SHA-256 of the body it
    records, the header and the start of the record read alone and the length checked against
    the file's size: a file of zeros or a sparse giant is refused here."""
    try:
        head = read_bounded(
            file, None, "a checkpoint partition", head=persisted.HEADER.size + len(_RECORD_START)
        )
    except UnreadableFile as error:
        raise SnapshotError(f"{file}: unreadable: {error.reason}") from None
    length = persisted.declared_length(head, file)
    if head[persisted.HEADER.size :] != _RECORD_START:
        raise SnapshotError(f"{file}: not a partition's snapshot (its values do not start as one's)")
    try:
        actual = os.stat(file).st_size
    except OSError as error:
        raise SnapshotError(f"{file}: unreadable: {error.strerror or error}") from None
    if actual != length:
        raise SnapshotError(f"{file}: truncated or extended ({actual:,} bytes, its header says {length:,})")
    return length, persisted.identity(head)[1]


def shown(value: object) -> str:
    """A value from a file, for a message: short, and never an int too long to print (Python
    refuses to write one of more than 4,300 digits)."""
    if type(value) is int and value.bit_length() > 64:
        return f"an integer of {value.bit_length():,} bits"
    try:
        text = repr(value)
    except ValueError:
        return f"a {type(value).__name__} too large to print"
    return text if len(text) <= 80 else text[:80] + "..."


def _fail(where: str, what: str) -> NoReturn:
    raise SnapshotError(f"{where}: {what}")


def _is_int(value: object) -> bool:
    return type(value) is int


def _check_manifest(manifest: object, where: str) -> tuple[int, float, Layout, Chain]:
    """Depth, elapsed seconds, layout and chain of a manifest, every field checked."""
    keys = {"format", "run", "depth", "elapsed", "chain", "partitions"}
    if not isinstance(manifest, dict) or "format" not in manifest:
        _fail(where, f"not a checkpoint manifest (expected exactly the keys {', '.join(sorted(keys))})")
    if manifest["format"] != FORMAT:  # (before the keys: an older format has others)
        _fail(where, f"checkpoint format {shown(manifest['format'])}, this version reads {FORMAT}")
    if set(manifest) != keys:
        _fail(where, f"not a checkpoint manifest (expected exactly the keys {', '.join(sorted(keys))})")
    if not isinstance(manifest["run"], dict):
        _fail(where, "'run' must be a table")
    depth = manifest["depth"]
    if not _is_int(depth) or depth < 1:
        _fail(where, f"'depth' must be a positive integer, not {shown(depth)}")
    elapsed = manifest["elapsed"]
    if type(elapsed) not in (int, float) or not math.isfinite(elapsed) or elapsed < 0:
        _fail(where, f"'elapsed' must be a number of seconds, not {shown(elapsed)}")
    depths = _checked_depths(manifest["chain"], depth, where)
    partitions = manifest["partitions"]
    if not isinstance(partitions, list) or not partitions:
        _fail(where, "'partitions' must be a non-empty list")
    starts_of, sizes, pieces_of = [], [], []
    for index, entry in enumerate(partitions):
        what = f"partitions[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"states", "level_starts", "pieces"}:
            _fail(where, f"{what} must hold 'states', 'level_starts' and 'pieces'")
        size, starts = entry["states"], entry["level_starts"]
        if not _is_int(size) or size < 0:
            _fail(where, f"{what}: 'states' must be a count, not {shown(size)}")
        if not isinstance(starts, list) or len(starts) != depth or not all(map(_is_int, starts)):
            _fail(where, f"{what}: 'level_starts' must be {depth} integers (one per level)")
        if starts[0] != 0 or any(a > b for a, b in zip(starts, [*starts[1:], size])):
            _fail(where, f"{what}: 'level_starts' must rise from 0 to at most 'states'")
        starts_of.append(tuple(starts))
        sizes.append(size)
        pieces_of.append(_checked_pieces(entry["pieces"], len(depths), f"{what}: 'pieces'", where))
    if sum(sizes) == 0:
        _fail(where, "no states at all")
    return depth, float(elapsed), Layout(tuple(starts_of), tuple(sizes)), Chain(depths, tuple(pieces_of))


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _checked_depths(depths: object, depth: int, where: str) -> tuple[int, ...]:
    """The depths of the chain's snapshots: rising, at most `MAX_CHAIN`, the last `depth`."""
    if (
        type(depths) is not list
        or not 1 <= len(depths) <= MAX_CHAIN
        or not all(map(_is_int, depths))
        or depths[-1] != depth
        or any(a >= b for a, b in zip([0, *depths], depths))
    ):
        _fail(where, f"'chain' must be 1 to {MAX_CHAIN} rising depths, the last {depth}")
    return tuple(depths)


def _checked_pieces(pieces: object, count: int, what: str, where: str) -> tuple[Piece, ...]:
    """A partition's pieces: one a snapshot of the chain, each a length and a SHA-256."""
    if type(pieces) is not list or len(pieces) != count:
        _fail(where, f"{what} must list {count} pieces, one a snapshot of the chain")
    checked = []
    for piece in pieces:
        if (
            not isinstance(piece, dict)
            or set(piece) != {"bytes", "sha256"}
            or not _is_int(piece["bytes"])
            or not persisted.HEADER.size <= piece["bytes"] <= MAX_COUNT
            or type(piece["sha256"]) is not str
            or not _SHA256.fullmatch(piece["sha256"])
        ):
            _fail(where, f"{what}: each must hold 'bytes' (a length) and 'sha256' (64 hex digits)")
        checked.append(Piece(piece["bytes"], piece["sha256"]))
    return tuple(checked)


# --- one partition's record -----------------------------------------------------------------

RECORD_KEYS = frozenset(
    {
        "partition",
        "partitions",
        "tables",
        "keys",
        "fingerprints",
        "parents",
        "goal_flags",
        "edge_sources",
        "edge_targets",
        "first_bad",
        "level_starts",
        "generated",
        "carry",
        "sent",
        "translations",
        "forwarded",
        "since",
    }
)


# How every partition file's values start: a table of the record's fields (`persisted`'s dict).
_RECORD_START = persisted.DICT + len(RECORD_KEYS).to_bytes(8, "little")

# Settled edges read back at a time while a checkpoint file is written: 4 MB a column.
SAVED_PIECE = 1 << 20


def partition_record(partition, since: Marks = BASE) -> tuple[dict, Marks]:
    """Everything `partition` knows, except the model, as plain values for `persisted`, past
    `since` (`increments`: BASE, the default, for all of it); and the marks the next piece
    continues from.

    The store's ids are the keys' positions (ids are dense, in admission order), so only the
    keys are saved, or with a fingerprint store the fingerprints; an interning codec saves its
    tables' values (their ids are positions too). Waiting candidates are saved column by column
    (keys, parents, repeated edges).
    """
    tables = getattr(partition.codec, "tables", None)
    size, level_starts = partition.stored_levels()
    start = since.states
    carry = [(candidates, repeats) for candidates, repeats, _tables in partition.carry]
    edge_sources, edge_targets = partition.edge_sources, partition.edge_targets
    kept_edges = None if edge_sources is None else len(edge_sources)  # (recent ones) kept for good
    if partition.exact:
        keys, fingerprints = list(islice(partition.store.ids, start, size)), None
    else:
        store = partition.store
        keys = []
        fingerprints = {
            "values": store.stored()[start:size],  # (a view: written as it is, read as an array("Q"))
            "hashed": store.hashed,
            "lookups": store.lookups - (len(store) - size),  # (counted again when re-stored)
        }
        if len(store) > size:  # stored already, saved as the first waiting candidates
            ahead, edge_sources, edge_targets, kept_edges = _ahead_as_candidates(partition, size)
            carry.insert(0, ahead)
    settled = len(partition.settled_edges)
    if edge_sources is not None:
        edge_sources, edge_targets = _edges_past(
            partition.settled_edges, edge_sources, edge_targets, since.edges
        )
    record = {
        "partition": partition.index,
        "partitions": partition.count,
        "tables": None
        if tables is None
        else [table.values[since.table_mark(number) :] for number, table in enumerate(tables)],
        "keys": keys,
        "fingerprints": fingerprints,
        "parents": partition.store.parents[start:size],
        "goal_flags": [flags[start:size] for flags in partition.goal_flags],  # (the expanded states')
        "edge_sources": edge_sources,
        "edge_targets": edge_targets,
        "first_bad": partition.first_bad,
        "level_starts": level_starts,
        "generated": partition.generated,
        "carry": _carry_columns(carry),
        "sent": partition.sent,
        "translations": partition.translations,
        "forwarded": (list(partition.forwarded), list(partition.forwarded.values())),
        "since": since.as_record(),
    }
    table_marks = () if tables is None else tuple(len(table.values) for table in tables)
    edges = 0 if kept_edges is None else settled + kept_edges
    return record, Marks(len(level_starts), size, edges, table_marks)


def _carry_columns(carry: list) -> list[tuple[list, list, list, list]]:
    """Waiting candidates column by column: (keys, parents, repeated positions, their parents)."""
    return [
        (
            [key for key, _ in candidates],
            [parent for _, parent in candidates],
            [position for position, _ in repeats],
            [parent for _, parent in repeats],
        )
        for candidates, repeats in carry
    ]


def _edges_past(settled, sources, targets, start: int):
    """The edges to save, from the `start`th on: the settled ones, read back from disk while
    the file is written (never gathered in memory), then the recent ones (`sources`,
    `targets`: arrays or numpy columns). Settled edges are all into states stored before the
    level being filled, so none of them is into a state saved as a waiting candidate
    (`settled_edges`)."""
    count = len(settled)
    if start >= count:  # none of the settled ones: the recent ones, as they are or sliced
        if start == count:
            return sources, targets
        return int32_view(sources)[start - count :], int32_view(targets)[start - count :]

    def column(which: int, recent) -> persisted.ArrayPieces:
        recent = recent if isinstance(recent, np.ndarray) else int32_view(recent)
        pieces = lambda: chain(settled.column(which, SAVED_PIECE, start), [recent])
        return persisted.ArrayPieces("i", count - start + len(recent), pieces)

    return column(0, sources), column(1, targets)


def _ahead_as_candidates(partition, size: int):
    """The next level's states a fingerprint store holds already (ids from `size` on), as the
    batch of candidates an exact store would hold instead: each with its parent, and every
    other edge into it (kept with reachability properties) as a repeat. Returns that batch,
    the edges into states below `size`, and how many of the latter come before the first edge
    left out (those stay where they are in every later snapshot: `increments`)."""
    parents = partition.store.parents
    candidates = [(key, parents[size + offset]) for offset, key in enumerate(partition.ahead_keys())]
    sources, targets = partition.edge_sources, partition.edge_targets
    if sources is None:
        return (candidates, []), None, None, None
    source_ids, target_ids = int32_view(sources), int32_view(targets)
    into_ahead = target_ids >= size
    repeats = [
        (target - size, source)
        for source, target in zip(source_ids[into_ahead].tolist(), target_ids[into_ahead].tolist())
        if source != parents[target]
    ]
    kept = ~into_ahead
    first_left_out = int(np.argmax(into_ahead)) if into_ahead.any() else len(into_ahead)
    # numpy columns: `persisted` writes them as it writes an array("i"), and they read back as one
    return (candidates, repeats), source_ids[kept], target_ids[kept], first_left_out


class _Check:
    """Checks of one partition file's values; each failure names the file and the field."""

    def __init__(self, where: str, partition, layout: Layout) -> None:
        self.where = where
        self.index, self.count = partition.index, partition.count
        self.layout = layout
        self.depth = len(layout.level_starts[0])

    def fail(self, what: str) -> NoReturn:
        _fail(self.where, what)

    def typed(self, value: object, kind: type[_T], name: str) -> _T:
        if type(value) is not kind:
            self.fail(f"{name} must be a {kind.__name__}, not {type(value).__name__}")
        return cast(_T, value)

    def ints(self, values, name: str, low: int, high: int) -> None:
        """Every value an int in [low, high)."""
        typed = type(values) is array or set(map(type, values)) <= {int}  # an array holds ints
        if values and (not typed or min(values) < low or max(values) >= high):
            self.fail(f"{name} must be integers from {low} to {high - 1}")

    def array(self, value, typecode: str, name: str):
        if type(value) is not array or value.typecode != typecode:
            self.fail(f"{name} must be an array of typecode {typecode!r}")
        return value

    def gids(self, gids, name: str, level: int | None) -> None:
        """Every gid names a state of `level` (any explored level if None) of its partition."""
        count = self.count
        if level is None:
            ranges = [(0, size) for size in self.layout.sizes]
        else:
            ranges = [self.layout.level(p, level) for p in range(count)]
        if count == 1:
            self.ints(gids, name, *ranges[0])
            return
        for gid in gids:
            if type(gid) is not int or gid < 0:
                self.fail(f"{name} holds {shown(gid)}, not a state id")
            low, high = ranges[gid % count]
            if not low <= gid // count < high:
                self.fail(f"{name} holds state id {shown(gid)}, not a state of level {level} or before")


def restore_partition(partition, record: object, where: str, layout: Layout) -> None:
    """Give `partition` the state `record` holds, after checking it fits the model, this
    partition and `layout`; SnapshotError (naming `where`) if anything does not."""
    check = _Check(where, partition, layout)
    if not isinstance(record, dict) or set(record) != RECORD_KEYS:
        check.fail("not a partition's snapshot (unexpected fields)")
    index, count = partition.index, partition.count
    if record["partition"] != index or record["partitions"] != count:
        check.fail(
            f"holds partition {shown(record['partition'])} of {shown(record['partitions'])}, "
            f"expected {index} of {count}"
        )
    if record["level_starts"] != list(layout.level_starts[index]):
        check.fail("its levels do not match the manifest's")
    stored = _checked_store(check, partition, record)
    tables = _checked_tables(check, partition, record["tables"])
    goal_flags, edges = _checked_goals(check, partition, record)
    first_bad = _checked_first_bad(check, partition, record["first_bad"])
    generated = record["generated"]
    if not _is_int(generated) or not 0 <= generated <= MAX_COUNT:
        check.fail(f"generated must be a count, not {shown(generated)}")
    sent, translations = _checked_marks(check, partition, record, tables)
    # Accepted so far: take the tables (in place, as the codec holds them), then the
    # candidates, which are checked against those tables.
    if tables is not None:
        _take_tables(check, partition.codec.tables, tables)
    carry = _restored_carry(check, partition, record["carry"], check.depth)
    forwarded = _checked_forwarded(check, record["forwarded"], count)
    if partition.exact:
        _check_violations_hold(check, partition, first_bad, record["keys"])  # (decoding needs the tables)
    _install_store(partition, stored)
    partition.goal_flags = goal_flags
    partition.edge_sources, partition.edge_targets = edges
    partition.settled_edges.close()  # (all in memory now, settled again from the next level)
    partition.edges_before_last_level = 0
    partition.first_bad = first_bad
    partition.level_starts = list(layout.level_starts[index])
    if not partition.exact:  # the level being filled starts after the stored ones
        partition.level_starts.append(len(partition.store))
    partition.generated = generated
    partition.carry = carry
    partition.forwarded = forwarded
    partition.sent = sent
    if partition.wire:
        partition.translations = translations


@attrs.frozen
class _Stored:
    """A partition's visited states as checked: their ids by key (`--exact`) or their
    fingerprints (with whether any was a hash and how many lookups ran), and their parents."""

    parents: array
    ids: dict | None = None
    fingerprints: object = None
    hashed: bool = False
    lookups: int = 0


def _checked_store(check: _Check, partition, record: dict) -> _Stored:
    """The visited states `record` holds: as many as the manifest says, each once, each with a
    parent of the level before (none for an initial state)."""
    index, size = partition.index, check.layout.sizes[partition.index]
    keys = check.typed(record["keys"], list, "keys")
    ids, fingerprints, hashed, lookups = None, None, False, 0
    if partition.exact:
        if record["fingerprints"] is not None:
            check.fail("holds fingerprints: the run it saves was not --exact, this one is")
        if len(keys) != size:
            check.fail(f"holds {len(keys):,} states, the manifest says {size:,}")
        try:
            ids = dict(zip(keys, range(size)))
        except TypeError:
            check.fail("keys must be hashable")
        if len(ids) != size:
            check.fail("the same state is stored twice")
    else:
        fingerprints, hashed, lookups = _checked_fingerprints(check, record["fingerprints"], keys, size)
    parents = check.array(record["parents"], "q", "parents")
    if len(parents) != size:
        check.fail(f"holds {len(parents):,} parents for {size:,} states")
    for level in range(1, check.depth + 1):
        start, end = check.layout.level(index, level)
        if level == 1:
            if start < end and (min(parents[start:end]) != -1 or max(parents[start:end]) != -1):
                check.fail("an initial state has a parent")
        else:
            check.gids(parents[start:end], f"parents of level {level}", level - 1)
    return _Stored(parents, ids, fingerprints, hashed, lookups)


def _install_store(partition, stored: _Stored) -> None:
    if partition.exact:
        partition.store.parents = stored.parents
        partition.store.fill(stored.ids)  # (the store's parents first: its ids are positions)
    else:  # (a fingerprint names no state: the search checks each trace it rebuilds instead)
        partition.store.fill(stored.fingerprints, stored.parents)
        partition.store.hashed, partition.store.lookups = stored.hashed, stored.lookups
        partition.ahead = Frontier()


def _checked_tables(check: _Check, partition, saved_tables: object) -> list | None:
    """The codec's tables as saved: None exactly when the model's codec keeps none."""
    tables = getattr(partition.codec, "tables", None)
    if tables is None:
        if saved_tables is not None:
            check.fail("holds codec tables, but the model's codec keeps none")
        return None
    saved = check.typed(saved_tables, list, "tables")
    if len(saved) != len(tables) or not all(type(v) is list for v in saved):
        check.fail(f"tables must be {len(tables)} lists of values")
    return saved


def _take_tables(check: _Check, tables, saved_tables: list) -> None:
    """The codec's tables replaced, in place, by the saved ones."""
    for table, values in zip(tables, saved_tables):
        try:
            table.ids.clear()
            table.ids.update(zip(values, range(len(values))))
        except TypeError:
            check.fail("table values must be hashable")
        if len(table.ids) != len(values):
            check.fail("a codec table holds the same value twice")
        table.values[:] = values
        table.by_identity.clear()
        table.by_identity.update((id(value), number) for number, value in enumerate(values))


def _checked_goals(check: _Check, partition, record: dict) -> tuple[list, tuple]:
    """(goal flags, (edge sources, edge targets)): a 0/1 flag a state for each reachability
    goal, and the edges into this partition's states when the model has a goal."""
    size = check.layout.sizes[partition.index]
    goal_flags = check.typed(record["goal_flags"], list, "goal_flags")
    if len(goal_flags) != len(partition.goals) or any(
        type(flags) is not bytearray or len(flags) != size or flags.translate(None, b"\0\1")
        for flags in goal_flags
    ):
        check.fail(f"goal_flags must be {len(partition.goals)} lists of 0/1 flags, one a state")
    sources, targets = record["edge_sources"], record["edge_targets"]
    if partition.goals:
        check.array(sources, "i", "edge_sources")
        check.array(targets, "i", "edge_targets")
        if len(sources) != len(targets):
            check.fail("edge_sources and edge_targets differ in length")
        check.ints(targets, "edge_targets", 0, size)
        check.gids(sources, "edge_sources", None)
        return goal_flags, (sources, targets)
    if sources is not None or targets is not None:
        check.fail("holds edges, but the model has no reachability property")
    return goal_flags, (None, None)


def _checked_first_bad(check: _Check, partition, saved: object) -> dict:
    """Where each property first failed: a state of this partition, or a successor outside
    the constraints named by its parent."""
    first_bad = check.typed(saved, dict, "first_bad")
    known = {invariant.name for invariant in partition.invariants} | {DEADLOCK}
    depth, count, index = check.depth, partition.count, partition.index
    for name, found in first_bad.items():
        # (level, gid, -1): a state of this partition; (level, parent gid, position): a
        # successor outside the constraints, named by its parent (-1: an initial state).
        if name not in known:
            check.fail(f"first_bad names {shown(name)}, not a property of this model")
        if type(found) is not tuple or len(found) != 3 or not all(map(_is_int, found)):
            check.fail(f"first_bad[{shown(name)}] must be (level, state id, position)")
        level, gid, position = found
        if not 1 <= level <= depth + 1 or position < -1:
            check.fail(f"first_bad[{shown(name)}] names no state")
        if position == -1:
            if level > depth or gid < 0 or gid % count != index:
                check.fail(f"first_bad[{shown(name)}] is not a state of this partition")
            check.gids([gid], f"first_bad[{shown(name)}]", level)
        elif level == 1:
            if gid != -1:
                check.fail(f"first_bad[{shown(name)}]: an initial state has no parent")
        else:
            check.gids([gid], f"first_bad[{shown(name)}]", level - 1)
    return first_bad


def _checked_marks(check: _Check, partition, record: dict, saved_tables: list | None):
    """(sent, translations): how far each other partition has been sent each codec table,
    and the ids it gave them (a wire codec's), each within the saved tables."""
    count = partition.count
    sent, translations = record["sent"], record["translations"]
    if type(sent) is not list or len(sent) != count:
        check.fail(f"sent must be a list of {count} marks")
    if not partition.wire:
        if any(mark is not None for mark in sent) or translations is not None:
            check.fail("holds wire-codec marks, but the model's codec is not a wire codec")
        return sent, translations
    assert saved_tables is not None  # a wire codec keeps tables (see `codec`)
    for mark in sent:
        if mark is not None and (
            type(mark) is not tuple
            or len(mark) != len(saved_tables)
            or any(type(m) is not int or not 0 <= m <= len(v) for m, v in zip(mark, saved_tables))
        ):
            check.fail("sent holds a mark beyond the tables")
    if type(translations) is not list or len(translations) != count:
        check.fail(f"translations must be a list of {count}")
    for translation in translations:
        if type(translation) is not list or len(translation) != len(saved_tables):
            check.fail(f"a translation must be {len(saved_tables)} lists of ids")
        for ids_of, values in zip(translation, saved_tables):
            check.typed(ids_of, list, "a translation")
            check.ints(ids_of, "a translation", 0, len(values))
    return sent, translations


def _checked_forwarded(check: _Check, forwarded: object, count: int) -> dict:
    """Keys this partition forwarded to their owners, by key."""
    if (
        type(forwarded) is not tuple
        or len(forwarded) != 2
        or not all(type(column) is list for column in forwarded)
        or len(forwarded[0]) != len(forwarded[1])
    ):
        check.fail("forwarded must be (keys, owners) lists of one length")
    check.ints(forwarded[1], "forwarded owners", 0, count)
    try:
        return dict(zip(*forwarded))
    except TypeError:
        check.fail("forwarded keys must be hashable")


def _checked_fingerprints(check: _Check, saved: object, keys: list, size: int):
    """A fingerprint store's saved values: `size` distinct 64-bit fingerprints, whether any
    was a hash, and how many were looked up (for the collision estimate)."""
    if saved is None or keys:
        check.fail("holds whole keys: the run it saves was --exact, this one is not")
    if not isinstance(saved, dict) or set(saved) != {"values", "hashed", "lookups"}:
        check.fail("fingerprints must hold 'values', 'hashed' and 'lookups'")
    values = check.array(saved["values"], "Q", "fingerprints")
    if len(values) != size:
        check.fail(f"holds {len(values):,} fingerprints, the manifest says {size:,}")
    fingerprints = np.frombuffer(values, dtype=np.uint64).copy()
    if len(np.unique(fingerprints)) != size:
        check.fail("the same state is stored twice")
    hashed, lookups = saved["hashed"], saved["lookups"]
    if type(hashed) is not bool or not _is_int(lookups) or not size <= lookups <= MAX_COUNT:
        check.fail("fingerprints: 'hashed' must be true or false, 'lookups' a count of at least the states")
    return fingerprints, hashed, lookups


def _check_violations_hold(check: _Check, partition, first_bad: dict, keys: list) -> None:
    """Every recorded violation of an invariant at a state of this partition is one: the
    state it names fails that invariant. A checksum shows a file is intact, not that its
    values are possible; without this, a crafted file could name any state of the right level
    and have its trace reported as a counterexample."""
    invariants = {invariant.name: invariant for invariant in partition.invariants}
    for name, (_level, gid, position) in first_bad.items():
        if position != -1 or name not in invariants:
            continue  # a successor named by its parent, or a deadlock: checked when rebuilt
        key = keys[gid // partition.count]
        try:
            # as `Keys.store_key` keyed it: the state itself, or its key in our codec
            state = key if partition.whole or not partition.decode else partition.decode(key)
        except Exception:  # a key the model's codec cannot read: the file is not this run's
            check.fail(f"first_bad[{shown(name)}] names a state the model's codec cannot decode")
        if invariants[name].holds(state):
            check.fail(f"first_bad[{shown(name)}] names a state on which {name} holds")


def _restored_carry(check: _Check, partition, saved: object, depth: int) -> list:
    """The waiting candidates as batches, each key checked against the codec (a key must
    decode to a state that encodes back to it) and each parent a state of the last level."""
    saved = check.typed(saved, list, "carry")
    encode, decode = partition.encode, partition.decode
    carry = []
    for batch in saved:
        if type(batch) is not tuple or len(batch) != 4 or not all(type(c) is list for c in batch):
            check.fail("carry must hold (keys, parents, positions, parents) lists")
        keys, parents, positions, repeat_parents = batch
        if len(parents) != len(keys) or len(repeat_parents) != len(positions):
            check.fail("carry: columns of different lengths")
        check.gids(parents, "carry parents", depth)
        check.gids(repeat_parents, "carry parents", depth)
        check.ints(positions, "carry positions", 0, len(keys))
        if partition.whole:  # (the keys are states, of any plain kind: they need only hash)
            try:
                set(keys)
            except TypeError:
                check.fail("carry holds a state that is not hashable")
        elif decode is not None:
            for key in keys:
                try:
                    same = encode(decode(key)) == key
                except Exception:
                    same = False
                if not same:
                    check.fail(f"carry holds a key the codec cannot read: {str(key)[:40]}")
        carry.append((list(zip(keys, parents)), list(zip(positions, repeat_parents)), None))
    return carry
