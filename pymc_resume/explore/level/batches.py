"""Batches of candidate states as bytes between processes.

A batch is (candidates, repeats, tables): distinct (state key, parent gid) pairs, repeated edges
as (index into the candidates, parent gid), and a wire codec's new table entries (or None,
pickled). Keys that are all non-negative ints below 2**64
(packed states) travel as raw `array`s, a memory copy each way; other keys are pickled with
protocol 5, in C. Repeats are always two raw arrays.

A batch of packed keys may also hold its candidates as `Columns` (two numpy arrays) instead of a
list of pairs: 16 bytes a candidate where a list of pairs of Python ints takes about 130, which is
what a wide level sent to another worker costs (TwoPhase N=10 sends millions a level). Keys of
any other kind (the reference semantics' wide ints, tuples) may travel as `KeyColumns`: a list
of keys, pickled, and an array of parents.
"""

from __future__ import annotations

import pickle
import struct
from array import array
from collections.abc import Hashable

import attrs
import numpy as np

RAW, PICKLED, KEYED = b"R", b"P", b"K"
HEADER = struct.Struct("<cQQ")  # kind, bytes of the candidates part, number of repeats
COUNT = struct.Struct("<Q")  # candidates in a `KeyColumns` part


@attrs.frozen
class Columns:
    """Candidates as columns: keys (uint64, packed states) and their parents' gids (int64).
    Iterating gives (key, parent) pairs of Python ints, as a list of candidates would."""

    keys: np.ndarray
    parents: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self):
        return zip(self.keys.tolist(), self.parents.tolist())


@attrs.frozen
class KeyColumns:
    """Candidates as a list of keys of any kind and an array of their parents' gids (int64):
    a list of pairs would cost a tuple and an int object more a candidate. Iterating gives
    (key, parent) pairs, as a list of candidates would."""

    keys: list
    parents: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self):
        return zip(self.keys, self.parents.tolist())


@attrs.frozen
class Repeats:
    """A batch's repeated edges as columns: positions into its candidates and the parents' gids
    (`array('q')` each, 16 bytes an edge where a list of pairs takes about 70). Iterating gives
    (position, parent) pairs, as a list of pairs would."""

    positions: array
    parents: array

    def __len__(self) -> int:
        return len(self.positions)

    def __iter__(self):
        return zip(self.positions, self.parents)


def no_repeats() -> Repeats:
    return Repeats(array("q"), array("q"))


Candidate = tuple[Hashable, int]  # (state key, parent global id)
# A batch for one partition: distinct candidates, plus the repeated edges into them as
# (index into the candidates, parent gid), so each state travels once per level, plus, where
# the keys are a wire codec's, (sender index, the sender's new table entries) or None. Packed
# keys bound for another partition travel as `Columns` (two arrays) instead of a list, and
# repeated edges always as `Repeats` (two arrays).
Batch = tuple[list[Candidate] | Columns, list[tuple[int, int]] | Repeats, tuple[int, object] | None]


def empty_batch() -> Batch:
    return [], [], None


def joined_columns(pieces: list[tuple[np.ndarray, np.ndarray]]) -> Columns:
    """One `Columns` from chunks of (keys, parents) arrays."""
    return Columns(
        np.concatenate([keys for keys, _ in pieces]), np.concatenate([parents for _, parents in pieces])
    )


def _pack_candidates(candidates) -> tuple[bytes, bytes]:
    if type(candidates) is Columns:
        return RAW, candidates.keys.tobytes() + candidates.parents.tobytes()  # (uint64, int64)
    if type(candidates) is KeyColumns:  # how many, the parents (int64), the pickled keys
        gids = candidates.parents.astype(np.int64, copy=False)
        return KEYED, COUNT.pack(len(gids)) + gids.tobytes() + pickle.dumps(candidates.keys, 5)
    if candidates:
        try:
            keys = array("Q", [key for key, _ in candidates])
            parents = array("q", [parent for _, parent in candidates])
        except (TypeError, OverflowError):
            pass
        else:
            return RAW, keys.tobytes() + parents.tobytes()
    return PICKLED, pickle.dumps(candidates, 5)


def pack(batch: tuple) -> bytes:
    candidates, repeats, tables = batch
    kind, body = _pack_candidates(candidates)
    if type(repeats) is Repeats:
        positions, parents = repeats.positions, repeats.parents
    else:
        positions = array("q", [position for position, _ in repeats])
        parents = array("q", [parent for _, parent in repeats])
    return (
        HEADER.pack(kind, len(body), len(repeats))
        + body
        + positions.tobytes()
        + parents.tobytes()
        + pickle.dumps(tables, 5)
    )


def unpack(data: bytes) -> tuple:
    kind, size, repeat_count = HEADER.unpack_from(data)
    view = memoryview(data)[HEADER.size :]
    body, rest = view[:size], view[size:]
    tables = pickle.loads(rest[16 * repeat_count :])
    if kind == PICKLED:
        candidates = pickle.loads(body)
    elif kind == KEYED:  # (the parents copied: the chunk's bytes are not kept for them)
        (count,) = COUNT.unpack_from(body)
        end = COUNT.size + 8 * count
        candidates = KeyColumns(
            pickle.loads(body[end:]), np.frombuffer(body[COUNT.size : end], np.int64).copy()
        )
    elif tables is None:  # packed keys as they came: numpy reads the bytes in place
        half = size // 2
        candidates = Columns(np.frombuffer(body[:half], np.uint64), np.frombuffer(body[half:], np.int64))
    else:  # (a wire codec translates its keys one by one: a list)
        keys, parents = array("Q"), array("q")
        keys.frombytes(body[: size // 2])
        parents.frombytes(body[size // 2 :])
        candidates = list(zip(keys, parents))
    positions, parents = array("q"), array("q")
    positions.frombytes(rest[: 8 * repeat_count])
    parents.frombytes(rest[8 * repeat_count : 16 * repeat_count])
    return candidates, Repeats(positions, parents), tables


def unpack_all(chunks: list[bytes]) -> list[tuple]:
    """Every chunk's batch (`unpack`), letting go of each chunk's bytes once it is read: the
    list is emptied, so a level's batches are not held twice, as bytes and as batches."""
    batches = []
    for position, chunk in enumerate(chunks):
        chunks[position] = b""
        batches.append(unpack(chunk))
        del chunk
    chunks.clear()
    return batches
