"""Temporal properties under fairness, decided on the reachable state graph by its strongly
connected components; a violation is a lasso (a prefix, then a cycle), as TLC prints one.

Semantics (TLA+'s, as TLC checks them):

- A behaviour is an infinite path of the graph from an initial state. A state with no
  successor inside the constraints (a deadlock, or a state whose successors all fall outside
  `constraint`/`action_constraint`) is extended by stuttering forever in it, as TLC does
  (deadlock itself is reported by the safety search first where the model asks). With the
  model's `stuttering = True` every state may stutter forever: TLA+'s `[][Next]_vars`, what TLC
  checks for a spec `Init /\\ [][Next]_vars /\\ Fairness`; ports of TLA+ specs set it.
- An action is *taken* by a step whose label it names and that changes the state (TLA+'s
  `<<A>>_vars`: a step to the same state, stuttering included, takes nothing), and *enabled*
  in a state that has such a step.
- WF(A): if A is from some point on always enabled, A is taken infinitely often.
  SF(A): if A is enabled infinitely often, A is taken infinitely often.
- `P ~> Q` fails when some reachable state satisfies P and not Q and a fair behaviour goes on
  from it through states where Q never holds: a path through not-Q states to a fair cycle of
  not-Q states. `[]<>P` fails on a fair cycle avoiding P; `<>[]P` on a fair cycle visiting a
  state where P fails.

Algorithm: the graph is enumerated again, in this process, as the safety search does
(`state_graph`: ids by fingerprint, edges by source in memory or on disk, a bit a state for each
predicate and fairness condition; never the states). A cycle is fair when some strongly
connected component holds it with its fairness met: iterative Tarjan finds the components of
the states allowed (not-Q, not-P, or all); a component where some WF action is enabled in every
state and taken on no internal edge is dropped; a component where an SF action is enabled
somewhere but taken on no internal edge loses the states where it is enabled and is split
again (Emerson and Lei's refinement), until every component left is fair. A fair component
holds a fair cycle: one through every state and internal edge of it. The lasso reported starts
from the shallowest bad state (its prefix is a shortest path), and its cycle goes, by shortest
paths inside the component, to what each fairness condition needs (a state where a WF action
is disabled, else an edge that takes it) and back; its states are rebuilt by running the model
along its ids, as TLC rebuilds a trace along fingerprints.

Limits: the graph pass runs in this process after the safety search, whatever its number of
workers. It holds about 40 bytes a state (fingerprint, table slot, parent, first edge, bits)
and 8 bytes an edge up to `adjacency.IN_MEMORY` edges (the rest on disk); Tarjan adds 9 bytes
a state and a list entry for each state of the components found. `P ~> Q` finds the states
that can reach a fair not-Q component by one more Tarjan search in the same order, not by
walking predecessor lists backwards (which would take 12 bytes an edge). With fingerprints a
collision could merge two states (the pass's bound is added to the result's). `--max-states`,
`--max-seconds` and `--max-memory` bound this pass too, and a property it cannot finish is
`skipped` with the reason.
"""

from __future__ import annotations

import difflib
import time
from array import array
from collections import deque
from collections.abc import Callable, Hashable, Iterator

import attrs

from pymc_resume.explore.properties.adjacency import label_of, moves
from pymc_resume.explore.properties.state_graph import Graph, OverBudget, build_graph
from pymc_resume.explore.result import ExplorationResult, Step, Violation
from pymc_resume.explore.store.fingerprints import summed_risk
from pymc_resume.explore.store.limits import Limits
from pymc_resume.explore.store.memory import peak_bytes
from pymc_resume.explore.temporal import SF, EventuallyAlways, InfinitelyOften, LeadsTo
from pymc_resume.explore.validate import ModelError, ValidModel

STOPPED_AT_FIRST = "not decided: stopped at the first violation (--stop-at-first)"
STUTTER = -1  # the code of a stuttering step (a state repeated), which takes no action
STUTTERING = "stuttering"  # its label in traces, as TLC names it


def components(graph: Graph, nodes, alive: bytearray, marks: _TarjanMarks) -> list[list[int]]:
    """The strongly connected components of the subgraph of the states where `alive` is set,
    searched from `nodes`; only those that hold a cycle."""
    looped = graph.looped
    return [c for c in _tarjan(graph, nodes, alive, marks) if len(c) > 1 or looped[c[0]]]


