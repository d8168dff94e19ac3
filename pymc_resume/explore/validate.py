"""A model checked before the search starts, with a default for every optional attribute.

`validated(model)` reads what the explorer needs from any object that follows `protocol.Model`
and refuses, with one line naming the attribute and what is wrong (`ModelError`, a `BadInput`),
a model the search would otherwise trip over deep inside: no initial states, an unhashable
state, successors without action labels, an unnamed property. It looks at the initial states
and their successors only; what the model does further in is its own business.

Defaults (TLC's where TLC has one): no invariants, no reachability properties, deadlock
checked, no state or action constraint, no codec (the explorer derives one, see `plain`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, Literal, overload

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.explore.model_names import missing_required, unknown_attribute
from pymc_resume.explore.protocol import AlwaysReachable, Invariant
from pymc_resume.explore.temporal import SF, TEMPORAL_KINDS, WF

State = Hashable


class ModelError(BadInput):
    """A model the explorer cannot check; the message names the attribute and the fault."""

    # The model's traceback as text, when a worker process sent it (`raised.model_traceback`).
    model_traceback: str | None = None


class ModelFault(ModelError):
    """An exception raised by the model's code, in one line naming the function and the state,
    with the shortest path to that state (`trace`: `result.Step`s; the last one's action
    produced it), as TLC prints the behaviour leading to an evaluation error."""

    trace: tuple = ()


def _fault_in_initial(error: Exception, function: str, state) -> ModelFault:
    """The model raised while its first states were checked: the path is the state itself."""
    from pymc_resume.explore.result import Step  # (result imports nothing of ours back)

    text = " ".join(str(error).split())[:300]
    fault = ModelFault(
        f"the model raised {type(error).__name__}: {text} in {function} in state {short(state, 120)} "
        "(an initial state)"
    )
    fault.trace = (Step(None, state),)
    return fault


@attrs.frozen
class ValidModel:
    """Everything the explorer reads from a model, checked and defaulted."""

    model: Any  # the model as given (traces replay it)
    initial_states: Callable[[], Iterable[State]]
    successors: Callable[[State], Iterable[tuple[str, State]]]
    invariants: tuple[Invariant, ...] = ()
    reachability: tuple[AlwaysReachable, ...] = ()
    deadlock_is_error: bool = True
    # TLC's CONSTRAINT and ACTION_CONSTRAINT: a successor outside them is generated and checked
    # against the invariants, but neither stored nor expanded.
    constraint: Callable[[State], bool] | None = None
    action_constraint: Callable[[State, str, State], bool] | None = None
    codec: Callable[[], Any] | None = None
    partition_key: Callable[[State], Hashable] | None = None
    all_hold: Callable[[State], bool] | None = None
    # Symmetry: the representative of a state's class (`explore(canonical=...)`); the model's
    # own, used unless a run turns symmetry off.
    canonical: Callable[[State], State] | None = None
    # TLC's VIEW: states equal under it are one state, for every check, temporal ones included
    # (not an option of the run, as a symmetry is; `canonical` reduces only the safety search,
    # since a temporal verdict on symmetry classes can be wrong).
    view: Callable[[State], State] | None = None
    # The names of the model's actions (optional): coverage lists those never taken. An action
    # label is one of them, or one of them followed by its parameters: "Prepare(r1)".
    actions: tuple[str, ...] = ()
    # Temporal properties (`temporal.py`), decided after the search by `liveness.py`, under
    # the fairness conditions; `stuttering`: any state may repeat forever (TLA+'s behaviours).
    temporal: tuple = ()
    fairness: tuple = ()
    stuttering: bool = False
    # Whether a step outside `constraint`/`action_constraint` still enables its action for
    # fairness: TLC's ENABLED ignores the constraints (the default, False); True is the
    # constrained reading (an action whose only steps leave the constraints is disabled).
    enabled_within_constraints: bool = False


@overload
def _callable(model, name: str, required: Literal[True]) -> Callable: ...


@overload
def _callable(model, name: str, required: bool = False) -> Callable | None: ...


def _callable(model, name: str, required: bool = False) -> Callable | None:
    found = getattr(model, name, None)
    if found is None:
        if required:
            raise ModelError(missing_required(model, name))
        return None
    if not callable(found):
        raise ModelError(f"model.{name}: must be a method, got {type(found).__name__}")
    return found


def _properties(model, name: str, kind: type[Invariant] | type[AlwaysReachable], field: str) -> tuple:
    found = getattr(model, name, None)
    if found is None:
        return ()
    if isinstance(found, Mapping):
        raise ModelError(
            f"model.{name}: must be a list of {kind.__name__}(name, {field}) values, got a "
            f"{type(found).__name__} (list its values: [{kind.__name__}(name, {field}), ...])"
        )
    if isinstance(found, (str, bytes)) or not isinstance(found, Iterable):
        raise ModelError(f"model.{name}: must be a list of {kind.__name__}s, got {type(found).__name__}")
    found = tuple(found)
    names = set()
    for position, prop in enumerate(found):
        if not isinstance(prop, kind):
            raise ModelError(
                f"model.{name}[{position}]: must be an {kind.__name__}(name, "
                f"{field}), got {type(prop).__name__}"
            )
        if not isinstance(prop.name, str) or not prop.name:
            raise ModelError(
                f"model.{name}[{position}]: its name must be a non-empty string, got {prop.name!r}"
            )
        if not callable(getattr(prop, field)):
            raise ModelError(f"model.{name}[{position}] ({prop.name}): {field} must be callable")
        if prop.name in names:
            raise ModelError(f"model.{name}: two properties named {prop.name!r}")
        names.add(prop.name)
    return found


def _temporal(model) -> tuple[tuple, tuple, bool]:
    """The model's temporal properties, fairness conditions and stuttering, checked."""
    found = []
    for name, kinds, what in (
        ("temporal", TEMPORAL_KINDS, "a LeadsTo, InfinitelyOften or EventuallyAlways"),
        ("fairness", (WF, SF), "a WF(action) or SF(action)"),
    ):
        items = getattr(model, name, None)
        items = () if items is None else items
        if isinstance(items, Mapping):
            raise ModelError(f"model.{name}: must be a list of {what}s, got a {type(items).__name__}")
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise ModelError(f"model.{name}: must be a list, got {type(items).__name__}")
        items = tuple(items)
        for position, item in enumerate(items):
            if not isinstance(item, kinds):
                raise ModelError(f"model.{name}[{position}]: must be {what}, got {short(item)}")
            predicates = ("p", "q") if isinstance(item, TEMPORAL_KINDS[0]) else ("p",)
            if name == "fairness":
                predicates = ("action",)
            for field in predicates:
                value = getattr(item, field, None)
                if field == "action" and isinstance(value, str):
                    continue
                if not callable(value):
                    raise ModelError(
                        f"model.{name}[{position}]: {field} must be "
                        f"{'a label or ' if field == 'action' else ''}callable, got {short(value)}"
                    )
            if name == "temporal" and (not isinstance(item.name, str) or not item.name):
                raise ModelError(f"model.temporal[{position}]: its name must be a non-empty string")
        found.append(items)
    stuttering = getattr(model, "stuttering", False)
    if not isinstance(stuttering, bool):
        raise ModelError(f"model.stuttering: must be True or False, got {stuttering!r}")
    if found[1] and not found[0]:
        raise ModelError("model.fairness: given without temporal properties, it constrains nothing")
    return found[0], found[1], stuttering


