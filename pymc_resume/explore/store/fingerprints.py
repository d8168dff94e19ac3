"""The fingerprint store: a partition's visited states as 64-bit fingerprints, as TLC keeps them.

A state is stored as one 64-bit number (its *fingerprint*, see `fingerprints_of`) in admission
order, plus its parent's global id: 16 bytes a state, and an open-addressing table of 4-byte
ids (between a half and three quarters full: 5 to 8 bytes a state) finds a fingerprint's id.
The store never holds a state, so a trace is rebuilt by re-running the model along the ids of
its states (`trace.py`), as TLC rebuilds one along fingerprints.

Two different states with the same fingerprint would be taken for one (a *collision*: the
second is never explored). For keys that are ints below 2**64 (a packed model's, the reference
semantics' at small bounds) the fingerprint is the key itself, so no collision can happen;
otherwise it is a 64-bit hash, and `collision_probability` bounds the chance that one happened
in a run. `--exact` keeps whole keys instead (`visited.py`).

Why numpy: a Python dict costs about 90 bytes a state even for int keys, and a Python loop over
a flat array costs more CPU than the dict. The table is probed for a whole chunk of successors
at once (`add`), so each successor pays a few numpy element operations in C.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Sequence

import numpy as np

from pymc_resume.explore.store.stable_hash import stable_hash

EMPTY = np.uint32(0xFFFF_FFFF)  # a table slot without an id
MAX_IDS = 0xFFFF_FFFF  # ids are 4 bytes: a partition holds fewer states than this
FIRST_CAPACITY = 1 << 12  # table slots of an empty store (a power of two)
MAX_LOAD = 0.75  # the table doubles before it is fuller than this
PLACE_SLICE = 1 << 16  # fingerprints re-placed at once when the table grows
_MASK64 = (1 << 64) - 1
_LIMB = (1 << 60) - 1
_THREE_LIMBS = 1 << 180


def _mixed(fingerprints: np.ndarray) -> np.ndarray:
    """Spread fingerprints over the table (splitmix64's finalizer): packed keys differ in a
    few bits, and a table indexed by those bits alone would fill in clusters. Wraps modulo
    2**64, as numpy's unsigned arithmetic does on arrays."""
    z = fingerprints ^ (fingerprints >> np.uint64(30))
    z = z * np.uint64(0xBF58_476D_1CE4_E5B9)
    z ^= z >> np.uint64(27)
    z = z * np.uint64(0x94D0_49BB_1331_11EB)
    return z ^ (z >> np.uint64(31))


def fingerprints_of(keys: Sequence[Hashable], int_tuples: bool = False) -> tuple[np.ndarray, bool]:
    """The fingerprints of `keys` (uint64), and whether they are the keys themselves (ints in
    [0, 2**64): then distinct keys have distinct fingerprints).

    Every other key is hashed to the same 64 bits in every process, so that a recovered run
    (another PYTHONHASHSEED, another host) finds the states a killed one stored. `int_tuples`
    says every key is a tuple of ints (the plain codec's): CPython's tuple hash, in C, never
    salted for ints. Anything else goes through `stable_hash` (a Python call a part)."""
    if not len(keys):  # (an empty chunk hashes nothing: it must not mark a store hashed)
        return np.empty(0, dtype=np.uint64), True
    if int_tuples:
        hashes = np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))
        return hashes.view(np.uint64), False
    if keys and type(keys[0]) is int:
        try:
            return np.array(keys, dtype=np.uint64), True
        except (OverflowError, TypeError, ValueError):  # a negative or wide int, or not all ints
            pass
    return np.fromiter(map(_hashed, keys), dtype=np.uint64, count=len(keys)), False


def _hashed(key: Hashable) -> int:
    if type(key) is int:  # beyond 64 bits (or negative): hash its 60-bit limbs
        if 0 <= key < _THREE_LIMBS:  # (the reference semantics' keys: no loop)
            return hash((key & _LIMB, key >> 60 & _LIMB, key >> 120)) & _MASK64
        return hash(_limbs(key)) & _MASK64
    return stable_hash(key) & _MASK64


def _limbs(key: int) -> tuple[int, ...]:
    """`key` as its sign and 60-bit limbs. Python hashes an int below 2**61 - 1 as itself and
    a larger one modulo that: folding 64-bit halves made keys whose halves differ by a
    multiple of it (`128 << 64` and `1 << 132`) one fingerprint."""
    negative = key < 0
    key = -key if negative else key
    limbs = [int(negative)]
    while key:
        limbs.append(key & _LIMB)
        key >>= 60
    return tuple(limbs)