def _tarjan(graph: Graph, nodes, alive: bytearray, marks: _TarjanMarks) -> Iterator[list[int]]:
    """Every strongly connected component (iterative Tarjan) of the subgraph of the states
    where `alive` is set, searched from `nodes`, each after every component it reaches (its
    root first). `marks` are all clear before and after (only states of `nodes` that are alive
    are ever marked)."""
    edges = graph.edges
    index, low, on_stack = marks.index, marks.low, marks.on_stack
    counter = 0
    stack: list[int] = []
    for root in nodes:
        if index[root] >= 0 or not alive[root]:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        # A frame: a state, its targets (read once, from memory or disk), the next to look at.
        work = [(root, edges.targets(root), 0)]
        while work:
            v, targets, e = work[-1]
            end = len(targets)
            descended = False
            while e < end:
                w = targets[e]
                e += 1
                if not alive[w]:
                    continue
                if index[w] < 0:
                    work[-1] = (v, targets, e)
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack[w] = 1
                    work.append((w, edges.targets(w), 0))
                    descended = True
                    break
                if on_stack[w] and index[w] < low[v]:
                    low[v] = index[w]
            if descended:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                component = [v]
                while True:
                    w = stack.pop()
                    on_stack[w] = 0
                    if w == v:
                        break
                    component.append(w)
                yield component
    for v in nodes:  # clear the marks for the next search
        if alive[v]:
            index[v] = low[v] = -1


def _reaching(graph: Graph, alive: bytearray, goal: bytearray) -> bytearray:
    """The states where `alive` is set from which a path through such states reaches a `goal`
    state (the goal states included). Tarjan's order settles a component after every one it
    reaches, so a forward search decides it: no predecessor lists (12 bytes an edge)."""
    edges = graph.edges
    reach = bytearray(goal)
    for component in _tarjan(graph, range(len(graph)), alive, _TarjanMarks(len(graph))):
        if not any(reach[v] for v in component) and not any(
            reach[w] for v in component for w in edges.targets(v) if alive[w]
        ):
            continue
        for v in component:
            reach[v] = 1
    return reach


class _TarjanMarks:
    """Tarjan's per-state numbers in flat arrays (4 bytes each, not a dict entry), made once
    for all the searches of a refinement."""

    __slots__ = ("index", "low", "on_stack")

    def __init__(self, size: int) -> None:
        self.index = array("i", [-1]) * size
        self.low = array("i", [-1]) * size
        self.on_stack = bytearray(size)


@attrs.frozen
class Fairness:
    """The model's fairness conditions, evaluated on the graph once: per condition, which
    labels are its steps and which states enable it."""

    strong: tuple[bool, ...]
    steps: tuple[bytearray, ...]  # per condition, per label id
    enabled: tuple[bytearray, ...]  # per condition, per state


def fairness_of(model: ValidModel, graph: Graph) -> Fairness:
    labels = graph.labels
    steps = tuple(bytearray(condition.matches(label) for label in labels) for condition in model.fairness)
    strong = tuple(isinstance(condition, SF) for condition in model.fairness)
    return Fairness(strong, steps, graph.enabled)


def _taken_inside(graph: Graph, component: list[int], member: bytearray, fair: Fairness) -> list[bool]:
    """Per fairness condition: whether an edge inside the component takes it."""
    taken = [False] * len(fair.steps)
    for v in component:
        pairs = graph.edges.edges(v)
        for w, code in zip(pairs[0::2], pairs[1::2]):
            if code & 1 and member[w]:  # a step that changes the state (`adjacency`)
                for k, steps in enumerate(fair.steps):
                    if steps[code >> 1]:
                        taken[k] = True
    return taken


