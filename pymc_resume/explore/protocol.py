"""What the explorer needs from a model, and the two kinds of property it checks."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
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

    States must be hashable and immutable (tuples, named tuples, frozensets, frozen attrs or
    dataclass instances, ints, strings). `successors` yields `(action, next_state)` pairs; the
    action is a short human-readable label that appears in traces.

    Everything else is optional (`validate.validated` supplies the defaults, TLC's where TLC has
    one):

    - `invariants: Sequence[Invariant]` (none) and `reachability: Sequence[AlwaysReachable]`
      (none);
    - `deadlock_is_error: bool` (True: a state without successors is a violation);
    - `temporal` (none: `LeadsTo`, `InfinitelyOften`, `EventuallyAlways`), `fairness` (none:
      `WF`, `SF`) and `stuttering: bool` (False), decided after the search (`liveness`);
    - `constraint(state) -> bool` and `action_constraint(state, action, next_state) -> bool`
      (TLC's CONSTRAINT and ACTION_CONSTRAINT: a successor outside them is generated and
      checked against the invariants, but neither stored nor expanded);
    - `canonical(state)` (TLC's SYMMETRY: reduces the safety search, never a temporal check)
      or `view(state)` (TLC's VIEW: states equal under it are one state for every check);
    - `enabled_within_constraints: bool` (False: a step outside the constraints still enables
      its action for fairness, as TLC's ENABLED);
    - `state_fields: Sequence[str]`, names for a tuple state's positions in traces;
    - `all_hold(state) -> bool`, True only where every invariant holds (a fast path the
      explorer tries first; where it is False each invariant is asked);
    - `codec()`, a compact encoding (`codec.py`; without one the explorer derives one for plain
      states, `plain.py`), and `partition_key(state)`, for locality between workers.
    """

    def initial_states(self) -> Iterable[State]: ...

    def successors(self, state: State) -> Iterable[tuple[str, State]]: ...