class FingerprintStore:
    """Maps each distinct fingerprint to a dense local id in admission order; remembers each
    state's parent (a global id, -1 for an initial state)."""

    __slots__ = ("fingerprints", "parents", "table", "count", "hashed", "lookups")

    def __init__(self) -> None:
        self.fingerprints = np.empty(FIRST_CAPACITY, dtype=np.uint64)  # by id; grows by doubling
        self.parents = array("q")
        self.table = np.full(FIRST_CAPACITY, EMPTY, dtype=np.uint32)
        self.count = 0
        self.hashed = False  # some fingerprint was a hash, not the key itself
        self.lookups = 0  # fingerprints looked up or added: what a collision could hide in

    def __len__(self) -> int:
        return self.count

    def stored(self) -> np.ndarray:
        """The fingerprints by id (a view: copy it to keep it across an `add`)."""
        return self.fingerprints[: self.count]

    def ids(self, fingerprints: np.ndarray) -> np.ndarray:
        """The id of each fingerprint, -1 where it was never added."""
        found = np.full(len(fingerprints), -1, dtype=np.int64)
        mask = np.uint64(len(self.table) - 1)
        slots = _mixed(fingerprints) & mask
        active = np.arange(len(fingerprints))
        stored, table = self.fingerprints, self.table
        while active.size:  # linear probing, every unresolved fingerprint one slot per round
            ids = table[slots[active]]
            occupied = ids != EMPTY
            hit = np.zeros(len(active), dtype=bool)
            hit[occupied] = stored[ids[occupied]] == fingerprints[active[occupied]]
            found[active[hit]] = ids[hit]
            active = active[occupied & ~hit]
            slots[active] = (slots[active] + np.uint64(1)) & mask
        return found

    def add(
        self, fingerprints: np.ndarray, parents: Sequence[int] | np.ndarray, hashed: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Add a chunk of fingerprints, in order, with each one's parent. Returns each one's id
        and a mask of those that were new (the first occurrence of a fingerprint not stored
        before): new ids follow on in the order of first occurrence."""
        self.hashed = self.hashed or hashed
        self.lookups += len(fingerprints)
        ids = self.ids(fingerprints)
        new = np.zeros(len(fingerprints), dtype=bool)
        absent = np.flatnonzero(ids < 0)
        if absent.size == 0:  # the common case: most successors were seen before
            return ids, new
        # Only the absent ones (about one successor in ten) are sorted, to find repeats.
        unique, first, inverse = np.unique(fingerprints[absent], return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # the distinct new ones, by first occurrence
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        ids[absent] = self.count + rank[inverse.reshape(-1)]
        firsts = absent[first[order]]
        new[firsts] = True
        added = unique[order]
        if self.count + len(added) > MAX_IDS:
            raise OverflowError(f"a partition holds at most {MAX_IDS:,} states")
        self._reserve(self.count + len(added))
        self._place(added, np.arange(self.count, self.count + len(added), dtype=np.int64))
        self._append(added)
        if isinstance(parents, np.ndarray):
            self.parents.frombytes(parents[firsts].astype(np.int64, copy=False).tobytes())
        else:
            self.parents.extend(map(parents.__getitem__, firsts.tolist()))
        return ids, new

    def fill(self, fingerprints: np.ndarray, parents: array) -> None:
        """Take `fingerprints` (by id) and `parents` as the whole store (a snapshot's)."""
        self.fingerprints = np.empty(max(FIRST_CAPACITY, len(fingerprints)), dtype=np.uint64)
        self.count = 0
        self._append(fingerprints)
        capacity = FIRST_CAPACITY
        while self.count > capacity * MAX_LOAD:
            capacity *= 2
        self._rebuild(capacity)
        self.parents = parents

    def local_id(self, fingerprint: int) -> int | None:
        found = int(self.ids(np.array([fingerprint], dtype=np.uint64))[0])
        return None if found < 0 else found

    def _append(self, fingerprints: np.ndarray) -> None:
        end = self.count + len(fingerprints)
        if end > len(self.fingerprints):
            # In place (realloc: a large block is remapped, not copied), so growing never holds
            # the old and the new array at once; the unused tail is never touched, so it takes
            # no memory. (No view of the array is kept across an add: see `stored`.)
            self.fingerprints.resize(max(end, 2 * len(self.fingerprints)), refcheck=False)
        self.fingerprints[self.count : end] = fingerprints
        self.count = end

    def _reserve(self, count: int) -> None:
        """Double the table until `count` ids fit under the load limit, re-placing the ids
        stored so far (the caller places the new ones)."""
        capacity = len(self.table)
        while count > capacity * MAX_LOAD:
            capacity *= 2
        if capacity != len(self.table):
            self._rebuild(capacity)

    def _rebuild(self, capacity: int) -> None:
        """A table of `capacity` slots holding every stored id."""
        del self.table  # (its slots are rebuilt from the fingerprints: free it first)
        self.table = np.full(capacity, EMPTY, dtype=np.uint32)
        # A slice at a time: placing them all at once would take a few temporary arrays of
        # 8 bytes a state, more than the store itself at its peak.
        for start in range(0, self.count, PLACE_SLICE):
            end = min(start + PLACE_SLICE, self.count)
            self._place(self.fingerprints[start:end], np.arange(start, end, dtype=np.int64))

    def _place(self, fingerprints: np.ndarray, ids: np.ndarray) -> None:
        """Put distinct fingerprints, none in the table yet, into free slots (linear probing)."""
        table = self.table
        mask = np.uint64(len(table) - 1)
        slots = _mixed(fingerprints) & mask
        active = np.arange(len(fingerprints))
        while active.size:
            at = slots[active]
            free = table[at] == EMPTY
            candidates, wanted = active[free], at[free]
            # Several may want one free slot: every one writes, one write stays (whichever numpy
            # kept: placement may differ between runs, ids and lookups do not), read back.
            table[wanted] = ids[candidates]
            won = np.zeros(len(active), dtype=bool)
            won[np.flatnonzero(free)[table[wanted] == ids[candidates]]] = True
            active = active[~won]
            slots[active] = (slots[active] + np.uint64(1)) & mask


def collision_probability(distinct: int, lookups: int) -> float:
    """An upper bound on the chance that some state was taken for another with the same
    fingerprint: each of `lookups` fingerprints looked up could equal one of `distinct` stored
    ones by chance (2**-64 each, the union bound; TLC prints a like estimate)."""
    return min(1.0, distinct * lookups / 2.0**64)


def summed_risk(risks) -> float | None:
    """The run's collision bound from its partitions' (each store is on its own: a collision
    can only happen within one); None when the stores were exact."""
    risks = list(risks)
    if any(risk is None for risk in risks):
        return None
    return min(1.0, sum(risks))