def fair_components(graph: Graph, alive: bytearray, fair: Fairness) -> list[list[int]]:
    """The components of the `alive` subgraph that hold a fair cycle (refined as the module
    docstring says): each is strongly connected and a cycle through all of it is fair."""
    member = bytearray(len(graph))
    marks = _TarjanMarks(len(graph))
    work = components(graph, range(len(graph)), alive, marks)
    result = []
    while work:
        component = work.pop()
        for v in component:
            member[v] = 1
        taken = _taken_inside(graph, component, member, fair)
        unfair, removed = False, list[int]()
        for k, enabled in enumerate(fair.enabled):
            if taken[k]:
                continue
            if not fair.strong[k]:
                if all(enabled[v] for v in component):
                    unfair = True  # enabled throughout, never taken: no cycle here is fair
                    break
            else:
                removed.extend(v for v in component if enabled[v])
        if not unfair and removed:
            for v in removed:
                member[v] = 0  # a cycle avoiding those states is all that may be fair
            work.extend(components(graph, component, member, marks))
        elif not unfair:
            result.append(component)
        for v in component:
            member[v] = 0
    return result


# A path through the graph: (the step's code, or STUTTER, and the state it reaches), in order.
Path = list[tuple[int, int]]


def _shortest(graph: Graph, start: int, allowed: bytearray, goal: Callable[[int, int], bool]) -> Path | None:
    """A shortest path from `start` through `allowed` states to the first step `goal(code,
    target)` accepts (STUTTER for a state's stuttering step); None if there is none."""
    edges, looped = graph.edges, graph.looped
    came: dict[int, tuple[int, int]] = {start: (-1, -1)}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        pairs = edges.edges(v)
        candidates = [(code, w) for w, code in zip(pairs[0::2], pairs[1::2]) if allowed[w]]
        if looped[v] and not any(w == v for _, w in candidates):
            candidates.append((STUTTER, v))
        for e, w in candidates:
            if goal(e, w):
                path = [(e, w)]
                while v != start:
                    previous, edge = came[v]
                    path.append((edge, v))
                    v = previous
                path.reverse()
                return path
            if w not in came:
                came[w] = (v, e)
                queue.append(w)
    return None


def _needs(graph: Graph, component: list[int], inside: bytearray, fair: Fairness) -> list:
    """Per fairness condition that a cycle in `component` must do something for: a test of a
    step `(code, target)` that does it (takes the action; for WF, or reaches a state where
    the action is disabled)."""
    taken = _taken_inside(graph, component, inside, fair)

    def need(steps: bytearray, disabled: bytearray | None) -> Callable[[int, int], bool]:
        def met(code: int, w: int) -> bool:
            if disabled is not None and not disabled[w]:
                return True
            return code >= 0 and moves(code) and bool(steps[label_of(code)])

        return met

    needs: list[Callable[[int, int], bool]] = []
    for k, enabled in enumerate(fair.enabled):
        if fair.strong[k]:
            if taken[k]:  # (else, after the refinement, it is never enabled in the component)
                needs.append(need(fair.steps[k], None))
        else:
            needs.append(need(fair.steps[k], enabled))
    return needs


def _any_of(needs: list[Callable[[int, int], bool]]) -> Callable[[int, int], bool]:
    return lambda e, w: any(need(e, w) for need in needs)


def fair_cycle(graph: Graph, entry: int, component: list[int], fair: Fairness) -> Path:
    """A cycle from `entry` back to it inside `component` that meets every fairness
    condition: from `entry`, a shortest path to the nearest step that meets one still unmet,
    and so on, then a shortest path back."""
    inside = bytearray(len(graph))
    for v in component:
        inside[v] = 1
    needs = [need for need in _needs(graph, component, inside, fair) if not need(-1, entry)]
    cycle: Path = []
    here = entry
    while needs:
        leg = _shortest(graph, here, inside, _any_of(needs))
        assert leg is not None  # the component is strongly connected and fair
        cycle += leg
        here = leg[-1][1]
        needs = [need for need in needs if not any(need(e, w) for e, w in leg)]
    back = _shortest(graph, here, inside, lambda _e, w: w == entry)
    assert back is not None
    return cycle + back


def _depths(graph: Graph) -> array:
    """Each state's breadth-first depth (a parent's id is smaller than its child's)."""
    depth = array("i", bytes(4 * len(graph)))
    for v, parent in enumerate(graph.parents):
        if parent >= 0:
            depth[v] = depth[parent] + 1
    return depth


# Cycle entries tried for the shortest lasso: at most 64, and fewer in a big component (each
# try is a few breadth-first searches of it).
ENTRIES_TRIED = 64
WORK_PER_LASSO = 200_000


