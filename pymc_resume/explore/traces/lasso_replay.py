"""A recorded lasso (a temporal property's counterexample) checked against the model without a
search: its steps are steps of the model, its last state steps back to the cycle's first, the
cycle is fair, and the property is violated on the behaviour it stands for.

The semantics are `liveness`'s: a step is taken by a successor under its label (compared after
the model's `view`, never a symmetry: temporal properties are decided without one); a
`stuttering` step repeats a state where a behaviour may stay (the model's `stuttering`, or a
state with no successor inside the constraints); every state of a lasso is inside the
constraints (the graph holds no other). An action is taken on the cycle by a step with its
label that changes the state, and enabled in a state with such a successor (counting those
outside the constraints, as TLC's ENABLED, unless `enabled_within_constraints`). WF(A) needs A
taken on the cycle or disabled in one of its states; SF(A), taken or disabled in all of them.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from pymc_resume.explore.properties.liveness import STUTTERING
from pymc_resume.explore.temporal import SF, EventuallyAlways, InfinitelyOften, LeadsTo
from pymc_resume.explore.validate import ValidModel, short


def _inside(model: ValidModel, state, action, successor) -> bool:
    return (model.constraint is None or model.constraint(successor)) and (
        model.action_constraint is None or model.action_constraint(state, action, successor)
    )


def _key(model: ValidModel):
    return model.view or (lambda state: state)


def step_fault(model: ValidModel, before: Hashable, action: str, after: Hashable) -> str | None:
    """Why `before --action--> after` is not a step of a lasso of the model; None if it is."""
    key = _key(model)
    inside = [(a, s) for a, s in model.successors(before) if _inside(model, before, a, s)]
    if action == STUTTERING:
        if key(after) != key(before):
            return "a stuttering step must repeat the state"
        if not (model.stuttering or not inside or any(key(s) == key(before) for _a, s in inside)):
            return "the state may not repeat forever here (the model's stuttering is False)"
        return None
    under = [s for a, s in inside if a == action]
    if not under:
        return f"{action} is not enabled (inside the constraints) in that state"
    if not any(key(s) == key(after) for s in under):
        return f"{action} does not lead to this state (it leads to {short(under[0])})"
    return None


def unfair(model: ValidModel, cycle: Sequence[Hashable], moves: Sequence[tuple[str, Hashable]]) -> str | None:
    """The fairness condition the cycle breaks (`cycle`'s states, `moves[i]` the step from
    `cycle[i]`, the last one back to `cycle[0]`); None if it is fair."""
    key = _key(model)
    for condition in model.fairness:
        taken = any(
            action != STUTTERING and condition.matches(action) and key(target) != key(source)
            for source, (action, target) in zip(cycle, moves)
        )
        if taken:
            continue
        enabled = [
            any(
                condition.matches(a)
                and key(s) != key(state)
                and (not model.enabled_within_constraints or _inside(model, state, a, s))
                for a, s in model.successors(state)
            )
            for state in cycle
        ]
        if isinstance(condition, SF) and any(enabled):
            return f"{condition.shown()}: enabled on the cycle and never taken"
        if not isinstance(condition, SF) and all(enabled):
            return f"{condition.shown()}: enabled throughout the cycle and never taken"
    return None


def violates(prop, states: Sequence[Hashable], cycle_start: int) -> bool:
    """Whether the behaviour `states[:cycle_start]`, then `states[cycle_start:]` forever,
    violates `prop`."""
    cycle = states[cycle_start:]
    if isinstance(prop, InfinitelyOften):
        return not any(prop.p(state) for state in cycle)
    if isinstance(prop, EventuallyAlways):
        return not all(prop.p(state) for state in cycle)
    assert isinstance(prop, LeadsTo)
    if any(prop.q(state) for state in cycle):
        return False  # Q holds infinitely often: every P is followed by Q
    last_q = max((i for i, state in enumerate(states) if prop.q(state)), default=-1)
    return any(prop.p(state) for state in states[last_q + 1 :])
