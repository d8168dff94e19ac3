"""The successors one level sends to other partitions, each once, gathered a chunk at a time.

A partition sends a successor that another partition owns to that owner once a level; a later
sighting of it, from another parent, is only an edge into it (where edges are kept: two ints).
Which successors were met already is told by their keys' Python hashes in a numpy table per
owner (`FingerprintStore`, whose ids are then the keys' positions in the batch and which keeps
each one's parent), a chunk at a time. Every key met again is compared with the key first met
under its hash, so a hash two keys share never merges them: the later one is listed apart
(`collided`), as exact as a dict of keys. Where that dict cost about 110 bytes a successor
sent (an entry, and an int for its position) and the batch a tuple more, the table costs about
30 and the batch's parents 8 (`KeyColumns`).

A Python hash is enough here: the table lives for one level in one process, so string hashes
salted per process never meet another process's.
"""

from __future__ import annotations

from array import array
from itertools import compress

import numpy as np

from pymc_resume.explore.level.batches import KeyColumns, Repeats, no_repeats
from pymc_resume.explore.store.fingerprints import FingerprintStore


class Outbound:
    """Per other owner, the distinct successors met this level, their parents, and (with
    `keep_edges`) the repeated edges into them."""

    __slots__ = (
        "index",
        "keep_edges",
        "keys",
        "met",
        "repeats",
        "collided",
        "collided_parents",
        "collided_repeats",
    )

    def __init__(self, count: int, index: int, keep_edges: bool) -> None:
        self.index = index
        self.keep_edges = keep_edges
        self.keys: list[list] = [[] for _ in range(count)]  # per owner, in order of first sighting
        self.met = [FingerprintStore() for _ in range(count)]  # their hashes: ids are positions
        self.repeats = [no_repeats() for _ in range(count)]
        # Keys whose hash an earlier, different key of this level had: key -> its place among
        # them, listed after every key of `met` (a 61-bit hash makes this all but never happen).
        self.collided: list[dict] = [{} for _ in range(count)]
        self.collided_parents: list[list[int]] = [[] for _ in range(count)]
        self.collided_repeats: list[list[tuple[int, int]]] = [[] for _ in range(count)]

    def add(self, keys: list, parents: list[int], owners: list[int]) -> None:
        """A chunk of successors, each with its parent's gid and its owner (never this
        partition)."""
        hashes = np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys)).view(np.uint64)
        parent_ids = np.array(parents, dtype=np.int64)
        if len(self.keys) == 2:  # one other owner: the whole chunk is its
            self._add_for(1 - self.index, keys, hashes, parent_ids)
            return
        owner_of = np.array(owners, dtype=np.int64)
        for owner in range(len(self.keys)):
            picked = np.flatnonzero(owner_of == owner)
            if picked.size:
                chosen = list(map(keys.__getitem__, picked.tolist()))
                self._add_for(owner, chosen, hashes[picked], parent_ids[picked])

    def _add_for(self, owner: int, keys: list, hashes: np.ndarray, parents: np.ndarray) -> None:
        met, listed = self.met[owner], self.keys[owner]
        ids, new = met.add(hashes, parents, hashed=True)
        listed.extend(compress(keys, new.tolist()))
        again = np.flatnonzero(~new)
        if not again.size:
            return
        # A hash met before: the same key (an edge into it), or rarely another key (compared
        # here, in Python, only for the keys met again).
        positions = ids[again]
        differs = [
            place
            for place, (key, position) in enumerate(
                zip(map(keys.__getitem__, again.tolist()), positions.tolist())
            )
            if listed[position] != key
        ]
        if differs:
            for place in differs:
                self._add_collided(owner, keys[again[place]], int(parents[again[place]]))
            kept = np.ones(len(again), dtype=bool)
            kept[differs] = False
            again, positions = again[kept], positions[kept]
        if self.keep_edges and again.size:
            first_parents = np.frombuffer(met.parents, dtype=np.int64)[positions]
            other = parents[again] != first_parents  # (the first sighting's own edge is listed)
            repeats = self.repeats[owner]
            repeats.positions.frombytes(positions[other].tobytes())
            repeats.parents.frombytes(parents[again][other].tobytes())

    def _add_collided(self, owner: int, key, parent: int) -> None:
        collided = self.collided[owner]
        place = collided.get(key)
        if place is None:
            collided[key] = len(collided)
            self.collided_parents[owner].append(parent)
        elif self.keep_edges and self.collided_parents[owner][place] != parent:
            self.collided_repeats[owner].append((place, parent))

    def batches(self) -> list[tuple[KeyColumns | list, Repeats, None]]:
        """Per owner, its batch: the keys in order of first sighting (those that collided
        last), their parents, and the repeated edges into them (read, not emptied)."""
        batches: list[tuple[KeyColumns | list, Repeats, None]] = []
        for owner, listed in enumerate(self.keys):
            met, repeats = self.met[owner], self.repeats[owner]
            if not listed:
                batches.append(([], repeats, None))
                continue
            parents = np.frombuffer(met.parents, dtype=np.int64)
            collided = self.collided[owner]
            if collided:  # (listed after the others: their places follow on)
                listed = [*listed, *collided]
                parents = np.concatenate([parents, np.array(self.collided_parents[owner], dtype=np.int64)])
                more = self.collided_repeats[owner]
                repeats = Repeats(
                    repeats.positions + array("q", [len(met) + place for place, _ in more]),
                    repeats.parents + array("q", [parent for _, parent in more]),
                )
            batches.append((KeyColumns(listed, parents), repeats, None))
        return batches
