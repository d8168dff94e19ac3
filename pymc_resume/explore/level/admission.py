"""Admission to a partition's visited store: candidates in, new states (and their ids) out.

A candidate is a (key, parent gid) pair, from another partition's batch or from this
partition's own carry. The store is exact (`VisitedStore`: the keys themselves, ids by key) or
holds 64-bit fingerprints (`FingerprintStore`); admission gives each new key the next local
id, keeps its parent (for traces) and, where reachability properties are checked, every edge
into it. With fingerprints, this partition's own successors are stored as they are found
(`store_own`), so the states of the level being filled are stored already, from
`level_starts[-1]` on.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from itertools import compress
from typing import cast

import numpy as np

from pymc_resume.explore.level import exchange
from pymc_resume.explore.level.batches import Batch, Columns, KeyColumns, Repeats, empty_batch
from pymc_resume.explore.level.keys import Keys
from pymc_resume.explore.level.peers import Peers
from pymc_resume.explore.store import settled_edges
from pymc_resume.explore.store.fingerprints import FingerprintStore, collision_probability, fingerprints_of
from pymc_resume.explore.store.frontier import Frontier
from pymc_resume.explore.store.settled_edges import SettledEdges, int32_view
from pymc_resume.explore.store.visited import PRESENT, VisitedStore


class Admission:
    """A partition's visited store, the level being filled and the edges kept (`keep_edges`:
    the model has reachability properties). `found` counts, per action, the new states found
    (TLC's -coverage), where the run counts them."""

    def __init__(
        self, keys: Keys, peers: Peers, exact: bool, keep_edges: bool, found: Counter | None
    ) -> None:
        self.keys, self.peers, self.exact, self.found = keys, peers, exact, found
        self.store: VisitedStore | FingerprintStore = (
            VisitedStore(indexed=keep_edges) if exact else FingerprintStore()
        )  # (a VisitedStore keeps ids at hand only for edges)
        # While every fingerprint is its key, the store itself holds the level being filled;
        # from the first hashed one, `ahead` lists its keys, in memory up to a bound and on
        # disk beyond it (see `store_own` and `frontier`).
        self.ahead = Frontier()
        self.level_starts: list[int] = []  # local id of the first state admitted at each level
        # Incoming edges, recorded by the owner of the target: (source gid, target local id),
        # the recent ones in memory, the settled ones on disk once they are many
        # (`settled_edges`; `edge_count` and `edge_chunks` read both).
        self.edge_sources = array("i") if keep_edges else None
        self.edge_targets = array("i") if keep_edges else None
        self.settled_edges = SettledEdges()
        self.edges_before_last_level = 0  # edges in memory when the last level began
        # This partition's own candidates for the next level: they never leave the process.
        self.carry: list[Batch] = []

    def start_levels(self, level: int) -> None:
        """Mark where each level up to `level` starts (a level that admitted nothing here
        starts where the next one does)."""
        while len(self.level_starts) < level:
            self.level_starts.append(len(self.store))

    def admit(self, inbound: list[Batch], level: int) -> tuple[int, list[Hashable]]:
        """Admit this level's candidates, `inbound` and then the carry; return the first new
        local id and the new keys (their local ids follow on from it). Keys, not states: a
        level's states are decoded one at a time as they are expanded, so a wide level costs
        8 bytes a state, not a state. `inbound` is emptied as it is admitted."""
        self.start_levels(level)
        first = self.level_starts[level - 1] if not self.exact else len(self.store)
        fresh: list[Hashable] = []  # (with fingerprints, `admit_batch` stores them instead)
        for position, (candidates, repeats, tables) in enumerate(inbound):
            # Admitted, a batch is not needed any more: let go of it now, not once the level
            # is expanded (a wide level's batches would stay beside everything it sends).
            inbound[position] = empty_batch()
            if tables is not None:  # another partition's keys, and its new table entries
                self.admit_batch(self.peers.received(candidates, tables), repeats, fresh, encoded=True)
            else:
                self.admit_batch(candidates, repeats, fresh, encoded=self.keys.wire)
        for candidates, repeats, _ in self.carry:
            self.admit_batch(candidates, repeats, fresh, encoded=True)
        self.carry = []
        if self.exact:
            return first, fresh
        ahead = self.ahead_keys()  # every state of this level is stored: ids from `first` on
        self.ahead = Frontier()
        return first, ahead  # type: ignore[return-value]  # a sequence of keys

    def admit_batch(self, candidates, repeats, fresh: list, encoded: bool) -> None:
        """Admit one batch; `encoded` batches (this partition's own, or translated) hold keys.
        An exact store lists the new keys in `fresh`; a fingerprint store keeps them itself."""
        if not self.exact:
            self._store_batch(candidates, repeats, encoded)
            return
        store = cast(VisitedStore, self.store)
        ids = store.ids
        parents = store.parents
        indexed = store.indexed
        edge_sources, edge_targets = self.edge_sources, self.edge_targets
        encode = None if encoded else self.keys.encode
        locals_ = []
        for state, parent in candidates:
            key = encode(state) if encode else state
            local = ids.get(key)
            if local is None:
                local = len(parents)
                ids[key] = local if indexed else PRESENT
                parents.append(parent)
                fresh.append(key)
            if edge_sources is not None:
                locals_.append(local)
                if parent >= 0:
                    edge_sources.append(parent)
                    edge_targets.append(local)  # type: ignore[union-attr]  # set with edge_sources
        for position, parent in repeats:  # (repeats come only where edges are kept)
            edge_sources.append(parent)  # type: ignore[union-attr]
            edge_targets.append(locals_[position])  # type: ignore[union-attr]

    def _store_batch(self, candidates, repeats, encoded: bool) -> None:
        """`admit_batch` into a fingerprint store: the batch stored as this partition's own."""
        encode = self.keys.encode
        if type(candidates) is Columns and (encode is None or encoded):  # packed keys
            hashed = cast(FingerprintStore, self.store).hashed  # (else the keys are not needed)
            keys = candidates.keys.tolist() if hashed else []
            stored = self.store_own(keys, candidates.parents, False, (candidates.keys, True))
        elif type(candidates) is KeyColumns:
            keys = candidates.keys
            if not encoded and encode:
                keys = [encode(state) for state in keys]
            stored = self.store_own(keys, candidates.parents, False)
            if self.edge_sources is not None:
                self.record_edges(candidates.parents, stored, repeats)
            return
        else:
            encode = None if encoded else encode
            keys = [encode(state) if encode else state for state, _ in candidates]
            stored = self.store_own(keys, [parent for _, parent in candidates], edges=False)
        sources, targets = self.edge_sources, self.edge_targets
        if sources is None or targets is None:
            return
        for (_, parent), target in zip(candidates, stored):
            if parent >= 0:
                sources.append(parent)
                targets.append(target)
        if type(repeats) is Repeats and len(repeats):  # columns: appended in numpy
            into = np.frombuffer(repeats.positions, dtype=np.int64)
            parent_ids = np.frombuffer(repeats.parents, dtype=np.int64)
            sources.frombytes(parent_ids.astype(np.int32).tobytes())
            targets.frombytes(np.asarray(stored, dtype=np.int32)[into].tobytes())
        else:
            for position, parent in repeats:
                sources.append(parent)
                targets.append(stored[position])

    def record_edges(self, parents: np.ndarray, stored: list[int], repeats: Repeats) -> None:
        """The edges of a `KeyColumns` batch just stored (`stored`: each candidate's local id):
        one from each candidate's parent (an initial state has none), then the repeated ones."""
        sources, targets = cast(array, self.edge_sources), cast(array, self.edge_targets)
        into = np.asarray(stored, dtype=np.int32)
        has_parent = parents >= 0
        sources.frombytes(parents[has_parent].astype(np.int32).tobytes())
        targets.frombytes(into[has_parent].tobytes())
        if len(repeats):
            if type(repeats) is not Repeats:  # (pairs, as a checkpoint's carry holds them)
                pairs = list(repeats)
                repeats = Repeats(array("q", [at for at, _ in pairs]), array("q", [gid for _, gid in pairs]))
            positions = np.frombuffer(repeats.positions, dtype=np.int64)
            sources.frombytes(np.frombuffer(repeats.parents, dtype=np.int64).astype(np.int32).tobytes())
            targets.frombytes(into[positions].tobytes())

    def store_own(
        self,
        keys: list,
        parents: list | np.ndarray,
        edges: bool,
        fingerprinted: tuple[np.ndarray, bool] | None = None,
        actions: list[str] | None = None,
    ) -> list[int]:
        """Store a chunk of this partition's keys with their parents' gids, as states of the
        level being filled; with `edges`, every key is an edge from its parent. Returns each
        key's id. `actions`: the action that found each key, counted where it is new.

        While every fingerprint is its key (ints below 2**64: packed states), the store holds
        the level's keys itself and nothing else is kept: a wide level costs no memory beyond
        the store. From the first hashed key on, the new keys are listed in `ahead`."""
        fingerprints, exact = fingerprinted or self.fingerprints(keys)
        store = cast(FingerprintStore, self.store)
        if not exact and not store.hashed:  # the first hashed chunk: list the level so far
            self.ahead = Frontier(store.stored()[self.level_starts[-1] :].tolist())
        ids, new = store.add(fingerprints, parents, hashed=not exact)
        if store.hashed:
            self.ahead.extend(compress(keys, new.tolist()))
        if actions is not None:  # (coverage: the action that found each new state)
            cast(Counter, self.found).update(compress(actions, new.tolist()))
        listed = ids.tolist()
        if edges:
            self.edge_sources.extend(parents)  # type: ignore[union-attr]  # kept with goals
            self.edge_targets.extend(listed)  # type: ignore[union-attr]
        return listed

    def fingerprints(self, keys: Sequence[Hashable]) -> tuple[np.ndarray, bool]:
        """The fingerprints of keys of ours (`fingerprints_of`); exchanging, the stable hashes
        of their states, which every partition computes alike (`exchange`)."""
        if self.keys.exchange:
            fingerprint = cast(exchange.HashKeys | exchange.CodecKeys, self.keys.hash_keys).fingerprint
            hashes = np.fromiter(map(fingerprint, keys), dtype=np.int64, count=len(keys))
            return hashes.view(np.uint64), False
        return fingerprints_of(keys, self.keys.int_tuple_keys)

    def local_id(self, state: Hashable) -> int | None:
        """The local id of a (canonical) state, or None if it was never admitted here."""
        if self.keys.exchange:
            fingerprint = np.array([self.keys.state_hash(state)], dtype=np.int64)
            return cast(FingerprintStore, self.store).local_id(int(fingerprint.view(np.uint64)[0]))
        key = self.keys.store_key(state)
        if isinstance(self.store, FingerprintStore):
            fingerprint, _exact = self.fingerprints([key])
            return self.store.local_id(int(fingerprint[0]))
        return self.store.local_id(key)

    def settle_edges(self) -> None:
        """At a level's start, the edges that were in memory when the last level began go to
        disk, once there are `settled_edges.IN_MEMORY` of them: every one of them is into a
        state stored before the level being filled (see `settled_edges`)."""
        sources, targets = self.edge_sources, self.edge_targets
        if sources is None or targets is None:
            return
        settled = self.edges_before_last_level
        if settled >= settled_edges.IN_MEMORY:
            with memoryview(sources) as from_sources, memoryview(targets) as from_targets:
                self.settled_edges.write(from_sources[:settled], from_targets[:settled])
            del sources[:settled], targets[:settled]
        self.edges_before_last_level = len(sources)

    def edge_count(self) -> int:
        return len(self.settled_edges) + len(self.edge_sources or ())

    def edge_chunks(self, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every edge kept, as (source gids, target local ids) int32 arrays of at most `size`:
        the settled ones from disk, then those in memory."""
        yield from self.settled_edges.chunks(size)
        sources, targets = int32_view(self.edge_sources or ()), int32_view(self.edge_targets or ())
        for start in range(0, len(sources), size):
            yield sources[start : start + size], targets[start : start + size]

    def stored_levels(self) -> tuple[int, list[int]]:
        """The states a snapshot stores and where each level starts: with fingerprints, the
        next level's states already stored are saved as waiting candidates instead (see
        `ahead_keys`), so that a snapshot is the same whichever store took it."""
        if self.exact or not self.level_starts:
            return len(self.store), self.level_starts
        return self.level_starts[-1], self.level_starts[:-1]

    def ahead_keys(self) -> Sequence[Hashable] | Frontier:
        """With fingerprints, the keys of the states stored for the level being filled."""
        if self.exact or not self.level_starts:
            return []
        if self.keys.exchange:  # (its keys are `HashKeys`'; a snapshot saves the plain codec's)
            return exchange.DenseKeys(self.ahead, self.keys.hash_keys)  # type: ignore[return-value, arg-type]
        if self.store.hashed:  # type: ignore[union-attr]  # a FingerprintStore
            return self.ahead
        return StoredKeys(self.store, self.level_starts[-1], len(self.store))  # type: ignore[arg-type]

    def collision_risk(self) -> float | None:
        """A bound on the chance that two of this partition's states shared a fingerprint
        (0.0 where every fingerprint was its key); None for an exact store."""
        if self.exact:
            return None
        store = self.store
        return collision_probability(len(store), store.lookups) if store.hashed else 0.0  # type: ignore[union-attr]


class StoredKeys(Sequence):
    """Keys of the stored states with ids [start, end) of a store whose fingerprints are the
    keys themselves, as Python ints, a slice at a time (a list of them all would cost 40 bytes
    a state)."""

    SLICE = 1 << 12

    def __init__(self, store: FingerprintStore, start: int, end: int) -> None:
        self.store, self.start, self.end = store, start, end

    def __len__(self) -> int:
        return self.end - self.start

    def __getitem__(self, index):  # (the search reads only the first: see `tuple_mapper`)
        if isinstance(index, slice):
            return self.store.fingerprints[self.start : self.end][index].tolist()
        if not 0 <= index < len(self):
            raise IndexError(index)
        return int(self.store.fingerprints[self.start + index])

    def __iter__(self) -> Iterator[int]:
        # The array is read as the search runs: ids stored meanwhile (the next level) come
        # after `end`, and a grown array keeps these values at their places.
        for start in range(self.start, self.end, self.SLICE):
            yield from self.store.fingerprints[start : min(start + self.SLICE, self.end)].tolist()
