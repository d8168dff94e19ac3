"""`pymc-resume explore --dump-graph FILE.dot`: a small model's state graph, for Graphviz (TLC's
`-dump dot`).

The graph is enumerated here, in one process, breadth-first and apart from the search's hot
loop (which keeps no edges unless a reachability property needs them): it is meant for state
spaces a person can look at, and refuses more than `LIMIT` states (`GraphTooLarge`, before
anything is written). It follows the search's rules, so its nodes are the search's distinct
states: a state is stored by its key (`canonical` when symmetry is on) and the key is what is
expanded; initial states outside `constraint`, and successors outside `constraint` or
`action_constraint`, are neither nodes nor edges (the search checks such states but does not
store them). Edges are distinct (source, action, target) triples.

Each node is labelled with the state as the trace tables show it (its fields, one a line); an
initial state is drawn with a double border, and a state where an invariant is false (or a
deadlock the model reports) is red, with the names of what it violates.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.explore.result import DEADLOCK
from pymc_resume.explore.traces.changes import changes
from pymc_resume.explore.validate import ValidModel

LIMIT = 10_000  # states: above it the graph is refused (Graphviz is slow long before)


class GraphTooLarge(BadInput):
    """The state space is larger than a graph dump allows."""


@attrs.frozen
class StateGraph:
    """States by id (ids in breadth-first order), the initial ones, labelled edges, and what
    each violating state violates."""

    states: tuple[Hashable, ...]
    initial: frozenset[int]
    edges: tuple[tuple[int, str, int], ...]
    violations: dict[int, tuple[str, ...]]


def state_graph(
    model: ValidModel, canonical: Callable[[Hashable], Hashable] | None = None, limit: int = LIMIT
) -> StateGraph:
    """Every state reachable within the constraints, and the edges between them."""
    key = canonical or (lambda state: state)
    ids: dict[Hashable, int] = {}
    states: list[Hashable] = []

    def admitted(state: Hashable) -> int:
        k = key(state)
        found = ids.get(k)
        if found is None:
            if len(states) >= limit:
                raise GraphTooLarge(
                    f"--dump-graph: the model has more than {limit:,} states; a graph dump is for "
                    f"state spaces of at most {limit:,} (nothing was written)"
                )
            found = ids[k] = len(states)
            states.append(k)
        return found

    constraint, action_constraint = model.constraint, model.action_constraint
    initial = frozenset(
        admitted(state) for state in model.initial_states() if constraint is None or constraint(state)
    )
    edges: dict[tuple[int, str, int], None] = {}
    violations: dict[int, tuple[str, ...]] = {}
    expanded = 0
    while expanded < len(states):
        state = states[expanded]
        false = [p.name for p in model.invariants if not p.holds(state)]
        generated = 0
        for action, successor in model.successors(state):
            generated += 1
            if constraint is not None and not constraint(successor):
                continue
            if action_constraint is not None and not action_constraint(state, action, successor):
                continue
            edges[(expanded, action, admitted(successor))] = None
        if generated == 0 and model.deadlock_is_error:
            false.append(DEADLOCK)
        if false:
            violations[expanded] = tuple(false)
        expanded += 1
    return StateGraph(tuple(states), initial, tuple(edges), violations)


def quoted(text: str) -> str:
    """`text` as a DOT double-quoted string (backslashes and quotes escaped, newlines as
    Graphviz's left-justified line breaks)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "\\l".join(escaped.splitlines()) + ('\\l"' if "\n" in text else '"')


def dot(graph: StateGraph, name: str, state_fields: Sequence[str] | None = None) -> str:
    """The graph in Graphviz's DOT language."""
    lines = [
        f"digraph {quoted(name)} {{",
        f"  // {len(graph.states)} states, {len(graph.edges)} edges; written by pymc-resume explore",
        '  node [shape=box, fontname="monospace"];',
    ]
    for number, state in enumerate(graph.states):
        label = "\n".join(changes(None, state, state_fields))
        attributes = []
        violated = graph.violations.get(number)
        if violated:
            label += "\nviolates: " + ", ".join(violated)
            attributes.append('color="red", fontcolor="red"')
        if number in graph.initial:
            attributes.append("peripheries=2")
        lines.append(f"  {number} [label={quoted(label + chr(10))}{''.join(', ' + a for a in attributes)}];")
    lines.extend(
        f"  {source} -> {target} [label={quoted(action)}];" for source, action, target in graph.edges
    )
    lines.append("}")
    return "\n".join(lines) + "\n"
