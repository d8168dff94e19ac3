"""Where the model raised, as TLC reports an evaluation error: the function, the state, the
action that produced the state, and a shortest behaviour from an initial state to it.

The search runs many states at once and, with workers, in other processes: what it knows when
the model raises is a state and the last label it saw, which can be another state's (a stale
action). So once the model has raised, `locate` runs the model again from its initial states,
breadth-first, in this process and without symmetry, calling exactly what the search and the
temporal pass call (`successors`, `constraint`, `action_constraint`, each invariant, each
temporal predicate, each fairness condition's label test) in a fixed order, and stops at the
first call that raises: that state's parent pointers give the path, as the search's traces
are shortest paths. A model that does not raise again (it depends on something else than the
state) leaves the search's own line as it was.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable

import attrs

from pymc_resume.explore.result import Step
from pymc_resume.explore.store.limits import Limits
from pymc_resume.explore.temporal import LeadsTo
from pymc_resume.explore.validate import ModelError, ModelFault, ValidModel, short

# The re-run stops at this many states (it holds each whole, with its parent) or when the
# run's own limits are reached; the search's line is then reported without a path.
STATE_LIMIT = 2_000_000


@attrs.frozen
class _Raised(Exception):
    function: str
    state: Hashable
    error: BaseException


def _called(function: str, call: Callable, state: Hashable, *args):
    try:
        return call(*args)
    except Exception as error:
        raise _Raised(function, state, error) from error


def _named(call: Callable) -> str:
    """A function as the line names it: its qualified name (a lambda's is `<lambda>`)."""
    return getattr(call, "__qualname__", None) or type(call).__name__


def _label_tests(model: ValidModel) -> list[tuple[str, Callable[[str], bool]]]:
    return [
        (f"{_named(c.action)}({{label!r}}) (fairness[{k}] {c.shown()}, asked of a step's label)", c.matches)
        for k, c in enumerate(model.fairness)
        if not isinstance(c.action, str)
    ]


def _state_calls(model: ValidModel) -> list[tuple[str, Callable]]:
    """Every predicate the search and the temporal pass ask of a reached state, named."""
    calls = [(f"{_named(p.holds)}() (invariant {p.name!r})", p.holds) for p in model.invariants]
    if model.all_hold is not None:
        calls.insert(0, ("model.all_hold()", model.all_hold))
    for prop in model.temporal:
        calls.append((f"{_named(prop.p)}() (temporal property {prop.name!r}, its p)", prop.p))
        if isinstance(prop, LeadsTo):
            calls.append((f"{_named(prop.q)}() (temporal property {prop.name!r}, its q)", prop.q))
    return calls


def _check(model: ValidModel, state: Hashable, calls) -> None:
    for name, predicate in calls:
        _called(name, predicate, state, state)


def locate(model: ValidModel, limits: Limits, started: float) -> ModelFault | None:
    """The first state, breadth-first, where the model raises, as a one-line `ModelFault`
    with its path; None when the model does not raise again within the limits."""
    calls, label_tests = _state_calls(model), _label_tests(model)
    labels_seen: set[str] = set()
    parents: dict[Hashable, tuple[Hashable, str] | None] = {}
    queue: deque = deque()
    try:
        for state in _called("model.initial_states()", lambda: list(model.initial_states()), None):
            if state in parents:
                continue
            parents[state] = None
            _check(model, state, calls)
            if model.constraint is not None and not _called(
                "model.constraint()", model.constraint, state, state
            ):
                del parents[state]  # checked, not stored, as TLC
                continue
            queue.append(state)
        while queue:
            if len(parents) > STATE_LIMIT or limits.exceeded(len(parents), started, 0):
                return None
            state = queue.popleft()
            for action, successor in _called(
                "model.successors()", lambda s=state: list(model.successors(s)), state
            ):
                if action not in labels_seen:
                    labels_seen.add(action)
                    for name, test in label_tests:
                        _called(name.format(label=action), test, state, action)
                if successor not in parents:  # (a state checked once, as the search does)
                    parents[successor] = (state, action)
                    _check(model, successor, calls)
                    if not _inside(model, state, action, successor):
                        del parents[successor]  # checked, not stored, as TLC
                        continue
                    queue.append(successor)
    except _Raised as raised:
        return _fault(raised, parents)
    except Exception:  # (ours, on what the model gave: an unhashable state; the search's line says it)
        return None
    return None


def _inside(model: ValidModel, state, action, successor) -> bool:
    if model.constraint is not None and not _called(
        "model.constraint()", model.constraint, successor, successor
    ):
        return False
    return model.action_constraint is None or bool(
        _called("model.action_constraint()", model.action_constraint, successor, state, action, successor)
    )


def _fault(raised: _Raised, parents: dict) -> ModelFault:
    """The line and the path for the state where the model raised."""
    path: list[Step] = []
    here = raised.state
    while here is not None and here in parents:
        came = parents[here]
        path.append(Step(came[1] if came else None, here))
        here = came[0] if came else None
    path.reverse()
    error = raised.error
    text = " ".join(str(error).split())[:300]
    where = f" in state {short(raised.state, 120)}" if raised.state is not None else ""
    if path and path[-1].action is not None:
        where += f" (reached by {path[-1].action}, step {len(path) - 1})"
    elif path:
        where += " (an initial state)"
    fault = ModelFault(f"the model raised {type(error).__name__}: {text} in {raised.function}{where}")
    fault.trace = tuple(path)
    fault.__cause__ = error
    error.__suppress_context__ = True  # (raised while the search's own error was handled)
    return fault


def located(error: BaseException, model: ValidModel, limits: Limits) -> BaseException:
    """`error` (the model's exception, or the search's line for it) with the path to where
    it was raised, if the model raises there again within the run's time limit (counted
    afresh) and `STATE_LIMIT`; else `error` itself."""
    fault = locate(model, Limits(None, limits.max_seconds, None), time.monotonic())
    if fault is None:
        return error
    if isinstance(error, ModelError) and error.model_traceback is not None:
        fault.model_traceback = error.model_traceback
    return fault
