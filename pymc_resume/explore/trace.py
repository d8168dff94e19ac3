"""Shortest-trace reconstruction, the way TLC does it: keep only parent ids during the search,
then replay the model forward along the id path to recover states and action labels."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from pymc_resume.explore.protocol import Model
from pymc_resume.explore.result import Step
from pymc_resume.explore.visited import VisitedStore


def shortest_trace(
    model: Model,
    store: VisitedStore,
    target_id: int,
    canonical: Callable[[Hashable], Hashable] | None = None,
) -> tuple[Step, ...]:
    """The breadth-first path from an initial state to the state with `target_id`.

    The path is shortest because ids were assigned in breadth-first order and every state's
    parent is the state that first discovered it.
    """
    key = canonical or (lambda state: state)
    wanted = store.path_to(target_id)
    state = next(s for s in model.initial_states() if store.ids.get(key(s)) == wanted[0])
    steps = [Step(action=None, state=state)]
    for next_id in wanted[1:]:
        action, state = next(
            (action, successor)
            for action, successor in model.successors(state)
            if store.ids.get(key(successor)) == next_id
        )
        steps.append(Step(action=action, state=state))
    return tuple(steps)