def _best_lasso(graph: Graph, entries: list[int], component: list[int], fair: Fairness) -> Lasso:
    """The shortest of the lassos entering `component` at the shallowest of `entries`."""
    best: Lasso | None = None
    best_length = 0
    depths = _depths(graph)
    tries = max(1, min(ENTRIES_TRIED, WORK_PER_LASSO // len(component)))
    for entry in sorted(entries, key=lambda v: (depths[v], v))[:tries]:
        depth = depths[entry]
        if best is not None and depth >= best_length:
            break
        cycle = fair_cycle(graph, entry, component, fair)
        if best is None or depth + len(cycle) < best_length:
            best, best_length = Lasso(_prefix(graph, entry), cycle), depth + len(cycle)
    assert best is not None
    return best


@attrs.frozen
class Lasso:
    """A counterexample as ids: a prefix from an initial state to the cycle's first state,
    then the cycle, whose last step returns to it."""

    prefix: list[int]  # state ids, the initial state first, the cycle's first state last
    cycle: Path  # steps from the cycle's first state; the last one reaches it again


def _prefix(graph: Graph, target: int) -> list[int]:
    path = [target]
    while graph.parents[path[-1]] >= 0:
        path.append(graph.parents[path[-1]])
    path.reverse()
    return path


def _negated(bits: bytearray) -> bytearray:
    return bits.translate(_NOT)


_NOT = bytes([1]) + bytes(255)  # as a translation table: 0 -> 1, anything else -> 0


def find_lasso(prop, truths: tuple[bytearray, ...], graph: Graph, fair: Fairness) -> Lasso | None:
    """A fair behaviour that violates `prop` (whose predicates hold where `truths` say), or
    None when it holds."""
    n = len(graph)
    if isinstance(prop, InfinitelyOften):
        avoid = _negated(truths[0])
        found = fair_components(graph, avoid, fair)
        if not found:
            return None
        component = min(found, key=min)
        return _best_lasso(graph, component, component, fair)
    if isinstance(prop, EventuallyAlways):
        failing = _negated(truths[0])
        everywhere = bytearray(b"\x01") * n
        found = [c for c in fair_components(graph, everywhere, fair) if any(failing[v] for v in c)]
        if not found:
            return None
        entry = min(v for c in found for v in c if failing[v])
        component = next(c for c in found if entry in c)
        return _best_lasso(graph, [v for v in component if failing[v]], component, fair)
    assert isinstance(prop, LeadsTo)
    p_holds, not_q = truths[0], _negated(truths[1])
    found = fair_components(graph, not_q, fair)
    if not found:
        return None
    in_fair = bytearray(n)
    for component in found:
        for v in component:
            in_fair[v] = 1
    # The states that can stay out of Q forever: a path through not-Q states reaches a fair
    # component of them.
    doomed = _reaching(graph, not_q, in_fair)
    bad = next((v for v in range(n) if doomed[v] and p_holds[v]), None)
    if bad is None:
        return None
    if in_fair[bad]:
        bridge: Path = []
    else:
        reached = _shortest(graph, bad, not_q, lambda _e, w: bool(in_fair[w]))
        assert reached is not None
        bridge = reached
    entry = bridge[-1][1] if bridge else bad
    component = next(c for c in found if entry in c)
    # The prefix runs to `bad` (a shortest path), then through not-Q states to the cycle.
    prefix = _prefix(graph, bad) + [w for _e, w in bridge]
    return Lasso(prefix, fair_cycle(graph, entry, component, fair))


def lasso_steps(
    model: ValidModel, graph: Graph, lasso: Lasso, canonical: Callable | None
) -> tuple[tuple[Step, ...], int, str]:
    """The lasso as real states (the model replayed along the ids, as `trace` does), the
    index of the cycle's first state, and the action that leads from the last state back to
    it (to a state of its symmetry class, under a symmetry)."""
    key = canonical or (lambda state: state)
    id_of = graph.id_of
    constraint, action_constraint = model.constraint, model.action_constraint

    def inside(state, action, successor) -> bool:
        return (constraint is None or constraint(successor)) and (
            action_constraint is None or action_constraint(state, action, successor)
        )

    def step(state, code: int, target: int) -> Step:
        if code == STUTTER:
            return Step(STUTTERING, state)
        wanted = graph.labels[label_of(code)]
        matches = [
            (action, successor)
            for action, successor in model.successors(state)
            if id_of(key(successor)) == target and inside(state, action, successor)
        ]
        action, successor = next(((a, s) for a, s in matches if a == wanted), matches[0])
        return Step(action, successor)

    first = lasso.prefix[0]
    state = next(s for s in model.initial_states() if id_of(key(s)) == first)
    steps = [Step(None, state)]
    for target in lasso.prefix[1:]:
        matches = [
            (a, s) for a, s in model.successors(state) if id_of(key(s)) == target and inside(state, a, s)
        ]
        action, state = matches[0]
        steps.append(Step(action, state))
    cycle_start = len(steps) - 1
    for code, target in lasso.cycle:
        steps.append(step(steps[-1].state, code, target))
    closing = steps.pop()
    assert closing.action is not None
    return tuple(steps), cycle_start, closing.action


def decide(
    model: ValidModel,
    result: ExplorationResult,
    canonical: Callable[[Hashable], Hashable] | None,
    limits: Limits,
    started: float,
    exact: bool = False,
    stop_at_first: bool = False,
) -> ExplorationResult:
    """`result` with the model's temporal properties decided: violations with their lassos,
    and properties that could not be decided `skipped` with the reason. `exact` keeps the
    graph's states whole instead of fingerprints; else the graph pass's collision bound is
    added to the result's. `stop_at_first` leaves the properties after the first violated one
    undecided (`skipped`), as TLC stops at its first counterexample."""
    names = [prop.name for prop in model.temporal]
    if not result.complete:
        reason = result.unproved()
        return attrs.evolve(result, skipped={**result.skipped, **dict.fromkeys(names, reason)})
    try:
        graph = build_graph(model, canonical, limits, started, exact)
    except OverBudget as error:
        return _stopped(result, names, error)
    try:
        unknown_fairness_labels(model, graph.labels)
        fair = fairness_of(model, graph)
        violations = dict(result.violations)
        skipped = dict(result.skipped)
        for position, (prop, truths) in enumerate(zip(model.temporal, graph.truths)):
            lasso = find_lasso(prop, truths, graph, fair)
            over = limits.exceeded(0, started, peak_bytes())
            if over:
                raise OverBudget(over)
            if lasso is not None:
                steps, cycle_start, back = lasso_steps(model, graph, lasso, canonical)
                violations[prop.name] = Violation(prop.name, steps, cycle_start, back)
                if stop_at_first:
                    skipped.update(dict.fromkeys(names[position + 1 :], STOPPED_AT_FIRST))
                    break
    except OverBudget as error:
        return _stopped(result, names, error)
    finally:
        graph.close()
    risk = summed_risk([result.collision_probability, graph.store.risk()])
    seconds = time.monotonic() - started
    return attrs.evolve(
        result, violations=violations, skipped=skipped, seconds=seconds, collision_probability=risk
    )


def unknown_fairness_labels(model: ValidModel, labels: list[str]) -> None:
    """Refuse a fairness condition that no step of the graph takes (`WF("Inc")` where the
    label is "inc"): it would constrain nothing, silently. Known only once every label is,
    unless the model declares its `actions`."""
    for position, condition in enumerate(model.fairness):
        if model.actions and isinstance(condition.action, str):
            continue  # one of the declared actions (`validate`), which a run need not take
        if any(condition.matches(label) for label in labels):
            continue
        named = condition.action if isinstance(condition.action, str) else None
        close = difflib.get_close_matches(named, labels, n=1, cutoff=0.6) if named else []
        mean = f"; did you mean {close[0]!r}?" if close else ""
        shown = ", ".join(sorted(labels)[:8]) + (", ..." if len(labels) > 8 else "")
        raise ModelError(
            f"model.fairness[{position}]: {condition.shown()} takes no step of the model (its "
            f"labels: {shown or 'none'}){mean}"
        )


def _stopped(result: ExplorationResult, names: list[str], error: OverBudget) -> ExplorationResult:
    """`result` with every temporal property skipped: a budget stopped the graph pass."""
    stopped = f"temporal check stopped: {error}"
    return attrs.evolve(result, skipped={**result.skipped, **dict.fromkeys(names, stopped)})
