"""Shortest-trace reconstruction, the way TLC does it: the search keeps only parent ids, then
the model is replayed forward along the id path to recover states and action labels."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from pymc_resume.explore.protocol import Model
from pymc_resume.explore.result import Step

NO_PARENT = -1


def id_path(parent_of: Callable[[int], int], target: int) -> list[int]:
    """The global ids from an initial state down to `target`, following parent links."""
    path = [target]
    while (parent := parent_of(path[-1])) != NO_PARENT:
        path.append(parent)
    path.reverse()
    return path


def shortest_trace(
    model: Model,
    target: int,
    parent_of: Callable[[int], int],
    id_of: Callable[[Hashable], int | None],
    key: Callable[[Hashable], Hashable] | None = None,
    then: int = -1,
) -> tuple[Step, ...]:
    """The breadth-first path from an initial state to the state with global id `target`.

    `parent_of` and `id_of` read the visited store (wherever its partitions live); `key` maps
    a state to its store key (symmetry reduction). The path is shortest because every state's
    parent is the state that first discovered it, one level up. `then` >= 0 adds one more step:
    the target's successor at that position (a state outside the constraints is never stored,
    so it is named by its parent and position; with `target` -1, the initial state there).
    """
    if target == NO_PARENT:
        state = list(model.initial_states())[then]
        return (Step(action=None, state=state),)
    key = key or (lambda state: state)
    wanted = id_path(parent_of, target)
    state = next(s for s in model.initial_states() if id_of(key(s)) == wanted[0])
    steps = [Step(action=None, state=state)]
    for next_id in wanted[1:]:
        action, state = next(
            (action, successor)
            for action, successor in model.successors(state)
            if id_of(key(successor)) == next_id
        )
        steps.append(Step(action=action, state=state))
    if then >= 0:
        action, state = list(model.successors(state))[then]
        steps.append(Step(action=action, state=state))
    return tuple(steps)
