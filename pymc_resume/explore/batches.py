"""Batches of candidate states as bytes between processes.

A batch is (candidates, repeats, tables): distinct (state key, parent gid) pairs, repeated edges
as (index into the candidates, parent gid), and a wire codec's new table entries (or None,
pickled). Keys that are all non-negative ints below 2**64
(packed states) travel as raw `array`s, a memory copy each way; other keys are pickled with
protocol 5, in C. Repeats are always two raw arrays.
"""

from __future__ import annotations

import pickle
import struct
from array import array

RAW, PICKLED = b"R", b"P"
HEADER = struct.Struct("<cQQ")  # kind, bytes of the candidates part, number of repeats


def _pack_candidates(candidates: list[tuple]) -> tuple[bytes, bytes]:
    if candidates:
        try:
            keys = array("Q", [key for key, _ in candidates])
            parents = array("q", [parent for _, parent in candidates])
        except (TypeError, OverflowError):
            pass
        else:
            return RAW, keys.tobytes() + parents.tobytes()
    return PICKLED, pickle.dumps(candidates, 5)


def pack(batch: tuple[list, list, object]) -> bytes:
    candidates, repeats, tables = batch
    kind, body = _pack_candidates(candidates)
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
    if kind == PICKLED:
        candidates = pickle.loads(body)
    else:
        keys, parents = array("Q"), array("q")
        keys.frombytes(body[: size // 2])
        parents.frombytes(body[size // 2 :])
        candidates = list(zip(keys, parents))
    positions, parents = array("q"), array("q")
    positions.frombytes(rest[: 8 * repeat_count])
    parents.frombytes(rest[8 * repeat_count : 16 * repeat_count])
    return candidates, list(zip(positions, parents)), pickle.loads(rest[16 * repeat_count :])