def _flag(model, name: str) -> bool:
    """A boolean attribute of the model (False when it has none)."""
    value = getattr(model, name, False)
    if not isinstance(value, bool):
        raise ModelError(f"model.{name}: must be True or False, got {short(value)}")
    return value


def _hashable(state, where: str) -> None:
    try:
        hash(state)
    except TypeError:
        raise ModelError(
            f"{where}: states must be hashable (tuples, frozensets, frozen attrs "
            f"or dataclass instances), got {type(state).__name__}: "
            f"{short(state)}"
        ) from None


def short(value, limit: int = 80) -> str:
    """`value` as a message shows it: its repr, cut to `limit` characters (or its type, when
    the model's repr raises)."""
    try:
        text = repr(value)
    except Exception:
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _initial(valid: ValidModel) -> list:
    try:
        states = list(valid.initial_states())
    except TypeError as error:
        raise ModelError(f"model.initial_states(): must return an iterable of states ({error})") from None
    if not states:
        raise ModelError("model.initial_states(): returned no state; a model needs at least one")
    for state in states:
        _hashable(state, "model.initial_states()")
    return states


# Initial states whose successors are checked: a model written wrong shows in its first states,
# and a spec whose every variable may start anywhere has many (EWD840 with N = 8: 524,288, whose
# 13 million successors the check took as long to generate as the search does).
INITIAL_STATES_CHECKED = 1000


