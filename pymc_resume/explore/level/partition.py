"""One hash partition of the state space, and the level step it runs.

A partition owns the states whose key hashes to it: their ids, parents, invariant verdicts and
(for reachability properties) their incoming edges. One level of the breadth-first search is one
`step`: admit the candidate states sent to this partition, check each new one, expand it, and
sort its successors by owner into outbound batches. The step is plain data in, plain data out,
so the same partition runs in-process (one worker) or in a worker process (see `workers`).

`Partition` is the facade the engines use; its collaborators keep the rest, and a state meets
them in this order: `keys` (how a state becomes a key, and which partition owns it),
`admission` (the visited store: a candidate admitted, or known already), `verdicts` (the
invariants and goals checked on each state expanded), `peers` (what was sent to the other
partitions and what their keys mean here); `saved` is what a snapshot saves of them.

A state's global id is `local_id * count + index`: it names its partition without a lookup.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from itertools import compress
from pathlib import Path
from typing import cast

import numpy as np

from pymc_resume.explore.level import exchange, saved
from pymc_resume.explore.level.admission import Admission
from pymc_resume.explore.level.batches import (
    Batch,
    Candidate,
    Columns,
    empty_batch,
    joined_columns,
    no_repeats,
)
from pymc_resume.explore.level.keys import Keys
from pymc_resume.explore.level.outbound import Outbound
from pymc_resume.explore.level.pacing import FINGERPRINT_CHUNK, PRIME, TICK_EVERY
from pymc_resume.explore.level.peers import Peers
from pymc_resume.explore.level.verdicts import Verdicts
from pymc_resume.explore.result import DEADLOCK
from pymc_resume.explore.snapshots.chain import Piece
from pymc_resume.explore.snapshots.increments import Marks
from pymc_resume.explore.snapshots.snapshot import Layout
from pymc_resume.explore.store.fingerprints import FingerprintStore, fingerprints_of
from pymc_resume.explore.store.frontier import Frontier
from pymc_resume.explore.store.plain import PlainCodec, tuple_mapper
from pymc_resume.explore.store.stable_hash import stable_hash
from pymc_resume.explore.store.visited import VisitedStore
from pymc_resume.explore.validate import ModelError, ValidModel, short

MERSENNE_61 = 2**61 - 1  # CPython's modulus for the hash of an int


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
        self.model, self.index, self.count, self.canonical = model, index, count, canonical
        # The store: 64-bit fingerprints of the keys (`fingerprints`), or with `exact` the
        # keys themselves (`visited`), which is what every run used before fingerprints.
        self.exact = exact
        # TLC's -coverage: per action label, successors generated and new states found (one
        # partition only: a new state of another partition is known as new only there).
        self.coverage: tuple[Counter, Counter] | None = (Counter(), Counter()) if coverage else None
        self.generated = 0  # successors generated here (and initial states), over the run
        self.level_size = 0  # states of the last level stepped
        self.keys = Keys(model, count, exact, canonical)
        self.exchange = self.keys.exchange  # partitions exchange fingerprints (`exchange`)
        goals = len(model.reachability)
        self.peers = Peers(self.keys, index, count, goals)
        self.verdicts = Verdicts(model, index, count, stop_at_first, self.peers)
        found = self.coverage[1] if self.coverage is not None else None
        self.admission = Admission(self.keys, self.peers, exact, keep_edges=goals > 0, found=found)
        # Where this partition's last snapshot piece ended: the next piece, unless a base,
        # holds only what is new since (`snapshots.increments`); None before the run's first.
        self.snapshot_marks: Marks | None = None

    # What the engines and the backward search read of the collaborators.

    @property
    def store(self) -> VisitedStore | FingerprintStore:
        return self.admission.store

    @property
    def level_starts(self) -> list[int]:
        return self.admission.level_starts

    @property
    def edge_sources(self):
        return self.admission.edge_sources

    @property
    def goals(self) -> list[Callable[[Hashable], bool]]:
        return self.verdicts.goals

    @property
    def goal_flags(self) -> list[bytearray]:
        return self.verdicts.goal_flags

    @property
    def first_bad(self) -> dict[str, tuple[int, int, int]]:
        return self.verdicts.first_bad

    @property
    def stopped(self) -> bool:
        return self.verdicts.stopped

    @property
    def stop_reason(self) -> str | None:
        return self.verdicts.stop_reason

    @property
    def queries(self) -> exchange.Queries:
        return self.peers.queries

    @property
    def ship_ratio(self) -> float:
        return self.peers.ship_ratio

    @ship_ratio.setter
    def ship_ratio(self, ratio: float) -> None:
        self.peers.ship_ratio = ratio

    def __len__(self) -> int:
        return len(self.admission.store)

    def edge_count(self) -> int:
        return self.admission.edge_count()

    def edge_chunks(self, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self.admission.edge_chunks(size)

    def gid(self, local_id: int) -> int:
        return local_id * self.count + self.index

    def local_id(self, state: Hashable) -> int | None:
        """The local id of a (canonical) state, or None if it was never admitted here."""
        return self.admission.local_id(state)

    def stored_levels(self) -> tuple[int, list[int]]:
        return self.admission.stored_levels()

    def collision_risk(self) -> float | None:
        return self.admission.collision_risk()

    def carried(self) -> int:
        """How many of this partition's own candidates wait for the next level."""
        admission = self.admission
        waiting = sum(len(batch[0]) for batch in admission.carry)
        return waiting + len(admission.ahead_keys()) + len(self.peers.foreign)

    def snapshot(self, base: bool = True) -> bytes:
        """Everything this partition knows, except the model (a `base`), or what is new since
        its last snapshot piece, as a snapshot piece's bytes."""
        return saved.snapshot_bytes(self, base)

    def write_snapshot(self, path: str | Path, base: bool = True) -> Piece:
        """This partition's snapshot piece (see `snapshot`), written at `path` a MiB at a time."""
        return saved.write_snapshot(self, path, base)

    def restore(self, pieces: Sequence[bytes], wheres: Sequence[str], layout: Layout) -> None:
        """Take the state a chain of snapshot pieces (read from `wheres`) holds, after checking
        it fits the model, this partition and the snapshot's `layout`; SnapshotError if it does
        not. A codec's tables are refilled in place: the codec itself is the model's."""
        saved.restore(self, pieces, wheres, layout)
        self.snapshot_marks = None  # (a recovered run starts a chain of its own)

    def take(self, inbound: list[Batch]) -> None:
        """Take batches sent for the next level now, before a snapshot (`saved.take`)."""
        saved.take(self, inbound)

    def initial_candidates(self) -> list[Batch]:
        """The initial states as level-1 batches for the other partitions (this partition
        keeps its own)."""
        try:
            return self._initial_candidates()
        except Exception as error:
            raise model_raised(error) from error

    def _initial_candidates(self) -> list[Batch]:
        keys = self.keys
        outbound: list[Batch] = [empty_batch() for _ in range(self.count)]
        constraint = self.model.constraint
        for position, state in enumerate(self.model.initial_states()):
            self.generated += 1
            if constraint is not None and not constraint(state):
                self.verdicts.check_outside(state, 1, -1, position)  # as TLC: checked, not stored
                continue
            key = keys.key(state)
            owner = keys.owner(key)
            if keys.whole and keys.encode and keys.decode:  # own as states, others' as keys
                key = keys.decode(keys.encode(key)) if owner == self.index else keys.encode(key)
            elif keys.encode and (owner == self.index or keys.wire):
                key = keys.encode(key)  # own candidates, and all of a wire codec's, as keys
            cast(list, outbound[owner][0]).append((key, -1))
        return self._keep_own(self.peers.with_tables(outbound))

    def step(self, inbound: list, level: int, tick: Callable[[], bool] | None = None):
        """Admit the candidates of this level (`inbound` from other partitions, and this
        partition's own), expand the new states, and return the next level's batches for the
        other partitions. Exchanging (`exchange`), `inbound` are the answers to this
        partition's queries, and the batches returned hold the states it ships."""
        if self.exchange:
            return self._step_exchanging(inbound, level, tick)
        admission = self.admission
        admission.settle_edges()
        try:
            first, fresh = admission.admit(inbound, level)
            self.level_size = len(fresh)
            if self.exact:
                expanded = self._expand(first, fresh, level, tick)
            else:
                admission.level_starts.append(len(admission.store))  # the next level's: stored as found
                expanded = self._expand_fingerprinted(first, fresh, level, tick)
                if type(fresh) is Frontier:
                    fresh.close()  # (its spill file, if it had one: the level is expanded)
        except Exception as error:  # in the model's code, or ours on what the model gave
            raise model_raised(error) from error
        return self._keep_own(expanded)

    def _step_exchanging(self, answers: list, level: int, tick: Callable[[], bool] | None) -> list[Batch]:
        try:
            shipped = exchange.step(self, answers, level, tick)
        except ModelError:  # (ours: two field values with one hash, `exchange.HashKeys`)
            raise
        except Exception as error:  # in the model's code, or ours on what the model gave
            raise model_raised(error) from error
        return exchange.batches_of(self, shipped)

    def _keep_own(self, outbound: list[Batch]) -> list[Batch]:
        """This partition's own batch kept for its next level; the others' to send."""
        self.admission.carry.append(outbound[self.index])
        outbound[self.index] = empty_batch()
        return outbound

    def _expand(self, first: int, fresh: list, level: int, tick: Callable[[], bool] | None) -> list[Batch]:
        # The hot loop. A successor is first looked up among this partition's states: a known
        # one is dropped at once (or, where edges are recorded, becomes an edge into it). The
        # others are deduplicated in `seen`, and only a first sighting pays for its owner (a
        # hash of the state) and joins that owner's batch; where edges are recorded, a later
        # sighting from another parent is a repeat (two ints). Without edges, `seen` outlives
        # the level for states of other partitions: each is sent to its owner once per run.
        # Everything the loop uses is bound to a local first, collaborators' methods included:
        # an attribute lookup a successor costs as much as the rest of the loop's bookkeeping.
        count, own = self.count, self.index
        keys, admission, verdicts = self.keys, self.admission, self.verdicts
        outbound: list[list[Candidate]] = [[] for _ in range(count)]
        repeats = [no_repeats() for _ in range(count)]  # edges into candidates already listed
        keep_edges = admission.edge_sources is not None
        # key -> its owner; with edges, its position in the owner's batch too, as one int
        # (`position * count + owner`: a tuple would cost 56 bytes a successor sent).
        seen: dict = {} if keep_edges or count == 1 else self.peers.forwarded
        edge_sources, edge_targets = admission.edge_sources, admission.edge_targets
        known = cast(VisitedStore, admission.store).ids
        # A wire codec's keys travel anywhere, so every successor is encoded at once; another
        # codec's keys mean nothing elsewhere, so only this partition's own are encoded. Where
        # the store keeps states whole, a successor is encoded only when first sighted.
        whole = keys.whole
        encode = keys.encode if keys.wire else None
        encode_own = keys.encode if keys.encode and not keys.wire else None
        owner_of_state = keys.owner
        # The plain codec's encoding of a tuple state, inlined: a method call per successor
        # cost as much as the encoding itself. (Bound per step: a restore refills the table.)
        # `plain_map` is straight-line code for the length of this level's first key (see
        # `tuple_mapper`); a tuple of another length raises ValueError: the general path.
        plain_map = tuple_mapper(len(fresh[0]) if fresh and type(fresh[0]) is tuple else 0)
        codec = keys.codec
        plain_ids = codec.values.ids if keys.key_hash is not None else None
        part_hashes = codec.value_hashes() if keys.key_hash is not None else None
        key_hash, state_hash = keys.key_hash, keys.state_hash
        canonical = self.canonical
        decode, check, inside = keys.decode, verdicts.check, self._inside
        check_outside, first_bad, deadlocked = verdicts.check_outside, verdicts.first_bad, verdicts.deadlocked
        if whole:  # states as they come: encoded (by `plain_ids`) on first sighting only
            sight_ids, plain_ids, decode = plain_ids, None, None
            copy_of, wire_encode, encode = keys.decode, keys.encode, None
            part_values = codec.values.values
        successors = self.model.successors
        constraint, action_constraint = self.model.constraint, self.model.action_constraint
        constrained = constraint is not None or action_constraint is not None
        check_deadlock = self.model.deadlock_is_error
        taken: list[str] | None = [] if self.coverage is not None else None  # every action taken
        found: list[str] | None = [] if self.coverage is not None else None  # and each new state's
        generated = 0
        for expanded, key in enumerate(fresh):
            if verdicts.stopped or (tick is not None and expanded % TICK_EVERY == TICK_EVERY - 1 and tick()):
                verdicts.stopped = True
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
                if constrained and not inside(state, action, successor):
                    check_outside(successor, level + 1, gid, generated - before - 1)
                    continue
                world = canonical(successor) if canonical else successor
                if plain_ids is not None and type(world) is tuple:
                    try:
                        key = plain_map(world, plain_ids)  # as PlainCodec.encode
                    except (KeyError, ValueError):  # a value never seen, or another length
                        key = encode(world)  # type: ignore[misc]  # the plain codec is a wire codec
                elif encode_own:
                    key = encode_own(world) if owner_of_state(world) == own else world
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
            if check_deadlock and generated == before and DEADLOCK not in first_bad:
                deadlocked(level, gid)
        self.generated += generated
        if self.coverage is not None:
            self.coverage[0].update(taken)  # type: ignore[arg-type]  # lists with coverage
            self.coverage[1].update(found)  # type: ignore[arg-type]
        if seen is self.peers.forwarded:  # our own states are in the store from the next level on
            for key, _parent in outbound[own]:
                del seen[key]
        return self.peers.with_tables([(batch, extra, None) for batch, extra in zip(outbound, repeats)])

    def _expand_fingerprinted(
        self, first: int, fresh: list, level: int, tick: Callable[[], bool] | None
    ) -> list[Batch]:
        # The hot loop with a fingerprint store. This partition's own successors are gathered
        # and stored a chunk at a time (`Admission.store_own`: numpy probes the table for the
        # whole chunk), becoming the next level's states at once; another partition's are
        # gathered a chunk at a time too, deduplicated for this level (`Outbound`) and sent to
        # their owner, which stores them on arrival. (Locals bound first, as in `_expand`.)
        count, own = self.count, self.index
        keys, admission, verdicts = self.keys, self.admission, self.verdicts
        outbound: list[list[Candidate]] = [[] for _ in range(count)]
        keep_edges = admission.edge_sources is not None
        # States that are their own keys (ints, no codec) are placed by their hash: for ints in
        # [0, 2**64) numpy computes it for a whole chunk (`_route_in_bulk`), so that on several
        # workers a successor costs what it costs on one.
        in_bulk = count > 1 and not keep_edges and keys.codec is None and keys.partition_key is None
        sent = FingerprintStore() if in_bulk else None  # other partitions' states sent this level
        # Any other partition's successors, with their parents' gids and their owners.
        others = Outbound(count, own, keep_edges) if count > 1 and not in_bulk else None
        other_keys: list = []
        other_parents: list[int] = []
        other_owners: list[int] = []
        columns: list[list] = [[] for _ in range(count)]  # what `_route_in_bulk` sends, as arrays
        taken: list[str] | None = [] if self.coverage is not None else None  # every action taken
        actions: list[str] | None = [] if self.coverage is not None else None  # each key's action
        own_keys: list = []  # own successors of the chunk, and their parents' gids
        parents: list[int] = []
        # A wire codec's keys travel anywhere, so every successor is encoded at once; another
        # codec's keys mean nothing elsewhere, so only this partition's own are encoded.
        encode = keys.encode if keys.wire or count == 1 else None
        encode_own = keys.encode if keys.encode and not keys.wire and count > 1 else None
        plain_encode, owner_of_state = keys.encode, keys.owner
        plain_map = tuple_mapper(len(fresh[0]) if fresh and type(fresh[0]) is tuple else 0)
        plain_ids = keys.codec.values.ids if isinstance(keys.codec, PlainCodec) else None
        part_hashes = keys.codec.value_hashes() if keys.key_hash is not None and count > 1 else None
        key_hash, state_hash = keys.key_hash, keys.state_hash
        canonical = self.canonical
        decode, check, inside = keys.decode, verdicts.check, self._inside
        check_outside, first_bad, deadlocked = verdicts.check_outside, verdicts.first_bad, verdicts.deadlocked
        store_own, route_in_bulk = admission.store_own, self._route_in_bulk
        successors = self.model.successors
        constraint, action_constraint = self.model.constraint, self.model.action_constraint
        constrained = constraint is not None or action_constraint is not None
        check_deadlock = self.model.deadlock_is_error
        generated = 0
        for expanded, key in enumerate(fresh):
            if verdicts.stopped or (tick is not None and expanded % TICK_EVERY == TICK_EVERY - 1 and tick()):
                verdicts.stopped = True
                break
            gid = (first + expanded) * count + own
            state = decode(key) if decode else key
            check(state, gid, level)
            before = generated
            for action, successor in successors(state):
                generated += 1
                if taken is not None:
                    taken.append(action)
                if constrained and not inside(state, action, successor):
                    check_outside(successor, level + 1, gid, generated - before - 1)
                    continue
                world = canonical(successor) if canonical else successor
                if plain_ids is not None and type(world) is tuple:
                    try:
                        key = plain_map(world, plain_ids)  # as PlainCodec.encode
                    except (KeyError, ValueError):  # a value never seen, or another length
                        key = plain_encode(world)  # type: ignore[misc]  # the plain codec's
                elif encode_own:
                    key = encode_own(world) if owner_of_state(world) == own else world
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
                    own_keys.append(key)
                    parents.append(gid)
                    if actions is not None:
                        actions.append(action)
                    continue
                other_keys.append(key)
                other_parents.append(gid)
                other_owners.append(owner)
            if check_deadlock and generated == before and DEADLOCK not in first_bad:
                deadlocked(level, gid)
            if len(own_keys) >= FINGERPRINT_CHUNK:
                if sent is not None:
                    route_in_bulk(own_keys, parents, outbound, columns, sent)
                else:
                    store_own(own_keys, parents, keep_edges, actions=actions)
                own_keys, parents, actions = [], [], (None if actions is None else [])
            if len(other_keys) >= FINGERPRINT_CHUNK:
                cast(Outbound, others).add(other_keys, other_parents, other_owners)
                other_keys, other_parents, other_owners = [], [], []
        if own_keys and sent is not None:
            route_in_bulk(own_keys, parents, outbound, columns, sent)
        elif own_keys:
            store_own(own_keys, parents, keep_edges, actions=actions)
        self.generated += generated
        if self.coverage is not None:
            self.coverage[0].update(taken)  # type: ignore[arg-type]  # a list with coverage
        if others is not None:
            if other_keys:
                others.add(other_keys, other_parents, other_owners)
            return self.peers.with_tables(cast(list, others.batches()))
        batches = [_joined(batch, pieces) for batch, pieces in zip(outbound, columns)]
        return self.peers.with_tables([(batch, no_repeats(), None) for batch in batches])

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
            # The keys themselves are needed only once the store lists them (`store_own`).
            hashed = cast(FingerprintStore, self.admission.store).hashed or not exact
            own_keys = list(compress(keys, mine.tolist())) if hashed else []
            self.admission.store_own(own_keys, parent_ids[mine], False, (fingerprints[mine], exact))
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
            "admit",
        ):
            state, action = frame.f_locals.get("state"), frame.f_locals.get("action")
            if state is not None:
                parts.append(f"while expanding state {short(state, 120)}")
            if action is not None:
                parts.append(f"(the last action it yielded: {short(action, 120)})")
            break
    return ModelError(" ".join(parts))
