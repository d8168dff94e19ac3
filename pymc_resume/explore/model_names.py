"""The names a model's attributes may have, and the one-line refusal of a name that is not one.

An attribute the explorer does not read is ignored, so a misspelt one checks nothing, silently:
`invariants = []` beside `invariant = [...]` exits 0. `unknown_attribute(model)` gives the line
refusing (`validate` raises it), whatever else the model sets, a public attribute that is

- a TLA+ (or TLC configuration) word for one of ours (`properties`, `symmetry`,
  `check_deadlock`, `state_constraint`): a hint naming ours;
- a near miss of one of ours, case and underscores aside (`invariant`, `fairnes`,
  `initialStates`): "did you mean";
- under any other name, a value the explorer would read only under one of ours (a list of
  `Invariant`s, `WF`s, temporal properties): the attribute it belongs in.

A model's own helpers (`n`, `nodes`, `type_ok`) pass; a name that must stay can start with `_`.
"""

from __future__ import annotations

import difflib

from pymc_resume.explore.protocol import AlwaysReachable, Invariant
from pymc_resume.explore.temporal import SF, TEMPORAL_KINDS, WF

# Every attribute the explorer reads from a model (required and optional).
KNOWN_ATTRIBUTES = (
    "initial_states",
    "successors",
    "invariants",
    "reachability",
    "deadlock_is_error",
    "constraint",
    "action_constraint",
    "codec",
    "partition_key",
    "all_hold",
    "canonical",
    "view",
    "actions",
    "temporal",
    "fairness",
    "stuttering",
    "enabled_within_constraints",
    "state_fields",
)

_TEMPORAL = (
    "temporal (PROPERTY/PROPERTIES: LeadsTo, InfinitelyOften, EventuallyAlways; an invariant goes "
    "in invariants)"
)
_DEADLOCK = "deadlock_is_error (CHECK_DEADLOCK)"
_SYMMETRY = "canonical(state), the representative of the state's symmetry class (SYMMETRY)"
_INVARIANTS = "invariants (INVARIANT/INVARIANTS: [Invariant(name, holds)])"
_FAIRNESS = "fairness ([WF(action), SF(action)])"

# TLA+'s and TLC's words, by their normal form (`_normal`), for what a model here calls otherwise.
TLA_WORDS = {
    "properties": _TEMPORAL,
    "property": _TEMPORAL,
    "temporalproperties": _TEMPORAL,
    "liveness": _TEMPORAL,
    "livenessproperties": _TEMPORAL,
    "safety": _INVARIANTS,
    "safetyproperties": _INVARIANTS,
    "symmetry": _SYMMETRY,
    "symmetries": _SYMMETRY,
    "permutations": _SYMMETRY,
    "representative": _SYMMETRY,
    "checkdeadlock": _DEADLOCK,
    "checkdeadlocks": _DEADLOCK,
    "deadlock": _DEADLOCK,
    "deadlocks": _DEADLOCK,
    "stateconstraint": "constraint(state) (CONSTRAINT)",
    "constraints": "constraint(state) (CONSTRAINT; one predicate, the conjunction)",
    "actionconstraints": "action_constraint(state, action, next_state) (ACTION_CONSTRAINT; one predicate)",
    "weakfairness": _FAIRNESS,
    "strongfairness": _FAIRNESS,
    "fairnessconditions": _FAIRNESS,
    "wf": _FAIRNESS,
    "sf": _FAIRNESS,
    "stutteringallowed": "stuttering (True: every state may repeat forever, TLA+'s [][Next]_vars)",
    "alias": "nothing: TLC's ALIAS is not supported (state_fields names a tuple state's positions)",
    "postcondition": "nothing: TLC's POSTCONDITION is not supported",
}

# For a missing required attribute: names that suggest the model wrote it under another.
REQUIRED_WORDS = {
    "initial_states": ("init", "initial", "initial_state", "init_states", "start", "starts"),
    "successors": ("next", "next_state", "next_states", "nexts", "transitions", "step", "steps"),
}

# Where a value of each kind is read: a value of one of them under another name is misplaced.
_HOMES = (
    (Invariant, "invariants"),
    (AlwaysReachable, "reachability"),
    (TEMPORAL_KINDS, "temporal"),
    ((WF, SF), "fairness"),
)


def _normal(name: str) -> str:
    """A name as compared: case and underscores ignored (`initialStates`, `CHECK_DEADLOCK`)."""
    return name.lower().replace("_", "")


_KNOWN_NORMAL = {_normal(name): name for name in KNOWN_ATTRIBUTES}
_REQUIRED_NORMAL = {_normal(word) for words in REQUIRED_WORDS.values() for word in words}
_RENAME = "(rename it, or start it with _ if it is the model's own)"


def unknown_attribute(model) -> str | None:
    """The line refusing the first public attribute that is a TLA+ word, a near miss of a
    known name, or a misplaced property or fairness condition; None when there is none."""
    for name in dir(model):
        if name.startswith("_") or name in KNOWN_ATTRIBUTES:
            continue
        normal = _normal(name)
        hint = TLA_WORDS.get(normal)
        if hint is not None:
            return f"model.{name}: a TLA+/TLC name, not one the explorer reads; here it is {hint} {_RENAME}"
        close = difflib.get_close_matches(normal, _KNOWN_NORMAL, n=1, cutoff=0.75)
        if close and normal not in _REQUIRED_NORMAL:
            known = _KNOWN_NORMAL[close[0]]
            return f"model.{name}: not an attribute the explorer reads; did you mean {known!r}? {_RENAME}"
        home = _home(model, name)
        if home is not None:
            return (
                f"model.{name}: holds what the explorer reads only in model.{home}; move it there {_RENAME}"
            )
    return None


def _home(model, name: str) -> str | None:
    """The attribute a property or fairness condition (or a collection of them) held in
    `model.name` belongs in; None for anything else."""
    try:
        value = getattr(model, name)
    except Exception:  # (a property of the model's that raises: not ours to judge)
        return None
    if isinstance(value, dict):
        value = list(value.values())
    items = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
    for item in items:
        for kinds, home in _HOMES:
            if isinstance(item, kinds):
                return home
    return None


def missing_required(model, name: str) -> str:
    """The line for a missing `initial_states` or `successors`, naming the attribute the model
    may have meant (TLA+'s `Init`, `Next`, or another usual name)."""
    found = next((n for n in dir(model) if _normal(n) in {_normal(w) for w in REQUIRED_WORDS[name]}), None)
    also = f" (is model.{found} meant? here it is {name})" if found else ""
    return f"model.{name}: missing; a model needs {name}(){also}"
