"""A run's chain of snapshots: the base (every partition written whole) and the increments
after it (each partition's piece holds only what is new, `increments`), as the coordinator
tracks them and as a manifest names them: each snapshot's depth, and each piece's length and
SHA-256.

When to start a new chain (compact): when the chain has `MAX_INCREMENTS` increments, or when
its increments together take as many bytes as its base. A recovery reads the whole chain, so
this keeps it within about twice the base's bytes and a bounded number of files; and since a
base is written only once the increments have written as much again, the bytes written per
snapshot stay, on average, about twice an increment's, however large the store grows.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

MAX_INCREMENTS = 16  # increments after a base before the next snapshot is a base again
OUTWEIGH = 1.0  # the increments' bytes, as a share of the base's, at which the next is a base
MAX_CHAIN = 1 + MAX_INCREMENTS  # pieces a manifest may name for a partition


@attrs.frozen
class Piece:
    """One partition's file of one snapshot, as the manifest records it: its length in bytes
    (header included) and its body's SHA-256 in hex (the digest its header holds)."""

    length: int
    sha256: str

    def as_record(self) -> dict:
        return {"bytes": self.length, "sha256": self.sha256}


@attrs.frozen
class Written:
    """What writing a snapshot's pieces gave: each partition's states and the start of each of
    its levels, and its piece."""

    sizes: tuple[int, ...]
    level_starts: tuple[tuple[int, ...], ...]
    pieces: tuple[Piece, ...]


@attrs.frozen
class Chain:
    """The depths of a chain's snapshots (its base first) and, per partition, its pieces (one
    a snapshot). The empty chain: no snapshot yet in this run, the next one is a base."""

    depths: tuple[int, ...] = ()
    pieces: tuple[tuple[Piece, ...], ...] = ()

    def next_is_base(self) -> bool:
        """Whether the next snapshot starts a new chain (see the module's docstring)."""
        if not self.depths:
            return True
        return len(self.depths) > MAX_INCREMENTS or self.increment_bytes() >= OUTWEIGH * self.base_bytes()

    def base_bytes(self) -> int:
        return sum(pieces[0].length for pieces in self.pieces)

    def increment_bytes(self) -> int:
        return sum(piece.length for pieces in self.pieces for piece in pieces[1:])

    def extended(self, depth: int, pieces: Sequence[Piece], base: bool) -> Chain:
        """This chain with the snapshot of `depth` (each partition's piece) appended, or, for a
        base, the new chain it starts."""
        if base:
            return Chain((depth,), tuple((piece,) for piece in pieces))
        return Chain((*self.depths, depth), tuple((*kept, piece) for kept, piece in zip(self.pieces, pieces)))
