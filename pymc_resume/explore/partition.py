"""One hash partition of the state space, and the level step it runs.

A partition owns the states whose key hashes to it: their ids, parents, invariant verdicts and
(for reachability properties) their incoming edges. One level of the breadth-first search is one
`step`: admit the candidate states sent to this partition, check each new one, expand it, and
sort its successors by owner into outbound batches. The step is plain data in, plain data out,
so the same partition runs in-process (one worker) or in a worker process (see `workers`).

A state's global id is `local_id * count + index`: it names its partition without a lookup.
"""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Callable, Hashable

from pymc_resume.explore.protocol import Model
from pymc_resume.explore.result import DEADLOCK
from pymc_resume.explore.visited import VisitedStore

Candidate = tuple[Hashable, int]  # (state key, parent global id)
# A batch for one partition: distinct candidates, plus the repeated edges into them as
# (index into the candidates, parent gid), so each state travels once per level, plus, where
# the keys are a wire codec's, (sender index, the sender's new table entries) or None.
Batch = tuple[list[Candidate], list[tuple[int, int]], tuple[int, object] | None]


def empty_batch() -> Batch:
    return [], [], None

PROTOCOL = 5

# Owners come from the key's hash modulo a prime, then modulo the partition count: Python hashes
# small ints to themselves, so `hash(key) % count` alone would split packed-int states by their
# lowest bit. The prime is below 2**30 so every intermediate stays a one-digit int: this costs
# 40 ns a successor, where a 64-bit multiplicative mix (Fibonacci hashing) cost 200 ns, a third
# of the two-worker overhead on TwoPhase.
PRIME = 1_000_003


def owner_of(key: Hashable, count: int, partition_key: Callable | None = None) -> int:
    """The partition that owns `key` among `count` (the same in every process of a run)."""
    where = partition_key(key) if partition_key else key
    return hash(where) % PRIME % count

# How many expansions between calls of the `tick` callback (progress, limits).
TICK_EVERY = 4096