def _check_successors(valid: ValidModel, initial: list) -> None:
    """The successors of the first initial states must be (action label, hashable state)
    pairs, and a state of another type than the initial ones is taken for a missing label."""
    kinds = {type(state) for state in initial}
    for state in initial[:INITIAL_STATES_CHECKED]:
        try:
            produced = valid.successors(state)
            if not (
                produced is None or isinstance(produced, (str, bytes)) or not isinstance(produced, Iterable)
            ):
                produced = list(produced)
        except Exception as error:
            raise _fault_in_initial(error, "model.successors()", state) from error
        if produced is None or isinstance(produced, (str, bytes)) or not isinstance(produced, Iterable):
            raise ModelError(
                f"model.successors(state): must yield (action, next_state) pairs, "
                f"returned {type(produced).__name__}"
            )
        for item in produced:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise ModelError(
                    f"model.successors(state): must yield (action, next_state) "
                    f"pairs with a str action, yielded {short(item)}"
                )
            _hashable(item[1], "model.successors(state)")
            if type(item[1]) not in kinds:
                raise ModelError(
                    f"model.successors(state): yielded ({item[0]!r}, {short(item[1])}): a "
                    f"{type(item[1]).__name__} where initial states are "
                    f"{' or '.join(sorted(kind.__name__ for kind in kinds))}; does it yield "
                    f"(action, next_state) pairs?"
                )


def _check_state_fields(model) -> None:
    """`state_fields`, if given, names a tuple state's positions: a list of strings."""
    fields = getattr(model, "state_fields", None)
    if fields is not None and (
        not isinstance(fields, (list, tuple)) or not all(type(name) is str and name for name in fields)
    ):
        raise ModelError(f"model.state_fields: must be a list of field names (strings), got {short(fields)}")


def _action_names(model) -> tuple[str, ...]:
    names = getattr(model, "actions", ())
    if not isinstance(names, (list, tuple)) or not all(type(name) is str and name for name in names):
        raise ModelError(f"model.actions: must be a list of action names (strings), got {short(names, 80)}")
    return tuple(names)


def validated(model, check_deadlock: bool | None = None) -> ValidModel:
    """`model` read, defaulted and checked; `check_deadlock` overrides its `deadlock_is_error`."""
    if isinstance(model, ValidModel):
        return model if check_deadlock is None else attrs.evolve(model, deadlock_is_error=check_deadlock)
    if model is None:
        raise ModelError("model: the factory returned None, not a model (does it end with `return`?)")
    unknown = unknown_attribute(model)
    if unknown is not None:
        raise ModelError(unknown)
    _check_state_fields(model)
    deadlock = getattr(model, "deadlock_is_error", True)
    if not isinstance(deadlock, bool):
        raise ModelError(f"model.deadlock_is_error: must be True or False, got {deadlock!r}")
    temporal, fairness, stuttering = _temporal(model)
    valid = ValidModel(
        model=model,
        initial_states=_callable(model, "initial_states", required=True),
        successors=_callable(model, "successors", required=True),
        invariants=_properties(model, "invariants", Invariant, "holds"),
        reachability=_properties(model, "reachability", AlwaysReachable, "goal"),
        deadlock_is_error=deadlock if check_deadlock is None else check_deadlock,
        constraint=_callable(model, "constraint"),
        action_constraint=_callable(model, "action_constraint"),
        codec=_callable(model, "codec"),
        partition_key=_callable(model, "partition_key"),
        all_hold=_callable(model, "all_hold"),
        canonical=_callable(model, "canonical"),
        view=_callable(model, "view"),
        actions=_action_names(model),
        temporal=temporal,
        fairness=fairness,
        stuttering=stuttering,
        enabled_within_constraints=_flag(model, "enabled_within_constraints"),
    )
    if valid.view is not None and valid.canonical is not None:
        raise ModelError(
            "model.view and model.canonical: one or the other (TLC's VIEW or SYMMETRY), not both"
        )
    names = [p.name for p in (*valid.invariants, *valid.reachability, *valid.temporal)]
    for name in names:
        if names.count(name) > 1:
            raise ModelError(f"model: two properties named {name!r} (invariants, reachability, temporal)")
    _check_fairness_labels(valid)
    _check_successors(valid, _initial(valid))
    return valid


def _check_fairness_labels(valid: ValidModel) -> None:
    """A fairness condition naming a label that is none of the model's declared `actions`
    (itself, or followed by its parameters) is refused before the search; without `actions`
    it is known only after it (`liveness.unknown_fairness_labels`)."""
    if not valid.actions:
        return
    for position, condition in enumerate(valid.fairness):
        label = condition.action
        if isinstance(label, str) and label.split("(", 1)[0] not in valid.actions:
            close = difflib.get_close_matches(label, valid.actions, n=1, cutoff=0.6)
            mean = f"; did you mean {close[0]!r}?" if close else ""
            raise ModelError(
                f"model.fairness[{position}]: {condition.shown()} names {label!r}, none of "
                f"model.actions ({', '.join(valid.actions)}){mean}"
            )
