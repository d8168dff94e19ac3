"""The reachable state graph that temporal properties are decided on, kept without its states.

The graph is enumerated again after the safety search, breadth-first in this process, honouring
`constraint`, `action_constraint` and the symmetry (`canonical`) as the safety search does. What
is kept is what the decision reads, never a state:

- each state's id, found by its 64-bit fingerprint in a `FingerprintStore` (as the safety
  search's store: a packed model's int keys are their own fingerprints, a plain model's are
  hashed from its codec's keys), or with `exact` by the state itself in a dict;
- its parent (the state that first reached it: prefixes of lassos are shortest paths);
- its edges (`Adjacency`: target and code, in memory up to a bound and on disk beyond it);
- one bit a state for each predicate of each temporal property, one for each fairness
  condition (enabled there: some step changing the state takes it, counting the steps that
  leave the constraints, as TLC's ENABLED does, unless `enabled_within_constraints`), and one for whether a
  behaviour may stay there forever (a self edge, a state without successors, or stuttering).

Only the queue of states still to expand is held as states (and, for a plainly written model,
its codec's table of field values, each distinct value once). A lasso's states are rebuilt by
running the model again along its ids (`id_of`), as TLC rebuilds traces from fingerprints.
`exact` keeps a dict of the states instead, which saves encoding each successor and costs
memory (EWD840 with N = 8, `bench/liveness.py`: 0.93x the CPU for 1.6x the memory).
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Hashable
from itertools import compress

import attrs
import numpy as np

from pymc_resume.explore.properties.adjacency import Adjacency
from pymc_resume.explore.store.fingerprints import FingerprintStore, collision_probability, fingerprints_of
from pymc_resume.explore.store.limits import Limits
from pymc_resume.explore.store.memory import peak_bytes
from pymc_resume.explore.store.plain import PlainCodec, fits_plain_codec
from pymc_resume.explore.temporal import LeadsTo
from pymc_resume.explore.validate import ValidModel

# States expanded together: their successors are looked up in the store in one batch.
BLOCK = 2048


class OverBudget(Exception):
    """The graph pass hit a state, time or memory limit."""


@attrs.define
class Graph:
    """The reachable graph as ids in breadth-first order (a smaller id is no deeper)."""

    edges: Adjacency
    labels: list[str]  # label id -> action label
    looped: bytearray  # id -> 1 where a behaviour may stay forever (self edge, stutter)
    truths: tuple[tuple[bytearray, ...], ...]  # per temporal property, per predicate (p, q)
    enabled: tuple[bytearray, ...]  # per fairness condition, per state
    store: _ExactIds | _FingerprintIds  # a canonical state's id, and the collision bound

    @property
    def parents(self) -> array:
        """id -> the id that discovered it (-1 for an initial state)."""
        return self.store.parents

    def id_of(self, state: Hashable) -> int | None:
        """The id of a canonical state (None if it was never reached)."""
        return self.store.id_of(state)

    def __len__(self) -> int:
        return len(self.parents)

    def close(self) -> None:
        self.edges.close()


class _ExactIds:
    """Ids of states kept whole (`--exact`): no collision is possible."""

    def __init__(self) -> None:
        self.ids: dict[Hashable, int] = {}
        self.parents = array("q")

    def add(self, states: list, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each state's id, and which were seen for the first time (as `FingerprintStore.add`)."""
        ids: list[int] = []
        new: list[bool] = []
        for state, parent in zip(states, parents.tolist()):
            found = self.ids.get(state)
            new.append(found is None)
            if found is None:
                found = self.ids[state] = len(self.ids)
                self.parents.append(parent)
            ids.append(found)
        return np.array(ids, dtype=np.int64), np.array(new, dtype=bool)

    def id_of(self, state: Hashable) -> int | None:
        return self.ids.get(state)

    def risk(self) -> float | None:
        return None