class Partition:
    """The visited store and level step of partition `index` of `count`."""

    def __init__(
        self,
        model: Model,
        index: int = 0,
        count: int = 1,
        canonical: Callable[[Hashable], Hashable] | None = None,
    ) -> None:
        self.model = model
        self.index = index
        self.count = count
        self.canonical = canonical
        self.codec = model.codec() if hasattr(model, "codec") else None
        # Optional locality: states with equal partition keys share an owner.
        self.partition_key = getattr(model, "partition_key", None)
        # A wire codec's keys travel as they are (see `codec`): `sent` is, per destination, the
        # mark of our tables at our last batch to it; `translations` map each sender's ids.
        self.wire = self.codec is not None and hasattr(self.codec, "translate")
        self.sent: list[object | None] = [None] * count
        self.translations = [self.codec.new_translation() for _ in range(count)] if self.wire else None
        self._bind_codec()
        self.store = VisitedStore()
        self.invariants = list(model.invariants)
        # Optional fast path: a model's `all_hold(state)` is True only where every invariant
        # holds; where it is False (or absent) each invariant is asked.
        self.all_hold = getattr(model, "all_hold", None)
        self.goals = [prop.goal for prop in model.reachability]
        self.goal_flags = [bytearray() for _ in self.goals]
        # Incoming edges, recorded by the owner of the target: (source gid, target local id).
        self.edge_sources = array("i") if self.goals else None
        self.edge_targets = array("i") if self.goals else None
        self.first_bad: dict[str, tuple[int, int]] = {}  # property -> (level, gid)
        self.level_starts: list[int] = []  # local id of the first state admitted at each level
        self.generated = 0
        self.stopped = False  # a tick asked to stop in the middle of a level
        # This partition's own candidates for the next level: they never leave the process.
        self.carry: list[Batch] = []

    def __len__(self) -> int:
        return len(self.store)

    def _bind_codec(self) -> None:
        self.encode = self.codec.encode if self.codec else None
        self.decode = self.codec.decode if self.codec else None

    # Everything a partition knows, except the model: what a checkpoint saves.
    SAVED = ("codec", "store", "goal_flags", "edge_sources", "edge_targets", "first_bad",
             "level_starts", "generated", "carry", "sent", "translations")

    def snapshot(self) -> bytes:
        return pickle.dumps({name: getattr(self, name) for name in self.SAVED}, PROTOCOL)

    def restore(self, data: bytes) -> None:
        for name, value in pickle.loads(data).items():
            setattr(self, name, value)
        self._bind_codec()

    def gid(self, local_id: int) -> int:
        return local_id * self.count + self.index

    def owner(self, key: Hashable) -> int:
        return owner_of(key, self.count, self.partition_key)

    def key(self, state: Hashable) -> Hashable:
        return self.canonical(state) if self.canonical else state

    def local_id(self, state: Hashable) -> int | None:
        """The local id of a (canonical) state, or None if it was never admitted here."""
        return self.store.ids.get(self.encode(state) if self.encode else state)

    def carried(self) -> int:
        """How many of this partition's own candidates wait for the next level."""
        return sum(len(batch[0]) for batch in self.carry)

    def initial_candidates(self) -> list[Batch]:
        """The initial states as level-1 batches for the other partitions (this partition
        keeps its own)."""
        outbound: list[Batch] = [empty_batch() for _ in range(self.count)]
        for state in self.model.initial_states():
            self.generated += 1
            key = self.key(state)
            owner = self.owner(key)
            if self.encode and (owner == self.index or self.wire):
                key = self.encode(key)  # own candidates, and all of a wire codec's, as keys
            outbound[owner][0].append((key, -1))
        return self._keep_own(self._with_tables(outbound))

    def step(self, inbound: list[Batch], level: int, tick: Callable[[], bool] | None = None):
        """Admit the candidates of this level (`inbound` from other partitions, and this
        partition's own), expand the new states, and return the next level's batches for the
        other partitions."""
        first, fresh = self._admit(inbound, level)
        self.carry = []
        return self._keep_own(self._expand(first, fresh, level, tick))

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
        at a time as they are expanded, so a wide level costs 8 bytes a state, not a state."""
        while len(self.level_starts) < level:
            self.level_starts.append(len(self.store))
        first = len(self.store)
        fresh: list[Hashable] = []
        for candidates, repeats, tables in inbound:
            if tables is not None:  # another partition's keys, and its new table entries
                source, delta = tables
                self.codec.absorb(self.translations[source], delta)
                translate, translation = self.codec.translate, self.translations[source]
                candidates = [(translate(key, translation), parent) for key, parent in candidates]
                self._admit_batch(candidates, repeats, level, fresh, encoded=True)
            else:
                self._admit_batch(candidates, repeats, level, fresh, encoded=self.wire)
        for candidates, repeats, _ in self.carry:
            self._admit_batch(candidates, repeats, level, fresh, encoded=True)
        return first, fresh

    def _admit_batch(self, candidates, repeats, level: int, fresh: list, encoded: bool) -> None:
        """Admit one batch; `encoded` batches (this partition's own, or translated) hold keys."""
        ids = self.store.ids
        parents = self.store.parents
        edge_sources, edge_targets = self.edge_sources, self.edge_targets
        encode = None if encoded else self.encode
        locals_ = []
        for state, parent in candidates:
            key = encode(state) if encode else state
            local = ids.get(key)
            if local is None:
                local = len(parents)
                ids[key] = local
                parents.append(parent)
                fresh.append(key)
            if edge_sources is not None:
                locals_.append(local)
                if parent >= 0:
                    edge_sources.append(parent)
                    edge_targets.append(local)
        for position, parent in repeats:
            edge_sources.append(parent)
            edge_targets.append(locals_[position])

    def _check(self, state: Hashable, gid: int, level: int) -> None:
        all_hold = self.all_hold
        if all_hold is None or not all_hold(state):
            first_bad = self.first_bad
            for invariant in self.invariants:
                if invariant.name not in first_bad and not invariant.holds(state):
                    first_bad[invariant.name] = (level, gid)
        for flags, goal in zip(self.goal_flags, self.goals):
            flags.append(1 if goal(state) else 0)

    def _expand(self, first: int, fresh: list, level: int, tick: Callable[[], bool] | None
                ) -> list[Batch]:
        # The hot loop. A successor is first looked up among this partition's states: a known
        # one is dropped at once (or, where edges are recorded, becomes an edge into it). The
        # others are deduplicated for the level in `pending`, and only a first sighting pays for
        # its owner (a hash of the state) and joins that owner's batch; where edges are
        # recorded, a later sighting from another parent is a repeat (two ints).
        count, own = self.count, self.index
        outbound: list[list[Candidate]] = [[] for _ in range(count)]
        repeats: list[list[tuple[int, int]]] = [[] for _ in range(count)]
        pending: dict = {}  # key -> (owner, position in its batch), or just owner without edges
        keep_edges = self.edge_sources is not None
        edge_sources, edge_targets = self.edge_sources, self.edge_targets
        partition_key = self.partition_key
        known = self.store.ids
        # A wire codec's keys travel anywhere, so every successor is encoded at once; another
        # codec's keys mean nothing elsewhere, so only this partition's own are encoded.
        encode = self.encode if self.wire else None
        encode_own = self.encode if self.encode and not self.wire else None
        canonical = self.canonical
        decode, check = self.decode, self._check
        successors = self.model.successors
        check_deadlock = self.model.deadlock_is_error
        generated = 0
        for expanded, key in enumerate(fresh):
            if tick is not None and expanded % TICK_EVERY == TICK_EVERY - 1 and tick():
                self.stopped = True
                break
            gid = (first + expanded) * count + own
            # The interned copy: shares its parts with every equal part (and encodes fast).
            state = decode(key) if decode else key
            check(state, gid, level)
            before = generated
            for _action, successor in successors(state):
                generated += 1
                world = canonical(successor) if canonical else successor
                if encode_own:
                    key = encode_own(world) if self.owner(world) == own else world
                else:
                    key = encode(world) if encode else world
                local = known.get(key)
                if local is not None:  # already one of ours
                    if keep_edges:
                        edge_sources.append(gid)
                        edge_targets.append(local)
                    continue
                sighted = pending.get(key)
                if sighted is None:
                    if count == 1:
                        owner = 0
                    else:
                        where = partition_key(world) if partition_key else world
                        owner = hash(where) % PRIME % count  # as owner_of
                    batch = outbound[owner]
                    # (Without edges only "sighted" matters: a small int costs no allocation.)
                    pending[key] = (owner, len(batch)) if keep_edges else owner
                    batch.append((key, gid))
                elif keep_edges:
                    owner, position = sighted
                    if outbound[owner][position][1] != gid:
                        repeats[owner].append((position, gid))
            if check_deadlock and generated == before and DEADLOCK not in self.first_bad:
                self.first_bad[DEADLOCK] = (level, gid)
        self.generated += generated
        return self._with_tables(
            [(batch, extra, None) for batch, extra in zip(outbound, repeats)]
        )
