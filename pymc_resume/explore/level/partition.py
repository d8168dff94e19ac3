"""One hash partition of the state space, and the level step it runs.

A partition owns the states whose key hashes to it: their ids, parents, invariant verdicts and
(for reachability properties) their incoming edges. One level of the breadth-first search is one
`step`: admit the candidate states sent to this partition, check each new one, expand it, and
sort its successors by owner into outbound batches. The step is plain data in, plain data out,
so the same partition runs in-process (one worker) or in a worker process (see `workers`).

A state's global id is `local_id * count + index`: it names its partition without a lookup.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from itertools import compress
from typing import cast

import numpy as np

from pymc_resume.explore.level import exchange
from pymc_resume.explore.level.batches import (
    Batch,
    Candidate,
    Columns,
    KeyColumns,
    Repeats,
    empty_batch,
    joined_columns,
    no_repeats,
)
from pymc_resume.explore.level.outbound import Outbound
from pymc_resume.explore.level.pacing import FINGERPRINT_CHUNK, PRIME, TICK_EVERY
from pymc_resume.explore.result import DEADLOCK
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.explore.snapshots.snapshot import Layout
from pymc_resume.explore.store import persisted, settled_edges
from pymc_resume.explore.store.fingerprints import FingerprintStore, collision_probability, fingerprints_of
from pymc_resume.explore.store.frontier import Frontier
from pymc_resume.explore.store.plain import PlainCodec, fits_plain_codec, tuple_mapper
from pymc_resume.explore.store.settled_edges import SettledEdges, int32_view
from pymc_resume.explore.store.stable_hash import stable_hash
from pymc_resume.explore.store.visited import PRESENT, VisitedStore
from pymc_resume.explore.validate import ModelError, ValidModel, short

MERSENNE_61 = 2**61 - 1  # CPython's modulus for the hash of an int


def state_hasher(model: ValidModel, count: int, exact: bool) -> Callable[[Hashable], int]:
    """The hash that places a (canonical) state among `count` partitions: the same in every
    process, so that a run and its recovery, started apart with different string-hash salts,
    agree on every owner. A model with a codec of its own keeps Python's `hash()`: its states
    must not hash strings. Partitions that exchange fingerprints place a state by its own."""
    if exchange.exchanges_fingerprints(model, count, exact):
        return exchange.state_fingerprint(model)
    if model.partition_key is not None:  # (mypy does not carry this into the lambda)
        return lambda state: stable_hash(model.partition_key(state))  # type: ignore[misc]
    return hash if model.codec is not None else stable_hash


def owner_of(state: Hashable, count: int, hasher: Callable[[Hashable], int]) -> int:
    """The partition that owns `state` among `count` (`hasher` from `state_hasher`)."""
    return hasher(state) % PRIME % count


class Partition:
    """The visited store and level step of partition `index` of `count`."""

    def __init__(
        self,
        model: ValidModel,
        index: int = 0,
        count: int = 1,
        canonical: Callable[[Hashable], Hashable] | None = None,
        stop_at_first: bool = False,
        exact: bool = False,
        coverage: bool = False,
    ) -> None:
        self.model = model
        # TLC's -coverage: per action label, successors generated and new states found (one
        # partition only: a new state of another partition is known as new only there).
        self.coverage: tuple[Counter, Counter] | None = (Counter(), Counter()) if coverage else None
        # The store: 64-bit fingerprints of the keys (`fingerprints`), or with `exact` the
        # keys themselves (`visited`), which is what every run used before fingerprints.
        self.exact = exact
        self.index = index
        self.count = count
        self.canonical = canonical
        self.stop_at_first = stop_at_first
        self._take_codec(model, count, exact)
        self.invariants = list(model.invariants)
        # Optional fast path: a model's `all_hold(state)` is True only where every invariant
        # holds; where it is False (or absent) each invariant is asked.
        self.all_hold = model.all_hold
        self.goals = [prop.goal for prop in model.reachability]
        self._open_store(exact)
        self._open_exchange(model, count, exact)

    def _take_codec(self, model: ValidModel, count: int, exact: bool) -> None:
        """How states become keys here, and where each belongs."""
        # The model's own codec; else, between several partitions, one derived for plain
        # states (its keys travel as small ints and give stable owners cheaply); else none:
        # alone, a partition keeps the states themselves, which costs less CPU than encoding
        # them and twice the memory (TwoPhase N=7: 3.7-4.0 against 4.8-5.4 CPU seconds, 362
        # against 168 bytes a state).
        # A fingerprint store hashes keys, never states: a plain state's key is a tuple of its
        # fields' ids, whose hash is the same in every process (a string's is not).
        if model.codec is not None:
            self.codec = model.codec()
        elif (count > 1 or not exact) and fits_plain_codec(model.model):
            self.codec = PlainCodec()
        else:
            self.codec = None
        # Between several partitions the derived codec only carries states to their owners
        # and gives their owners: the store keeps the states themselves, each an interned
        # copy that shares its parts with equal parts (as small as its key: a tuple of the
        # same length), so a successor is looked up as it comes, and only a first sighting
        # pays for its encoding (TwoPhase N=7 on two: 2.7 million successors, 0.7 million
        # first sightings).
        self.whole = exact and isinstance(self.codec, PlainCodec) and model.codec is None
        # The plain codec's keys are tuples of ints (its tables' ids): hashed as they are.
        self.int_tuple_keys = isinstance(self.codec, PlainCodec) and not self.whole
        # Where a state belongs: the plain codec hashes a key from its tables' cached hashes.
        self.partition_key = model.partition_key
        self.state_hash = (
            hash if self.codec is None and not self.partition_key else state_hasher(model, count, exact)
        )
        self.key_hash = (
            self.codec.owner_hash if isinstance(self.codec, PlainCodec) and not self.partition_key else None
        )
        # A wire codec's keys travel as they are (see `codec`): `sent` is, per destination, the
        # mark of our tables at our last batch to it; `translations` map each sender's ids.
        self.wire = self.codec is not None and hasattr(self.codec, "translate")
        self.sent: list[object | None] = [None] * count
        self.translations = [self.codec.new_translation() for _ in range(count)] if self.wire else None
        self._bind_codec()

    def _open_store(self, exact: bool) -> None:
        """The visited store, the level being filled, the edges and what the search found."""
        self.store: VisitedStore | FingerprintStore = (
            VisitedStore(indexed=bool(self.goals)) if exact else FingerprintStore()
        )  # (a VisitedStore keeps ids at hand only for edges)
        # With fingerprints, this partition's own successors are stored as they are found, so
        # the states of the level being filled are stored already, from `level_starts[-1]` on.
        # While every fingerprint is its key, the store itself holds those keys; from the first
        # hashed one, `ahead` lists them, in memory up to a bound and on disk beyond it
        # (see `_store_own` and `frontier`).
        self.ahead = Frontier()
        self.level_size = 0  # states of the last level stepped
        self.goal_flags = [bytearray() for _ in self.goals]
        # Incoming edges, recorded by the owner of the target: (source gid, target local id),
        # the recent ones in memory, the settled ones on disk once they are many
        # (`settled_edges`; `edge_count` and `edge_chunks` read both).
        self.edge_sources = array("i") if self.goals else None
        self.edge_targets = array("i") if self.goals else None
        self.settled_edges = SettledEdges()
        self.edges_before_last_level = 0  # edges in memory when the last level began
        # property -> (level, gid, successor index): the first state found that violates it,
        # or, for a successor outside the constraints (never stored), its parent's gid and its
        # position among the parent's successors (else -1).
        self.first_bad: dict[str, tuple[int, int, int]] = {}
        self.level_starts: list[int] = []  # local id of the first state admitted at each level
        self.generated = 0
        self.stopped = False  # a tick asked to stop in the middle of a level
        self.stop_reason: str | None = None  # why, when the partition itself decided it
        # Keys of states this partition already sent to their owners, so that each crosses at
        # most once (not kept when edges are: every edge must reach the target's owner).
        self.forwarded: dict = {}
        # This partition's own candidates for the next level: they never leave the process.
        self.carry: list[Batch] = []

    def _open_exchange(self, model: ValidModel, count: int, exact: bool) -> None:
        """What this partition exchanges with the others (`exchange`), when it does."""
        # Between workers, a plainly written model's partitions, or those of a model whose codec
        # fingerprints its keys, exchange fingerprints, not states (`exchange`): this level's
        # queries (and, with goals, the goal flags of other owners' states expanded here), the
        # share of them shipped whole, and the states this partition keeps for other owners
        # (their keys here, their ids there).
        self.exchange = exchange.exchanges_fingerprints(model, count, exact)
        self.hash_keys = exchange.keys_for(self.codec, model) if self.exchange else None
        self.queries = exchange.Queries(count, len(self.goals))
        self.ship_ratio = 0.0
        self.foreign = Frontier()
        self.foreign_gids = array("q")

    def __len__(self) -> int:
        return len(self.store)

    def edge_count(self) -> int:
        return len(self.settled_edges) + len(self.edge_sources or ())

    def edge_chunks(self, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Every edge kept, as (source gids, target local ids) int32 arrays of at most `size`:
        the settled ones from disk, then those in memory."""
        yield from self.settled_edges.chunks(size)
        sources, targets = int32_view(self.edge_sources or ()), int32_view(self.edge_targets or ())
        for start in range(0, len(sources), size):
            yield sources[start : start + size], targets[start : start + size]

    def _settle_edges(self) -> None:
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

    def _bind_codec(self) -> None:
        self.encode = self.codec.encode if self.codec else None
        self.decode = self.codec.decode if self.codec else None

    def _store_key(self, state: Hashable) -> Hashable:
        """What the store keys `state` by: the state itself, or its key in our codec."""
        return state if self.whole or not self.encode else self.encode(state)

    def snapshot(self) -> bytes:
        """Everything this partition knows, except the model, as a checkpoint file's bytes
        (`snapshot.partition_record` in the `persisted` format: never pickle)."""
        return persisted.dumps(snapshot.partition_record(self))

    def restore(self, data: bytes, where: str, layout: Layout) -> None:
        """Take the state a checkpoint file (read from `where`) holds, after checking it fits
        the model, this partition and the snapshot's `layout`; SnapshotError if it does not.
        A codec's tables are refilled in place: the codec itself is the model's."""
        snapshot.restore_partition(self, persisted.loads(data, where), where, layout)

    def take(self, inbound: list[Batch]) -> None:
        """Take batches sent for the next level now, ahead of this partition's own candidates,
        as if the next `step` had been given them: before a snapshot, so that a snapshot is
        only partitions. Their keys become this partition's keys (a wire codec's tables
        absorb the senders' entries, as `_admit` would, in the same order)."""
        taken: list[Batch] = []
        for candidates, repeats, tables in inbound:
            if tables is not None:  # (only a wire partition, which has translations, gets tables)
                source, delta = tables
                self.codec.absorb(self.translations[source], delta)  # type: ignore[index]
                candidates = self._translated(candidates, self.translations[source])  # type: ignore[index]
            elif self.encode and not self.wire:
                candidates = [(self.encode(state), parent) for state, parent in candidates]
            taken.append((candidates, repeats, None))
        self.carry[:0] = taken

    def _translated(self, candidates: Sequence | Columns, translation) -> list:
        """Another partition's candidates with our keys (a wire codec's translation), or, where
        the store keeps states whole, as our interned states."""
        if self.whole:
            return self.codec.states_of_batch(candidates, translation)
        if type(candidates) is KeyColumns:
            keys = getattr(self.codec, "translate_keys", None)
            if keys is not None:
                return KeyColumns(keys(candidates.keys, translation), candidates.parents)  # type: ignore[return-value]
            translate = self.codec.translate
            return KeyColumns([translate(key, translation) for key in candidates.keys], candidates.parents)  # type: ignore[return-value]
        batch = getattr(self.codec, "translate_batch", None)
        if batch is not None:
            return batch(candidates, translation)
        translate = self.codec.translate
        return [(translate(key, translation), parent) for key, parent in candidates]

    def gid(self, local_id: int) -> int:
        return local_id * self.count + self.index

    def owner(self, state: Hashable) -> int:
        return self.state_hash(state) % PRIME % self.count

    def key(self, state: Hashable) -> Hashable:
        return self.canonical(state) if self.canonical else state

    def local_id(self, state: Hashable) -> int | None:
        """The local id of a (canonical) state, or None if it was never admitted here."""
        if self.exchange:
            fingerprint = np.array([self.state_hash(state)], dtype=np.int64)
            return cast(FingerprintStore, self.store).local_id(int(fingerprint.view(np.uint64)[0]))
        key = self._store_key(state)
        if isinstance(self.store, FingerprintStore):
            fingerprint, _exact = self._fingerprints([key])
            return self.store.local_id(int(fingerprint[0]))
        return self.store.local_id(key)

    def _fingerprints(self, keys: Sequence[Hashable]) -> tuple[np.ndarray, bool]:
        """The fingerprints of keys of ours (`fingerprints_of`); exchanging, the stable hashes
        of their states, which every partition computes alike (`exchange`)."""
        if self.exchange:
            fingerprint = cast(exchange.HashKeys | exchange.CodecKeys, self.hash_keys).fingerprint
            hashes = np.fromiter(map(fingerprint, keys), dtype=np.int64, count=len(keys))
            return hashes.view(np.uint64), False
        return fingerprints_of(keys, self.int_tuple_keys)

    def stored_levels(self) -> tuple[int, list[int]]:
        """The states a checkpoint stores and where each level starts: with fingerprints, the
        next level's states already stored are saved as waiting candidates instead (see
        `ahead_keys`), so that a checkpoint is the same whichever store took it."""
        if self.exact or not self.level_starts:
            return len(self.store), self.level_starts
        return self.level_starts[-1], self.level_starts[:-1]

    def ahead_keys(self) -> Sequence[Hashable] | Frontier:
        """With fingerprints, the keys of the states stored for the level being filled."""
        if self.exact or not self.level_starts:
            return []
        if self.exchange:  # (its keys are `HashKeys`'; a checkpoint saves the plain codec's)
            return exchange.DenseKeys(self.ahead, self.hash_keys)  # type: ignore[return-value, arg-type]
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

    def carried(self) -> int:
        """How many of this partition's own candidates wait for the next level."""
        return sum(len(batch[0]) for batch in self.carry) + len(self.ahead_keys()) + len(self.foreign)

    def initial_candidates(self) -> list[Batch]:
        """The initial states as level-1 batches for the other partitions (this partition
        keeps its own)."""
        try:
            return self._initial_candidates()
        except Exception as error:
            raise model_raised(error) from error

    def _initial_candidates(self) -> list[Batch]:
        outbound: list[Batch] = [empty_batch() for _ in range(self.count)]
        constraint = self.model.constraint
        for position, state in enumerate(self.model.initial_states()):
            self.generated += 1
            if constraint is not None and not constraint(state):
                self._check_outside(state, 1, -1, position)  # as TLC: checked, not stored
                continue
            key = self.key(state)
            owner = self.owner(key)
            if self.whole and self.encode and self.decode:  # own as states, others' as keys
                key = self.decode(self.encode(key)) if owner == self.index else self.encode(key)
            elif self.encode and (owner == self.index or self.wire):
                key = self.encode(key)  # own candidates, and all of a wire codec's, as keys
            cast(list, outbound[owner][0]).append((key, -1))
        return self._keep_own(self._with_tables(outbound))

    def step(self, inbound: list, level: int, tick: Callable[[], bool] | None = None):
        """Admit the candidates of this level (`inbound` from other partitions, and this
        partition's own), expand the new states, and return the next level's batches for the
        other partitions. Exchanging (`exchange`), `inbound` are the answers to this
        partition's queries, and the batches returned hold the states it ships."""
        if self.exchange:
            return self._step_exchanging(inbound, level, tick)
        self._settle_edges()
        try:
            first, fresh = self._admit(inbound, level)
            self.carry = []
            self.level_size = len(fresh)
            if self.exact:
                expanded = self._expand(first, fresh, level, tick)
            else:
                self.level_starts.append(len(self.store))  # the next level's: stored as found
                expanded = self._expand_fingerprinted(first, fresh, level, tick)
                if type(fresh) is Frontier:
                    fresh.close()  # (its spill file, if it had one: the level is expanded)
        except Exception as error:  # in the model's code, or ours on what the model gave
            raise model_raised(error) from error
        return self._keep_own(expanded)

    def _step_exchanging(self, answers: list, level: int, tick: Callable[[], bool] | None) -> list[Batch]:
        try:
            exchange.receive_answers(self, answers)
            self._settle_edges()
            while len(self.level_starts) < level:
                self.level_starts.append(len(self.store))
            first = self.level_starts[level - 1]
            from_dense = cast(exchange.HashKeys | exchange.CodecKeys, self.hash_keys).from_dense
            for candidates, repeats, _tables in self.carry:  # a seed's, or a checkpoint's
                candidates = [(from_dense(key), parent) for key, parent in candidates]
                self._admit_batch(candidates, repeats, level, [], encoded=True)
            self.carry = []
            fresh, self.ahead = self.ahead, Frontier()
            self.level_starts.append(len(self.store))  # the next level's: stored as found
            foreign, gids = self.foreign, self.foreign_gids
            self.foreign, self.foreign_gids = Frontier(), array("q")
            states = exchange.frontier(first, fresh, foreign, gids, self.count, self.index)
            shipped = exchange.expand(self, states, level, tick)
            for done in (fresh, foreign):
                if type(done) is Frontier:
                    done.close()
        except ModelError:  # (ours: two field values with one hash, `exchange.HashKeys`)
            raise
        except Exception as error:  # in the model's code, or ours on what the model gave
            raise model_raised(error) from error
        return exchange.batches_of(self, shipped)

    def _keep_own(self, outbound: list[Batch]) -> list[Batch]:
        self.carry.append(outbound[self.index])
        outbound[self.index] = empty_batch()
        return outbound

    def _with_tables(self, outbound: list[Batch]) -> list[Batch]:
        """Attach, to each non-empty batch for another partition, our table entries that
        partition has not received yet (wire codecs only)."""
        if not self.wire:
            return outbound
        for owner, (candidates, repeats, _) in enumerate(outbound):
            if candidates and owner != self.index:
                self.sent[owner], delta = self.codec.delta(self.sent[owner])
                outbound[owner] = (candidates, repeats, (self.index, delta))
        return outbound

    def _admit(self, inbound: list[Batch], level: int) -> tuple[int, list[Hashable]]:
        """Admit this level's candidates; return the first new local id and the new keys
        (their local ids follow on from it). Keys, not states: a level's states are decoded one
        at a time as they are expanded, so a wide level costs 8 bytes a state, not a state.
        `inbound` is emptied as it is admitted."""
        while len(self.level_starts) < level:
            self.level_starts.append(len(self.store))
        first = self.level_starts[level - 1] if not self.exact else len(self.store)
        fresh: list[Hashable] = []  # (with fingerprints, `_admit_batch` stores them instead)
        for position, (candidates, repeats, tables) in enumerate(inbound):
            # Admitted, a batch is not needed any more: let go of it now, not once the level
            # is expanded (a wide level's batches would stay beside everything it sends).
            inbound[position] = empty_batch()
            if tables is not None:  # another partition's keys, and its new table entries
                source, delta = tables  # (tables come only to a wire partition: translations)
                self.codec.absorb(self.translations[source], delta)  # type: ignore[index]
                candidates = self._translated(candidates, self.translations[source])  # type: ignore[index]
                self._admit_batch(candidates, repeats, level, fresh, encoded=True)
            else:
                self._admit_batch(candidates, repeats, level, fresh, encoded=self.wire)
        for candidates, repeats, _ in self.carry:
            self._admit_batch(candidates, repeats, level, fresh, encoded=True)
        if not self.exact:  # every state of this level is stored: ids from `first` on
            fresh = self.ahead_keys()  # type: ignore[assignment]  # a sequence of keys
            self.ahead = Frontier()
        return first, fresh

    def _admit_batch(self, candidates, repeats, level: int, fresh: list, encoded: bool) -> None:
        """Admit one batch; `encoded` batches (this partition's own, or translated) hold keys."""
        if not self.exact:
            if type(candidates) is Columns and (self.encode is None or encoded):  # packed keys
                hashed = cast(FingerprintStore, self.store).hashed  # (else the keys are not needed)
                keys = candidates.keys.tolist() if hashed else []
                stored = self._store_own(keys, candidates.parents, False, (candidates.keys, True))
            elif type(candidates) is KeyColumns:
                keys = candidates.keys
                if not encoded and self.encode:
                    keys = [self.encode(state) for state in keys]
                stored = self._store_own(keys, candidates.parents, False)
                if self.edge_sources is not None:
                    self._record_edges(candidates.parents, stored, repeats)
                return
            else:
                encode = None if encoded else self.encode
                keys = [encode(state) if encode else state for state, _ in candidates]
                stored = self._store_own(keys, [parent for _, parent in candidates], edges=False)
            if self.edge_sources is not None:
                for (_, parent), target in zip(candidates, stored):
                    if parent >= 0:
                        self.edge_sources.append(parent)
                        self.edge_targets.append(target)  # type: ignore[union-attr]  # with sources
                if type(repeats) is Repeats and len(repeats):  # columns: appended in numpy
                    into = np.frombuffer(repeats.positions, dtype=np.int64)
                    sources = np.frombuffer(repeats.parents, dtype=np.int64)
                    self.edge_sources.frombytes(sources.astype(np.int32).tobytes())
                    targets = np.asarray(stored, dtype=np.int32)[into]
                    self.edge_targets.frombytes(targets.tobytes())  # type: ignore[union-attr]
                else:
                    for position, parent in repeats:
                        self.edge_sources.append(parent)
                        self.edge_targets.append(stored[position])  # type: ignore[union-attr]
            return
        store = cast(VisitedStore, self.store)
        ids = store.ids
        parents = store.parents
        indexed = store.indexed
        edge_sources, edge_targets = self.edge_sources, self.edge_targets
        encode = None if encoded else self.encode
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

    def _record_edges(self, parents: np.ndarray, stored: list[int], repeats: Repeats) -> None:
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

    def _check(self, state: Hashable, gid: int, level: int) -> None:
        all_hold = self.all_hold
        if all_hold is None or not all_hold(state):
            first_bad = self.first_bad
            for invariant in self.invariants:
                if invariant.name not in first_bad and not invariant.holds(state):
                    first_bad[invariant.name] = (level, gid, -1)
                    self._stop_if_first()
        if not self.goals:
            return
        if gid % self.count != self.index:  # exchanging: another owner's state, held here
            reports = self.queries.reports[gid % self.count]  # type: ignore[index]  # (with goals)
            reports.gids.append(gid)
            reports.flags.extend(1 if goal(state) else 0 for goal in self.goals)
            return
        local = gid // self.count
        for flags, goal in zip(self.goal_flags, self.goals):
            if local == len(flags):  # (always, but where partitions exchange fingerprints)
                flags.append(1 if goal(state) else 0)
                continue
            if local > len(flags):
                flags.extend(bytes(local + 1 - len(flags)))
            flags[local] = 1 if goal(state) else 0

    def _check_outside(self, state: Hashable, level: int, parent: int, position: int) -> None:
        """Check the invariants of a state outside the constraints (TLC checks each one every
        time it is generated); a violation is recorded by its parent and position."""
        all_hold = self.all_hold
        if all_hold is None or not all_hold(state):
            first_bad = self.first_bad
            for invariant in self.invariants:
                if invariant.name not in first_bad and not invariant.holds(state):
                    first_bad[invariant.name] = (level, parent, position)
                    self._stop_if_first()

    def _stop_if_first(self) -> None:
        if self.stop_at_first:
            self.stopped = True
            self.stop_reason = "stopped at the first violation (--stop-at-first)"

    def _expand(self, first: int, fresh: list, level: int, tick: Callable[[], bool] | None) -> list[Batch]:
        # The hot loop. A successor is first looked up among this partition's states: a known
        # one is dropped at once (or, where edges are recorded, becomes an edge into it). The
        # others are deduplicated in `seen`, and only a first sighting pays for its owner (a
        # hash of the state) and joins that owner's batch; where edges are recorded, a later
        # sighting from another parent is a repeat (two ints). Without edges, `seen` outlives
        # the level for states of other partitions: each is sent to its owner once per run.
        count, own = self.count, self.index
        outbound: list[list[Candidate]] = [[] for _ in range(count)]
        repeats = [no_repeats() for _ in range(count)]  # edges into candidates already listed
        keep_edges = self.edge_sources is not None
        # key -> its owner; with edges, its position in the owner's batch too, as one int
        # (`position * count + owner`: a tuple would cost 56 bytes a successor sent).
        seen: dict = {} if keep_edges or count == 1 else self.forwarded
        edge_sources, edge_targets = self.edge_sources, self.edge_targets
        known = cast(VisitedStore, self.store).ids
        # A wire codec's keys travel anywhere, so every successor is encoded at once; another
        # codec's keys mean nothing elsewhere, so only this partition's own are encoded. Where
        # the store keeps states whole, a successor is encoded only when first sighted.
        whole = self.whole
        encode = self.encode if self.wire else None
        encode_own = self.encode if self.encode and not self.wire else None
        # The plain codec's encoding of a tuple state, inlined: a method call per successor
        # cost as much as the encoding itself. (Bound per step: a restore refills the table.)
        # `plain_map` is straight-line code for the length of this level's first key (see
        # `tuple_mapper`); a tuple of another length raises ValueError: the general path.
        plain_map = tuple_mapper(len(fresh[0]) if fresh and type(fresh[0]) is tuple else 0)
        plain_ids = self.codec.values.ids if self.key_hash is not None else None
        part_hashes = self.codec.value_hashes() if self.key_hash is not None else None
        key_hash, state_hash = self.key_hash, self.state_hash
        canonical = self.canonical
        decode, check = self.decode, self._check
        if whole:  # states as they come: encoded (by `plain_ids`) on first sighting only
            sight_ids, plain_ids, decode = plain_ids, None, None
            copy_of, wire_encode, encode = self.decode, self.encode, None
            part_values = self.codec.values.values
        successors = self.model.successors
        constraint, action_constraint = self.model.constraint, self.model.action_constraint
        constrained = constraint is not None or action_constraint is not None
        check_deadlock = self.model.deadlock_is_error
        taken: list[str] | None = [] if self.coverage is not None else None  # every action taken
        found: list[str] | None = [] if self.coverage is not None else None  # and each new state's
        generated = 0
        for expanded, key in enumerate(fresh):
            if self.stopped or (tick is not None and expanded % TICK_EVERY == TICK_EVERY - 1 and tick()):
                self.stopped = True
                break
            gid = (first + expanded) * count + own
            # The interned copy: shares its parts with every equal part (and encodes fast).
            state = decode(key) if decode else key
            check(state, gid, level)
            before = generated
            for action, successor in successors(state):
                generated += 1
                if taken is not None:
                    taken.append(action)
                if constrained and not self._inside(state, action, successor):
                    self._check_outside(successor, level + 1, gid, generated - before - 1)
                    continue
                world = canonical(successor) if canonical else successor
                if plain_ids is not None and type(world) is tuple:
                    try:
                        key = plain_map(world, plain_ids)  # as PlainCodec.encode
                    except (KeyError, ValueError):  # a value never seen, or another length
                        key = encode(world)  # type: ignore[misc]  # the plain codec is a wire codec
                elif encode_own:
                    key = encode_own(world) if self.owner(world) == own else world
                else:
                    key = encode(world) if encode else world
                local = known.get(key)
                if local is not None:  # already one of ours
                    if keep_edges:  # (the edge arrays are not None exactly then)
                        edge_sources.append(gid)  # type: ignore[union-attr]
                        edge_targets.append(local)  # type: ignore[union-attr]
                    continue
                sighted = seen.get(key)
                if sighted is None:
                    if whole:  # the wire key; our own, and the sightings we keep, interned
                        try:  # the plain codec's encode, owner_hash and decode, inlined
                            if type(world) is not tuple or part_hashes is None:
                                raise ValueError
                            key = plain_map(world, sight_ids)
                            owner = hash(plain_map(key, part_hashes)) % PRIME % count
                            world = plain_map(key, part_values)
                        except (KeyError, IndexError, ValueError):  # (as below)
                            key = wire_encode(world)  # type: ignore[misc]  # whole: a wire codec
                            if key_hash is not None:
                                owner = key_hash(key) % PRIME % count
                            else:
                                owner = state_hash(world) % PRIME % count
                            world = copy_of(key)  # type: ignore[misc]  # whole: a codec
                        batch = outbound[owner]
                        seen[world] = len(batch) * count + owner if keep_edges else owner
                        batch.append((world if owner == own else key, gid))
                        continue
                    if count == 1:
                        owner = 0
                        if found is not None:  # (coverage: one partition, so a first sighting is new)
                            found.append(action)
                    elif part_hashes is not None and type(world) is tuple:
                        try:  # inlined PlainCodec.owner_hash of a plain tuple: as owner_of
                            owner = hash(plain_map(key, part_hashes)) % PRIME % count
                        except (IndexError, ValueError):  # a value interned since the step
                            # began, or a tuple of another length
                            owner = key_hash(key) % PRIME % count  # type: ignore[misc]  # as part_hashes
                    elif key_hash is not None:
                        owner = key_hash(key) % PRIME % count  # as owner_of, from the tables
                    else:
                        owner = state_hash(world) % PRIME % count  # as owner_of
                    batch = outbound[owner]
                    # (Without edges only "sighted" matters: a small int costs no allocation.)
                    seen[key] = len(batch) * count + owner if keep_edges else owner
                    batch.append((key, gid))
                elif keep_edges:
                    position, owner = divmod(sighted, count)
                    if outbound[owner][position][1] != gid:
                        repeats[owner].positions.append(position)
                        repeats[owner].parents.append(gid)
            if check_deadlock and generated == before and DEADLOCK not in self.first_bad:
                self.first_bad[DEADLOCK] = (level, gid, -1)
                self._stop_if_first()
        self.generated += generated
        if self.coverage is not None:
            self.coverage[0].update(taken)  # type: ignore[arg-type]  # lists with coverage
            self.coverage[1].update(found)  # type: ignore[arg-type]
        if seen is self.forwarded:  # our own states are in the store from the next level on
            for key, _parent in outbound[own]:
                del seen[key]
        return self._with_tables([(batch, extra, None) for batch, extra in zip(outbound, repeats)])

    def _store_own(
        self,
        keys: list,
        parents: list | np.ndarray,
        edges: bool,
        fingerprinted: tuple[np.ndarray, bool] | None = None,
        actions: list[str] | None = None,
    ) -> list[int]:
        """Store a chunk of this partition's keys with their parents' gids, as states of the
        level being filled; with `edges`, every key is an edge from its parent. Returns each
        key's id.

        While every fingerprint is its key (ints below 2**64: packed states), the store holds
        the level's keys itself and nothing else is kept: a wide level costs no memory beyond
        the store. From the first hashed key on, the new keys are listed in `ahead`."""
        fingerprints, exact = fingerprinted or self._fingerprints(keys)
        store = cast(FingerprintStore, self.store)
        if not exact and not store.hashed:  # the first hashed chunk: list the level so far
            self.ahead = Frontier(store.stored()[self.level_starts[-1] :].tolist())
        ids, new = store.add(fingerprints, parents, hashed=not exact)
        if store.hashed:
            self.ahead.extend(compress(keys, new.tolist()))
        if actions is not None:  # (coverage: the action that found each new state)
            self.coverage[1].update(compress(actions, new.tolist()))  # type: ignore[index]
        listed = ids.tolist()
        if edges:
            self.edge_sources.extend(parents)  # type: ignore[union-attr]  # kept with goals
            self.edge_targets.extend(listed)  # type: ignore[union-attr]
        return listed

    def _expand_fingerprinted(
        self, first: int, fresh: list, level: int, tick: Callable[[], bool] | None
    ) -> list[Batch]:
        # The hot loop with a fingerprint store. This partition's own successors are gathered
        # and stored a chunk at a time (`_store_own`: numpy probes the table for the whole
        # chunk), becoming the next level's states at once; another partition's are gathered a
        # chunk at a time too, deduplicated for this level (`Outbound`) and sent to their
        # owner, which stores them on arrival.
        count, own = self.count, self.index
        outbound: list[list[Candidate]] = [[] for _ in range(count)]
        keep_edges = self.edge_sources is not None
        # States that are their own keys (ints, no codec) are placed by their hash: for ints in
        # [0, 2**64) numpy computes it for a whole chunk (`_route_in_bulk`), so that on several
        # workers a successor costs what it costs on one.
        in_bulk = count > 1 and not keep_edges and self.codec is None and self.partition_key is None
        sent = FingerprintStore() if in_bulk else None  # other partitions' states sent this level
        # Any other partition's successors, with their parents' gids and their owners.
        others = Outbound(count, own, keep_edges) if count > 1 and not in_bulk else None
        other_keys: list = []
        other_parents: list[int] = []
        other_owners: list[int] = []
        columns: list[list] = [[] for _ in range(count)]  # what `_route_in_bulk` sends, as arrays
        taken: list[str] | None = [] if self.coverage is not None else None  # every action taken
        actions: list[str] | None = [] if self.coverage is not None else None  # each key's action
        keys: list = []  # own successors of the chunk, and their parents' gids
        parents: list[int] = []
        # A wire codec's keys travel anywhere, so every successor is encoded at once; another
        # codec's keys mean nothing elsewhere, so only this partition's own are encoded.
        encode = self.encode if self.wire or count == 1 else None
        encode_own = self.encode if self.encode and not self.wire and count > 1 else None
        plain_map = tuple_mapper(len(fresh[0]) if fresh and type(fresh[0]) is tuple else 0)
        plain_ids = self.codec.values.ids if isinstance(self.codec, PlainCodec) else None
        part_hashes = self.codec.value_hashes() if self.key_hash is not None and count > 1 else None
        key_hash, state_hash = self.key_hash, self.state_hash
        canonical = self.canonical
        decode, check = self.decode, self._check
        successors = self.model.successors
        constraint, action_constraint = self.model.constraint, self.model.action_constraint
        constrained = constraint is not None or action_constraint is not None
        check_deadlock = self.model.deadlock_is_error
        generated = 0
        for expanded, key in enumerate(fresh):
            if self.stopped or (tick is not None and expanded % TICK_EVERY == TICK_EVERY - 1 and tick()):
                self.stopped = True
                break
            gid = (first + expanded) * count + own
            state = decode(key) if decode else key
            check(state, gid, level)
            before = generated
            for action, successor in successors(state):
                generated += 1
                if taken is not None:
                    taken.append(action)
                if constrained and not self._inside(state, action, successor):
                    self._check_outside(successor, level + 1, gid, generated - before - 1)
                    continue
                world = canonical(successor) if canonical else successor
                if plain_ids is not None and type(world) is tuple:
                    try:
                        key = plain_map(world, plain_ids)  # as PlainCodec.encode
                    except (KeyError, ValueError):  # a value never seen, or another length
                        key = self.encode(world)  # type: ignore[misc]  # the plain codec's
                elif encode_own:
                    key = encode_own(world) if self.owner(world) == own else world
                else:
                    key = encode(world) if encode else world
                if count == 1 or in_bulk:
                    owner = own
                elif part_hashes is not None and type(world) is tuple:
                    try:  # inlined PlainCodec.owner_hash of a plain tuple: as owner_of
                        owner = hash(plain_map(key, part_hashes)) % PRIME % count
                    except (IndexError, ValueError):  # a value interned since the step began
                        owner = key_hash(key) % PRIME % count  # type: ignore[misc]  # as part_hashes
                elif key_hash is not None:
                    owner = key_hash(key) % PRIME % count
                else:
                    owner = state_hash(world) % PRIME % count
                if owner == own:
                    keys.append(key)
                    parents.append(gid)
                    if actions is not None:
                        actions.append(action)
                    continue
                other_keys.append(key)
                other_parents.append(gid)
                other_owners.append(owner)
            if check_deadlock and generated == before and DEADLOCK not in self.first_bad:
                self.first_bad[DEADLOCK] = (level, gid, -1)
                self._stop_if_first()
            if len(keys) >= FINGERPRINT_CHUNK:
                if sent is not None:
                    self._route_in_bulk(keys, parents, outbound, columns, sent)
                else:
                    self._store_own(keys, parents, keep_edges, actions=actions)
                keys, parents, actions = [], [], (None if actions is None else [])
            if len(other_keys) >= FINGERPRINT_CHUNK:
                cast(Outbound, others).add(other_keys, other_parents, other_owners)
                other_keys, other_parents, other_owners = [], [], []
        if keys and sent is not None:
            self._route_in_bulk(keys, parents, outbound, columns, sent)
        elif keys:
            self._store_own(keys, parents, keep_edges, actions=actions)
        self.generated += generated
        if self.coverage is not None:
            self.coverage[0].update(taken)  # type: ignore[arg-type]  # a list with coverage
        if others is not None:
            if other_keys:
                others.add(other_keys, other_parents, other_owners)
            return self._with_tables(cast(list, others.batches()))
        batches = [_joined(batch, pieces) for batch, pieces in zip(outbound, columns)]
        return self._with_tables([(batch, no_repeats(), None) for batch in batches])

    def _route_in_bulk(
        self, keys: list, parents: list, outbound: list, columns: list, sent: FingerprintStore
    ) -> None:
        """Place a chunk of successors that are their own keys: store this partition's, and
        add each other partition's not yet sent this level to its owner's batch (`columns`, as
        arrays, for ints in [0, 2**64); else `outbound`, as pairs). An owner is
        `stable_hash(key) % PRIME % count`, as `owner_of`; an int's hash is itself modulo the
        Mersenne prime 2**61 - 1, so for ints in [0, 2**64) it is computed in numpy."""
        fingerprints, exact = fingerprints_of(keys)
        if exact:
            owners = fingerprints % np.uint64(MERSENNE_61) % np.uint64(PRIME) % np.uint64(self.count)
        else:
            owners = np.fromiter(
                (stable_hash(key) % PRIME % self.count for key in keys), dtype=np.uint64, count=len(keys)
            )
        mine = owners == self.index
        parent_ids = np.array(parents, dtype=np.int64)
        if mine.any():
            # The keys themselves are needed only once the store lists them (`_store_own`).
            hashed = cast(FingerprintStore, self.store).hashed or not exact
            own_keys = list(compress(keys, mine.tolist())) if hashed else []
            self._store_own(own_keys, parent_ids[mine], False, (fingerprints[mine], exact))
        others = np.flatnonzero(~mine)
        if not others.size:
            return
        _ids, first_sent = sent.add(fingerprints[others], parent_ids[others], hashed=not exact)
        going = others[first_sent]
        if exact:  # the fingerprints are the keys: the batch is two arrays
            going_parents = parent_ids[going]
            going_owners = owners[going]
            for owner in range(self.count):
                if owner != self.index:
                    to_owner = going_owners == owner
                    columns[owner].append((fingerprints[going][to_owner], going_parents[to_owner]))
            return
        for i, owner in zip(going.tolist(), owners[going].tolist()):
            outbound[owner].append((keys[i], parents[i]))

    def _inside(self, state: Hashable, action: str, successor: Hashable) -> bool:
        """Whether a successor is inside the state and action constraints (TLC's CONSTRAINT
        and ACTION_CONSTRAINT)."""
        model = self.model
        return (model.constraint is None or model.constraint(successor)) and (
            model.action_constraint is None or model.action_constraint(state, action, successor)
        )


