"""`pymc-resume explore TARGET --replay-trace FILE`: is a recorded trace a path of the model?

The file is the explorer's own `--json` output; one property's trace is read from it (each
row's `data`, see `state_json`) and replayed against the model as the search would have walked
it: the first state is an initial state, each next state is a successor of the one before under
the recorded action (compared after `canonical` when symmetry is on, as the search compares),
and every state but the last is inside the constraints (the search expands no other; the last
may be outside them, where the search still checks invariants). Then the recorded property is
judged in the last state: an invariant false there, no successor at all (deadlock), or no goal
state reachable from it (reachability, by a search from it, within `REACH_LIMIT` states). A
temporal property's lasso is checked as `lasso_replay` says: its steps, the step that closes
its cycle, the cycle's fairness, and the property violated by the behaviour.

A malformed file or a trace of another kind of property is `BadInput` (one line, exit 2); a
trace that is not a path is an outcome, naming the step and why.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Hashable

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.explore.result import DEADLOCK
from pymc_resume.explore.traces.lasso_replay import step_fault, unfair, violates
from pymc_resume.explore.traces.state_json import ModelClasses, decode
from pymc_resume.explore.validate import ValidModel, short
from pymc_resume.files import UnreadableFile, read_bounded

MAX_TRACE_BYTES = 64 * 2**20
REACH_LIMIT = 1_000_000  # states searched from the last one for a reachability property's goal
INVARIANT, REACHABILITY, TEMPORAL = "invariant", "reachability", "temporal"


@attrs.frozen
class RecordedTrace:
    """One property's trace as a file recorded it: actions (None first) and states."""

    property: str
    kind: str
    actions: tuple[str | None, ...]
    states: tuple[Hashable, ...]
    # A lasso (a temporal property's trace): the cycle's first step, and the action from the
    # last state back to it.
    cycle_start: int | None = None
    loops_back: str | None = None


@attrs.frozen
class Replay:
    """What replaying a trace showed: whether it is a path (else the step that is not, and
    why), and whether the property is violated in its last state."""

    trace: RecordedTrace
    path: bool
    step: int | None = None
    why: str | None = None
    violated: bool = False


def read_trace(file: str, model: ValidModel, property_name: str | None = None) -> RecordedTrace:
    """The trace of `property_name` (default: the first property with one) in the explorer's
    JSON output `file`, its states loaded back through the model's own classes."""
    try:
        text = read_bounded(file, MAX_TRACE_BYTES, "the trace file")
    except UnreadableFile as error:
        raise BadInput(f"--replay-trace: {error}") from None
    try:
        found = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise BadInput(f"--replay-trace: {file}: not JSON ({error})") from None
    properties = found.get("properties") if isinstance(found, dict) else None
    if not isinstance(properties, dict):
        raise BadInput(f"--replay-trace: {file}: not the JSON of `pymc-resume explore` (no properties)")
    traced = [
        name for name, verdict in properties.items() if isinstance(verdict, dict) and verdict.get("trace")
    ]
    if property_name is None:
        if not traced:
            raise BadInput(f"--replay-trace: {file}: no property has a trace (none was violated)")
        property_name = traced[0]
    elif property_name not in traced:
        having = ", ".join(traced) or "none"
        raise BadInput(f"--replay-trace: {file}: no trace of {property_name!r} (traces: {having})")
    verdict = properties[property_name]
    rows, kind = verdict["trace"], verdict.get("kind")
    where = f"--replay-trace: {file}: {property_name}"
    if not isinstance(rows, list):
        raise BadInput(f"{where}: its trace is not a list of steps")
    classes = ModelClasses(model.model)
    actions: list[str | None] = []
    states = []
    for number, row in enumerate(rows):
        if not isinstance(row, dict) or "data" not in row:
            raise BadInput(f"{where}: step {number} has no state data (written by an older version?)")
        if row["data"] is None:
            raise BadInput(
                f"{where}: step {number}'s state has parts that JSON does not carry, so it cannot be replayed"
            )
        action = row.get("action")
        if number and not isinstance(action, str):
            raise BadInput(f"{where}: step {number}'s action must be a string, got {short(action)}")
        actions.append(action if number else None)
        states.append(decode(row["data"], classes, f"{where}: step {number}"))
    if not states:
        raise BadInput(f"{where}: the trace has no step")
    for number, state in enumerate(states):
        try:
            hash(state)
        except TypeError:
            raise BadInput(f"{where}: step {number}'s state is not hashable") from None
    cycle_start, loops_back = _lasso(verdict, len(states), where) if kind == TEMPORAL else (None, None)
    return RecordedTrace(property_name, str(kind), tuple(actions), tuple(states), cycle_start, loops_back)


def _lasso(verdict: dict, length: int, where: str) -> tuple[int, str]:
    """Where a recorded lasso's cycle starts, and the action that closes it."""
    lasso = verdict.get("lasso")
    if not isinstance(lasso, dict):
        raise BadInput(f"{where}: a temporal property's trace without its lasso")
    start, back = lasso.get("loops_back_to_step"), lasso.get("loops_back_by")
    if type(start) is not int or not 0 <= start < length:
        raise BadInput(
            f"{where}: the lasso's loops_back_to_step must be a step of the trace, got {short(start)}"
        )
    if not isinstance(back, str):
        raise BadInput(f"{where}: the lasso's loops_back_by must be an action, got {short(back)}")
    return start, back


