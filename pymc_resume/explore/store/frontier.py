"""The keys of the level being filled, in memory up to a bound and on disk beyond it.

With fingerprints, the visited set costs 8 bytes a state, and what is left in memory is the
frontier: the keys of the states admitted for the next level, as TLC keeps its queue of states
on disk. A `Frontier` holds up to `in_memory` keys as a list; past that it writes them, a chunk
at a time, to an anonymous temporary file (unlinked at once, so the kernel frees it when the
process ends, even one killed with SIGKILL: nothing is left behind) in the `persisted` format
(data, never pickle; a plain codec's keys, tuples of ints, as int64 tables), and reads them
back, a piece at a time, when the level is expanded.

Keys that are ints below 2**64 (packed states) never come here: while every fingerprint is its
key, the fingerprint store itself holds the frontier (`admission.StoredKeys`).
"""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Hashable, Iterable, Iterator
from itertools import chain
from typing import IO

import numpy as np

from pymc_resume.explore.store import persisted

# Keys a partition keeps in memory before it spills the frontier to disk: a plain codec's key
# is a tuple of a few ints, about 100 bytes with its list slot, so about 25 MB. Reading the
# frontier back costs about what keeping it does (`bench/explore.py --stores
# fingerprints,unspilled`).
IN_MEMORY = 1 << 18
# Keys written at a time: the writing's temporaries (a piece's bytes, and with `persisted` its
# parts) stay a few MB whatever the bound.
PIECE = 1 << 14
_HEADER = struct.Struct("<cQQ")  # kind, and rows and columns (an int table) or byte length
_INT_TABLE, _PERSISTED = b"t", b"p"


def _write_piece(file: IO[bytes], keys: list[Hashable]) -> None:
    """Keys that are tuples of ints of one length (a plain codec's) go as one int64 table;
    others in the `persisted` format."""
    table = None
    # Only plain tuples of plain ints: numpy would take a float or a bool for an int silently.
    if all(type(key) is tuple for key in keys) and set(map(type, chain.from_iterable(keys))) == {int}:  # type: ignore[arg-type]
        try:
            table = np.array(keys, dtype=np.int64)
        except (ValueError, OverflowError):  # ragged, or an int beyond 64 bits
            table = None
    if table is not None and table.ndim == 2 and table.dtype == np.int64:
        file.write(_HEADER.pack(_INT_TABLE, *table.shape))
        file.write(table.tobytes())
    else:
        data = persisted.dumps(keys)
        file.write(_HEADER.pack(_PERSISTED, len(data), 0))
        file.write(data)


def _read_piece(file: IO[bytes]) -> list:
    kind, first, second = _HEADER.unpack(file.read(_HEADER.size))
    if kind == _INT_TABLE:
        table = np.frombuffer(file.read(first * second * 8), dtype=np.int64).reshape(first, second)
        return list(map(tuple, table.tolist()))
    return persisted.loads(file.read(first), "the frontier's spill file")  # type: ignore[return-value]


class Frontier:
    """An append-only sequence of keys: a list, then chunks on disk (`IN_MEMORY`)."""

    __slots__ = ("in_memory", "keys", "file", "spilled", "first")

    def __init__(self, keys: Iterable[Hashable] = (), in_memory: int | None = None) -> None:
        self.in_memory = IN_MEMORY if in_memory is None else in_memory
        self.keys: list[Hashable] = []
        self.file: IO[bytes] | None = None  # the spill file, made at the first spill
        self.spilled = 0  # keys written to it
        self.first: Hashable = None  # (`tuple_mapper` looks at the first key's shape)
        self.extend(keys)

    def __len__(self) -> int:
        return self.spilled + len(self.keys)

    def extend(self, keys: Iterable[Hashable]) -> None:
        was_empty = not len(self)
        self.keys.extend(keys)
        if was_empty and self.keys:
            self.first = self.keys[0]
        if len(self.keys) >= self.in_memory:
            self._spill()

    def _spill(self) -> None:
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="pymc-resume-frontier-")
        for start in range(0, len(self.keys), PIECE):
            _write_piece(self.file, self.keys[start : start + PIECE])
        self.spilled += len(self.keys)
        self.keys = []

    def __getitem__(self, index: int) -> Hashable:
        if index != 0 or not len(self):
            raise IndexError("a frontier is read in order; only its first key is at hand")
        return self.first

    def __iter__(self) -> Iterator[Hashable]:
        """Every key in order: the spilled pieces, read back one at a time, then the rest."""
        if self.file is not None:
            self.file.flush()
            self.file.seek(0)
            read = 0
            while read < self.spilled:
                piece = _read_piece(self.file)
                read += len(piece)
                yield from piece
            self.file.seek(0, 2)  # (back to the end, for more keys)
        yield from self.keys

    def close(self) -> None:
        """Free the spill file now (the kernel frees it anyway when the process ends)."""
        if self.file is not None:
            self.file.close()
            self.file = None