class _FingerprintIds:
    """Ids of states by the fingerprint of their codec key (`fingerprints.py`)."""

    def __init__(self, model: ValidModel) -> None:
        self.store = FingerprintStore()
        if model.codec is not None:
            self.codec = model.codec()
        elif fits_plain_codec(model.model):
            self.codec = PlainCodec()
        else:
            self.codec = None
        self.int_tuples = isinstance(self.codec, PlainCodec)

    @property
    def parents(self) -> array:
        return self.store.parents

    def _fingerprints(self, states: list) -> tuple[np.ndarray, bool]:
        keys = list(map(self.codec.encode, states)) if self.codec is not None else states
        fingerprints, exact = fingerprints_of(keys, self.int_tuples)
        return fingerprints, not exact

    def add(self, states: list, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        fingerprints, hashed = self._fingerprints(states)
        return self.store.add(fingerprints, parents, hashed)

    def id_of(self, state: Hashable) -> int | None:
        fingerprints, _hashed = self._fingerprints([state])
        self.store.lookups += 1
        return self.store.local_id(int(fingerprints[0]))

    def risk(self) -> float | None:
        """A bound on the chance that two states of this pass shared a fingerprint."""
        store = self.store
        return collision_probability(len(store), store.lookups) if store.hashed else 0.0


def build_graph(
    model: ValidModel,
    canonical: Callable[[Hashable], Hashable] | None,
    limits: Limits,
    started: float,
    exact: bool = False,
) -> Graph:
    """Enumerate the reachable graph as the safety search does; OverBudget past a limit."""
    key = canonical or (lambda state: state)
    constraint, action_constraint = model.constraint, model.action_constraint
    store: _ExactIds | _FingerprintIds = _ExactIds() if exact else _FingerprintIds(model)
    predicates = [(prop.p, prop.q) if isinstance(prop, LeadsTo) else (prop.p,) for prop in model.temporal]
    truths = tuple(tuple(bytearray() for _ in pair) for pair in predicates)
    conditions = model.fairness
    enabled = tuple(bytearray() for _ in conditions)
    takes: list[tuple[bool, ...]] = []  # label id -> whether each fairness condition names it
    label_ids: dict[str, int] = {}
    edges = Adjacency()
    looped = bytearray()
    stutter = model.stuttering  # every state may repeat forever
    # TLC evaluates ENABLED without CONSTRAINT and ACTION_CONSTRAINT: a step that leaves them is
    # not an edge, but it enables its action (unless the model asks for the constrained reading).
    enabled_outside = not model.enabled_within_constraints and bool(conditions)
    outside: list[tuple[int, int]] = []  # (source id, label id) of such steps, per block

    queue: deque = deque()
    initial = [key(s) for s in model.initial_states() if constraint is None or constraint(s)]
    _ids, new = store.add(initial, np.full(len(initial), -1, dtype=np.int64))
    queue.extend(compress(initial, new.tolist()))
    try:
        while queue:
            reason = limits.exceeded(len(store.parents), started, peak_bytes())
            if reason:
                raise OverBudget(reason)
            first = len(edges)  # the id of the block's first state (the queue is in id order)
            block = [queue.popleft() for _ in range(min(BLOCK, len(queue)))]
            targets: list = []
            codes: list[int] = []
            counts: list[int] = []
            for state in block:
                for pair, truth in zip(predicates, truths):
                    for predicate, bits in zip(pair, truth):
                        bits.append(bool(predicate(state)))
                before = len(targets)
                for action, successor in model.successors(state):
                    label = label_ids.get(action)
                    if label is None:
                        label = label_ids[action] = len(label_ids)
                        takes.append(tuple(condition.matches(action) for condition in conditions))
                    if (constraint is not None and not constraint(successor)) or (
                        action_constraint is not None and not action_constraint(state, action, successor)
                    ):
                        if enabled_outside and successor != state:
                            outside.append((first + len(counts), label))  # enables, as TLC's ENABLED
                        continue
                    targets.append(key(successor))
                    codes.append(2 * label + (successor != state))  # `adjacency`'s code
                counts.append(len(targets) - before)
            per_source = np.array(counts, dtype=np.int64)
            sources = np.repeat(np.arange(first, first + len(block), dtype=np.int64), per_source)
            ids, new = store.add(targets, sources)
            queue.extend(compress(targets, new.tolist()))
            taking = np.array(takes, dtype=bool).reshape(len(takes), len(conditions))
            code_column = np.array(codes, dtype=np.int64)
            _add_edges(edges, first, per_source, ids, code_column, taking, enabled, looped, stutter)
            for source, label in outside:
                for k, takes_it in enumerate(takes[label]):
                    if takes_it:
                        enabled[k][source] = 1
            outside.clear()
        reason = limits.exceeded(len(store.parents), started, peak_bytes())
        if reason:
            raise OverBudget(reason)
    except BaseException:
        edges.close()
        raise
    return Graph(edges, list(label_ids), looped, truths, enabled, store)


def _add_edges(
    edges: Adjacency,
    first: int,
    counts: np.ndarray,
    ids: np.ndarray,
    codes: np.ndarray,
    takes: np.ndarray,
    enabled: tuple[bytearray, ...],
    looped: bytearray,
    stutter: bool,
) -> None:
    """Append the edges of the sources `first` on (`counts[i]` edges for the i-th, in order),
    and each source's looping and fairness bits (a few numpy operations a block)."""
    pairs = np.empty(2 * len(ids), dtype=np.int32)
    pairs[0::2] = ids
    pairs[1::2] = codes
    edges.add_sources(counts, pairs)
    sources = np.repeat(np.arange(len(counts)), counts)  # each edge's source, from 0
    if stutter:
        looped.extend(b"\x01" * len(counts))
    else:
        self_edges = np.bincount(sources[ids == sources + first], minlength=len(counts))
        looped.extend(((counts == 0) | (self_edges > 0)).astype(np.uint8).tobytes())
    changes = (codes & 1).astype(bool)  # the steps that change the state take their action
    for k, bits in enumerate(enabled):
        taking = changes & takes[codes >> 1, k]
        bits.extend((np.bincount(sources[taking], minlength=len(counts)) > 0).astype(np.uint8).tobytes())
