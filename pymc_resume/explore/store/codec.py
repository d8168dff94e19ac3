"""Compact state keys: how a model lets the visited store keep small ints instead of objects.

A model may offer `codec()`, returning a fresh `Codec` per partition. `encode` maps a state to a
compact hashable key (usually an int) and `decode` maps the key back to an equal state; the
explorer stores only keys, and expands decoded states. A codec may keep tables (interning), so
keys are only meaningful inside the partition that made them.

A codec with tables may also be a `WireCodec`: then states travel between partitions as the
sender's keys too, never as objects. With each batch a partition sends the entries its tables
gained since its last batch to that destination (`delta`); the receiver interns them in its own
tables, remembers sender id -> own id (`absorb`, into one translation per sender) and rewrites
each key by table lookups (`translate`), without rebuilding, pickling or hashing a state.

A wire codec may also be a `FingerprintingCodec`: it gives each key a fingerprint that is the
same in every process (from its values' stable hashes, `PartHashes`), and then workers exchange
fingerprints instead of states (`exchange`): a state leaves the partition that found it only to
even out the workers' frontiers.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from pymc_resume.explore.store.stable_hash import part_hash
from pymc_resume.explore.validate import ModelError


class Codec(Protocol):
    def encode(self, state: Hashable) -> Hashable: ...

    def decode(self, key: Hashable) -> Hashable: ...


class WireCodec(Codec, Protocol):
    def delta(self, since: object | None) -> tuple[object, object]:
        """(a mark of the tables now, the picklable entries added after mark `since`)."""

    def new_translation(self) -> object:
        """An empty translation from another partition's ids to this one's."""

    def absorb(self, translation: object, delta: object) -> None:
        """Intern another partition's new entries, extending `translation`."""

    def translate(self, key: Hashable, translation: object) -> Hashable:
        """Another partition's key, as this partition's key of the same state."""


class FingerprintingCodec(WireCodec, Protocol):
    def fingerprint(self, key: Hashable) -> int:
        """The fingerprint of the state `key` stands for: the same in every process."""

    def encode_fingerprinted(self, state: Hashable) -> tuple[Hashable, int]:
        """`encode(state)` and its `fingerprint`, in one pass."""

    @staticmethod
    def fingerprint_of_state(state: Hashable) -> int:
        """The same fingerprint, from the state alone (no tables)."""


class Interner:
    """Gives each distinct value a dense id and shares one copy of it.

    Interned values live as long as the interner, so their `id()`s are unique among live
    objects: `by_identity` maps them to their ids, and a value that *is* an interned copy (a
    part a successor kept unchanged from its decoded parent) is found without hashing it.
    """

    __slots__ = ("ids", "values", "by_identity")

    def __init__(self) -> None:
        self.ids: dict[Hashable, int] = {}
        self.values: list = []
        self.by_identity: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.values)

    # Object identities do not survive pickling: a restored interner rebuilds `by_identity`.
    def __getstate__(self):
        return self.ids, self.values

    def __setstate__(self, state) -> None:
        self.ids, self.values = state
        self.by_identity = {id(value): index for index, value in enumerate(self.values)}

    def id(self, value: Hashable) -> int:
        found = self.by_identity.get(id(value))
        if found is None:
            found = self.ids.get(value)
            if found is None:
                found = self.ids[value] = len(self.values)
                self.values.append(value)
                self.by_identity[id(value)] = found
        return found


class InternerTables:
    """A wire codec's tables: interners whose ids travel between partitions.

    `delta` and `absorb` work for any list of interners; a model's codec adds `translate`,
    which knows where its key keeps each table's ids.
    """

    tables: tuple[Interner, ...]

    def delta(self, since: tuple[int, ...] | None) -> tuple[tuple[int, ...], list[list]]:
        since = since or (0,) * len(self.tables)
        now = tuple(len(table) for table in self.tables)
        return now, [table.values[start:] for table, start in zip(self.tables, since)]

    def new_translation(self) -> list[list[int]]:
        return [[] for _ in self.tables]

    def absorb(self, translation: list[list[int]], delta: list[list]) -> None:
        for table, ids, values in zip(self.tables, translation, delta):
            ids.extend(table.id(value) for value in values)


class PartHashes:
    """Each value of an interner's by id, as its `part_hash`: what a codec combines into a
    key's fingerprint between workers that exchange fingerprints (`exchange`), where a key's
    ids mean nothing outside its partition but its values' hashes are the same everywhere.

    A value's hash is computed once, when first asked for. Two values of one table with one
    hash would make two states one: that is refused, not guessed."""

    __slots__ = ("table", "hashes", "value_of")

    def __init__(self, table: Interner) -> None:
        self.table = table
        self.hashes: list[int] = []  # by id
        self.value_of: dict[int, object] = {}  # hash -> the value that has it

    def extended(self) -> list[int]:
        """`hashes`, after hashing the values interned since the last call."""
        values, hashes = self.table.values, self.hashes
        for value in values[len(hashes) :]:
            found = part_hash(value)
            claim_hash(self.value_of, found, value, "state parts")
            hashes.append(found)
        return hashes


def claim_hash(value_of: dict, found: int, value, what: str) -> None:
    """Record in `value_of` (hash -> value) that `value` hashes to `found`. Where hashes stand
    for values between workers, two values with one hash would be one value: refused, with
    `what` they are, never merged."""
    known = value_of.setdefault(found, value)
    if known is not value and known != value:
        raise ModelError(
            f"two {what} share a 60-bit stable hash ({known!r:.60} and {value!r:.60}): run with --exact"
        )