def _judge(model: ValidModel, trace: RecordedTrace) -> Callable[[Hashable], bool]:
    """Whether the last state violates the recorded property."""
    if trace.kind == INVARIANT:
        found = [p for p in model.invariants if p.name == trace.property]
        if not found:
            raise BadInput(f"--replay-trace: the model has no invariant named {trace.property!r}")
        invariant = found[0]
        return lambda state: not invariant.holds(state)
    if trace.kind == DEADLOCK:
        # As the search: a state outside the constraint is never expanded, so never a deadlock.
        return lambda state: (
            (model.constraint is None or model.constraint(state))
            and (next(iter(model.successors(state)), None) is None)
        )
    if trace.kind == REACHABILITY:
        goals = [p.goal for p in model.reachability if p.name == trace.property]
        if not goals:
            raise BadInput(f"--replay-trace: the model has no reachability property {trace.property!r}")
        return lambda state: not _reaches(model, state, goals[0])
    raise BadInput(f"--replay-trace: replaying a trace of a {trace.kind} property is not supported")


def _reaches(model: ValidModel, start: Hashable, goal: Callable[[Hashable], bool]) -> bool:
    """Whether a goal state is reachable from `start` within the constraints."""
    key = model.view or model.canonical or (lambda state: state)
    seen, queue = {key(start)}, deque([start])
    while queue:
        state = queue.popleft()
        if goal(state):
            return True
        for action, successor in model.successors(state):
            if not _inside(model, state, action, successor):
                continue
            if (k := key(successor)) not in seen:
                if len(seen) >= REACH_LIMIT:
                    raise BadInput(
                        f"--replay-trace: no goal state within {REACH_LIMIT:,} states of the last one; "
                        "run the search to decide the property"
                    )
                seen.add(k)
                queue.append(successor)
    return False


def _inside(model: ValidModel, state, action, successor) -> bool:
    return (model.constraint is None or model.constraint(successor)) and (
        model.action_constraint is None or model.action_constraint(state, action, successor)
    )


def replay(model: ValidModel, trace: RecordedTrace, symmetry: bool = True) -> Replay:
    """Replay `trace` against `model` (`symmetry`: compare states after the model's
    `canonical`, as a search with symmetry does)."""
    if trace.kind == TEMPORAL:
        return _replay_lasso(model, trace)
    violated = _judge(model, trace)
    key = model.view or (model.canonical if symmetry and model.canonical else (lambda state: state))
    last = len(trace.states) - 1
    first = trace.states[0]
    if not any(key(state) == key(first) for state in model.initial_states()):
        return Replay(trace, False, 0, "not an initial state of the model")
    if last and model.constraint is not None and not model.constraint(first):
        return Replay(trace, False, 0, "outside the constraint: the search does not expand it")
    for number in range(1, last + 1):
        before, action, state = trace.states[number - 1], trace.actions[number], trace.states[number]
        under = [successor for label, successor in model.successors(before) if label == action]
        if not under:
            return Replay(trace, False, number, f"{action} is not enabled in step {number - 1}'s state")
        wanted = key(state)
        if not any(key(successor) == wanted for successor in under):
            return Replay(
                trace,
                False,
                number,
                f"{action} does not lead to this state from step {number - 1}'s state "
                f"(it leads to {short(under[0])})",
            )
        if number < last and not _inside(model, before, action, state):
            return Replay(trace, False, number, "outside the constraints: the search does not expand it")
    return Replay(trace, True, violated=bool(violated(trace.states[-1])))


def _replay_lasso(model: ValidModel, trace: RecordedTrace) -> Replay:
    """A lasso replayed (`lasso_replay`): each step, the closing step, the cycle's fairness,
    then whether the behaviour violates the property."""
    found = [prop for prop in model.temporal if prop.name == trace.property]
    if not found:
        raise BadInput(f"--replay-trace: the model has no temporal property named {trace.property!r}")
    assert trace.cycle_start is not None and trace.loops_back is not None
    key = model.view or (lambda state: state)
    first = trace.states[0]
    if not any(key(state) == key(first) for state in model.initial_states()):
        return Replay(trace, False, 0, "not an initial state of the model")
    for number, state in enumerate(trace.states):
        if model.constraint is not None and not model.constraint(state):
            return Replay(trace, False, number, "outside the constraint: no behaviour goes through it")
        if number:
            action = trace.actions[number]
            assert action is not None
            why = step_fault(model, trace.states[number - 1], action, state)
            if why is not None:
                return Replay(trace, False, number, f"from step {number - 1}'s state: {why}")
    last, start = len(trace.states) - 1, trace.cycle_start
    why = step_fault(model, trace.states[last], trace.loops_back, trace.states[start])
    if why is not None:
        return Replay(
            trace, False, last, f"the cycle does not close ({trace.loops_back} back to step {start}): {why}"
        )
    cycle = trace.states[start:]
    moves = [(str(trace.actions[n]), trace.states[n]) for n in range(start + 1, last + 1)]
    why = unfair(model, cycle, [*moves, (trace.loops_back, trace.states[start])])
    if why is not None:
        return Replay(trace, False, start, f"the cycle is not fair: {why}")
    return Replay(trace, True, violated=violates(found[0], trace.states, start))
