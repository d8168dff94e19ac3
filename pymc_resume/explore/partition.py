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
from bisect import bisect_right
from collections.abc import Callable, Hashable

from pymc_resume.explore.protocol import Model
from pymc_resume.explore.result import DEADLOCK
from pymc_resume.explore.visited import VisitedStore

Candidate = tuple[Hashable, int]  # (state key, parent global id)

PROTOCOL = 5

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

    def __len__(self) -> int:
        return len(self.store)

    def _bind_codec(self) -> None:
        self.encode = self.codec.encode if self.codec else None
        self.decode = self.codec.decode if self.codec else None

    # Everything a partition knows, except the model: what a checkpoint saves.
    SAVED = ("codec", "store", "goal_flags", "edge_sources", "edge_targets", "first_bad",
             "level_starts", "generated")

    def snapshot(self) -> bytes:
        return pickle.dumps({name: getattr(self, name) for name in self.SAVED}, PROTOCOL)

    def restore(self, data: bytes) -> None:
        for name, value in pickle.loads(data).items():
            setattr(self, name, value)
        self._bind_codec()

    def gid(self, local_id: int) -> int:
        return local_id * self.count + self.index

    def owner(self, key: Hashable) -> int:
        return hash(key) % self.count

    def key(self, state: Hashable) -> Hashable:
        return self.canonical(state) if self.canonical else state

    def local_id(self, state: Hashable) -> int | None:
        """The local id of a (canonical) state, or None if it was never admitted here."""
        return self.store.ids.get(self.encode(state) if self.encode else state)

    def initial_candidates(self) -> list[list[Candidate]]:
        """The initial states, sorted by owner, as the inbound batches of level 1."""
        outbound: list[list[Candidate]] = [[] for _ in range(self.count)]
        for state in self.model.initial_states():
            self.generated += 1
            key = self.key(state)
            outbound[self.owner(key)].append((key, -1))
        return outbound

    def step(self, inbound: list[Candidate], level: int, tick: Callable[[], bool] | None = None):
        """Admit `inbound` (candidate states of this level), expand the new ones, return the
        candidates of the next level sorted by owning partition."""
        fresh = self._admit(inbound, level)
        return self._expand(fresh, level, tick)

    def level_of(self, local_id: int) -> int:
        """The breadth-first level (1 = initial) at which a local state was admitted."""
        return bisect_right(self.level_starts, local_id)

    def _admit(self, inbound: list[Candidate], level: int) -> list[tuple[int, Hashable]]:
        while len(self.level_starts) < level:
            self.level_starts.append(len(self.store))
        ids = self.store.ids
        parents = self.store.parents
        count, index = self.count, self.index
        edge_sources, edge_targets = self.edge_sources, self.edge_targets
        encode, decode = self.encode, self.decode
        fresh = []
        for state, parent in inbound:
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
            if edge_sources is not None and parent >= 0:
                edge_sources.append(parent)
                edge_targets.append(local)
        return fresh

    def _check(self, state: Hashable, gid: int, level: int) -> None:
        first_bad = self.first_bad
        for invariant in self.invariants:
            if invariant.name not in first_bad and not invariant.holds(state):
                first_bad[invariant.name] = (level, gid)
        for flags, goal in zip(self.goal_flags, self.goals):
            flags.append(1 if goal(state) else 0)

    def _expand(self, fresh, level: int, tick: Callable[[], bool] | None) -> list[list[Candidate]]:
        # The hot loop. Successors already known locally are dropped here (when no edges are
        # recorded), so they cost one dict lookup instead of a trip through the next level.
        count = self.count
        keep_all = self.edge_sources is not None
        # Without edges to record, a dict per destination drops duplicates before they travel.
        outbound = [[] if keep_all else {} for _ in range(count)]
        local_batch = outbound[self.index]
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
                owner = hash(key) % count if count > 1 else 0
                if keep_all:
                    outbound[owner].append((key, gid))
                elif owner != self.index:
                    outbound[owner].setdefault(key, gid)
                elif (encode(key) if encode else key) not in known:
                    local_batch.setdefault(key, gid)
            if check_deadlock and generated == before and DEADLOCK not in self.first_bad:
                self.first_bad[DEADLOCK] = (level, gid)
        self.generated += generated
        return [batch if keep_all else list(batch.items()) for batch in outbound]