def _joined(candidates: list, pieces: list) -> list | Columns:
    """One partition's outbound candidates: the arrays `_route_in_bulk` gathered as `Columns`,
    or, in the rare level that also sent keys as pairs (ints outside [0, 2**64)), all as pairs."""
    if not pieces:
        return candidates
    columns = joined_columns(pieces)
    return candidates + list(columns) if candidates else columns


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


# How `model_raised`'s line starts: the search's own report of an exception in the model's code
# (`search` then locates the state again, `model_fault`).
MODEL_RAISED = "the model raised"


def model_raised(error: Exception) -> ModelError:
    """One line for an exception raised while exploring: the function it came from and the
    state (and the last action) being expanded.

    Nothing in the hot loop records where it is: the state and action are read, after the
    fact, from the locals of the expanding frame in the exception's traceback."""
    frames, tb = [], error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    where = frames[-1].f_code.co_name if frames else "?"
    parts = [f"{MODEL_RAISED} {type(error).__name__}: {' '.join(str(error).split())[:300]} in {where}()"]
    for frame in reversed(frames):
        if frame.f_code.co_name in (
            "_expand",
            "_expand_fingerprinted",
            "expand",
            "_initial_candidates",
            "_admit",
        ):
            state, action = frame.f_locals.get("state"), frame.f_locals.get("action")
            if state is not None:
                parts.append(f"while expanding state {short(state, 120)}")
            if action is not None:
                parts.append(f"(the last action it yielded: {short(action, 120)})")
            break
    return ModelError(" ".join(parts))
