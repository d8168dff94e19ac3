"""What the explorer needs from a model, and the two kinds of property it checks."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Protocol

import attrs

State = Hashable


@attrs.frozen
class Invariant:
    """A named predicate that must hold in every reachable state."""

    name: str
    holds: Callable[[State], bool]


@attrs.frozen
class AlwaysReachable:
    """A named graph property: from every reachable state some `goal` state is reachable.

    This is TLA+'s `[]<>`-free liveness check "AG EF goal", decided on the explored graph
    itself (no timeouts): a state that cannot reach a goal state is a violation.
    """

    name: str
    goal: Callable[[State], bool]


class Model(Protocol):
    """A transition system the explorer can enumerate.

    States must be hashable and immutable (tuples or frozen attrs classes). `successors`
    yields `(action, next_state)` pairs; the action is a short human-readable label that
    appears in traces.
    """

    invariants: Sequence[Invariant]
    reachability: Sequence[AlwaysReachable]
    deadlock_is_error: bool

    def initial_states(self) -> Iterable[State]: ...

    def successors(self, state: State) -> Iterable[tuple[str, State]]: ...

    # Optional: `all_hold(state) -> bool`, True only where every invariant holds (a fast path
    # the explorer tries first; a model may memoize it). Where it is False, or absent, the
    # explorer asks each invariant.
