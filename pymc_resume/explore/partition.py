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
# (index into the candidates, parent gid), so each state travels once per level.
Batch = tuple[list[Candidate], list[tuple[int, int]]]

PROTOCOL = 5

# Owners come from the key's hash times a 64-bit odd constant (Fibonacci hashing), taking high
# bits: Python hashes small ints to themselves, so `hash(key) % count` alone would partition
# packed-int states by their lowest bit.
MIX = 0x9E3779B97F4A7C15


def owner_of(key: Hashable, count: int, partition_key: Callable | None = None) -> int:
    """The partition that owns `key` among `count` (the same in every process of a run)."""
    where = partition_key(key) if partition_key else key
    return ((hash(where) * MIX) >> 64) % count

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
        self._bind_codec()
        self.store = VisitedStore()
        self.invariants = list(model.invariants)
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
             "level_starts", "generated", "carry")

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
        return sum(len(candidates) for candidates, _ in self.carry)

    def initial_candidates(self) -> list[Batch]:
        """The initial states as level-1 batches for the other partitions (this partition
        keeps its own)."""
        outbound: list[Batch] = [([], []) for _ in range(self.count)]
        for state in self.model.initial_states():
            self.generated += 1
            key = self.key(state)
            owner = self.owner(key)
            if owner == self.index and self.encode:
                key = self.encode(key)  # this partition's own candidates travel encoded
            outbound[owner][0].append((key, -1))
        return self._keep_own(outbound)

    def step(self, inbound: list[Batch], level: int, tick: Callable[[], bool] | None = None):
        """Admit the candidates of this level (`inbound` from other partitions, and this
        partition's own), expand the new states, and return the next level's batches for the
        other partitions."""
        fresh = self._admit(inbound, level)
        self.carry = []
        return self._keep_own(self._expand(fresh, level, tick))

    def _keep_own(self, outbound: list[Batch]) -> list[Batch]:
        self.carry.append(outbound[self.index])
        outbound[self.index] = ([], [])
        return outbound

    def _admit(self, inbound: list[Batch], level: int) -> list[tuple[int, Hashable]]:
        while len(self.level_starts) < level:
            self.level_starts.append(len(self.store))
        fresh: list[tuple[int, Hashable]] = []
        for candidates, repeats in inbound:
            self._admit_batch(candidates, repeats, level, fresh, encoded=False)
        for candidates, repeats in self.carry:
            self._admit_batch(candidates, repeats, level, fresh, encoded=True)
        return fresh

    def _admit_batch(self, candidates, repeats, level: int, fresh: list, encoded: bool) -> None:
        """Admit one batch; `encoded` batches (this partition's own) already hold keys."""
        ids = self.store.ids
        parents = self.store.parents
        count, index = self.count, self.index
        edge_sources, edge_targets = self.edge_sources, self.edge_targets
        encode = None if encoded else self.encode
        decode = self.decode
        locals_ = []
        for state, parent in candidates:
            key = encode(state) if encode else state
            local = ids.get(key)
            if local is None:
                local = len(parents)
                ids[key] = local
                parents.append(parent)
                gid = local * count + index
                if decode:
                    state = decode(key)  # the interned copy: shares its parts with others
                self._check(state, gid, level)
                fresh.append((gid, state))
            if edge_sources is not None:
                locals_.append(local)
                if parent >= 0:
                    edge_sources.append(parent)
                    edge_targets.append(local)
        for position, parent in repeats:
            edge_sources.append(parent)
            edge_targets.append(locals_[position])

    def _check(self, state: Hashable, gid: int, level: int) -> None:
        first_bad = self.first_bad
        for invariant in self.invariants:
            if invariant.name not in first_bad and not invariant.holds(state):
                first_bad[invariant.name] = (level, gid)
        for flags, goal in zip(self.goal_flags, self.goals):
            flags.append(1 if goal(state) else 0)

    def _expand(self, fresh, level: int, tick: Callable[[], bool] | None) -> list[Batch]:
        # The hot loop. A dict per destination keeps the first parent of each distinct successor;
        # where edges are recorded, later parents become repeats (two ints each). Successors
        # already known locally are dropped at once when no edges are recorded.
        count = self.count
        keep_all = self.edge_sources is not None
        outbound: list[dict] = [{} for _ in range(count)]
        repeats: list[list[tuple[int, int]]] = [[] for _ in range(count)]
        own = self.index
        local_batch = outbound[own]
        partition_key = self.partition_key
        known = self.store.ids
        encode = self.encode
        canonical = self.canonical
        successors = self.model.successors
        check_deadlock = self.model.deadlock_is_error
        generated = 0
        for expanded, (gid, state) in enumerate(fresh):
            if tick is not None and expanded % TICK_EVERY == TICK_EVERY - 1 and tick():
                self.stopped = True
                break
            before = generated
            for _action, successor in successors(state):
                generated += 1
                key = canonical(successor) if canonical else successor
                if count == 1:
                    owner = 0
                else:
                    where = partition_key(key) if partition_key else key
                    owner = ((hash(where) * MIX) >> 64) % count
                if owner == own and encode:
                    key = encode(key)  # kept here until the next level: as a compact key
                if keep_all:
                    batch = outbound[owner]
                    first = batch.setdefault(key, (len(batch), gid))
                    if first[1] != gid:
                        repeats[owner].append((first[0], gid))
                elif owner != own:
                    outbound[owner].setdefault(key, gid)
                elif key not in known:
                    local_batch.setdefault(key, gid)
            if check_deadlock and generated == before and DEADLOCK not in self.first_bad:
                self.first_bad[DEADLOCK] = (level, gid)
        self.generated += generated
        if keep_all:
            return [
                ([(key, parent) for key, (_, parent) in batch.items()], extra)
                for batch, extra in zip(outbound, repeats)
            ]
        return [(list(batch.items()), []) for batch in outbound]
