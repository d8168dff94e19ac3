"""Temporal properties under fairness (`explore/properties/liveness.py`): tiny models whose answers are known,
verdicts that fairness flips, every lasso checked by an independent judge, the algorithm against a
brute force over every strongly connected set of states of random graphs, and the command's
table and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pymc_resume.explore import SF, WF, EventuallyAlways, InfinitelyOften, LeadsTo, explore
from pymc_resume.explore.properties import adjacency
from pymc_resume.explore.properties.liveness import STUTTERING, decide
from pymc_resume.explore.store.limits import Limits
from pymc_resume.explore.validate import ModelError, validated


class Graph:
    """A model given as its graph: states are ints, `edges[s]` lists (label, target); a step
    from a state to itself is a stuttering step (it takes no action)."""

    deadlock_is_error = False

    def __init__(self, edges, temporal, fairness=(), stuttering=False, initial=(0,)):
        self.edges = edges
        self.temporal = list(temporal)
        self.fairness = list(fairness)
        self.stuttering = stuttering
        self.initial = list(initial)

    def initial_states(self):
        return self.initial

    def successors(self, state):
        return iter(self.edges.get(state, ()))


def judge_lasso(model, prop, violation) -> None:
    """Fail unless `violation` is a lasso of `model` (a path from an initial state, whose last
    state steps back to the cycle's first), fair under the model's fairness, violating `prop`."""
    steps, k = violation.trace, violation.cycle_start
    assert k is not None and 0 <= k < len(steps)
    assert steps[0].action is None and steps[0].state in list(model.initial_states())

    def stutters(state) -> bool:
        return model.stuttering or not list(model.successors(state))

    # A view (TLC's VIEW): equal up to it. A symmetry reduces no temporal check.
    key = getattr(model, "view", lambda state: state)

    def is_step(before, action, after) -> bool:
        if action == STUTTERING:
            return key(before) == key(after) and stutters(before)
        return any(a == action and key(t) == key(after) for a, t in model.successors(before))

    for before, step in zip(steps, steps[1:]):
        assert is_step(before.state, step.action, step.state)
    assert is_step(steps[-1].state, violation.loops_back, steps[k].state)
    cycle = [s.state for s in steps[k:]]
    moves = [(s.action, s.state) for s in steps[k + 1 :]] + [(violation.loops_back, steps[k].state)]
    sources = cycle
    for condition in model.fairness:
        taken = any(
            condition.matches(action) and target != source
            for source, (action, target) in zip(sources, moves)
            if action != STUTTERING
        )
        enabled = [any(condition.matches(a) and t != s for a, t in model.successors(s)) for s in cycle]
        if isinstance(condition, WF):
            assert taken or not all(enabled), condition
        else:
            assert taken or not any(enabled), condition
    states = [s.state for s in steps]
    if isinstance(prop, InfinitelyOften):
        assert not any(prop.p(s) for s in cycle)
    elif isinstance(prop, EventuallyAlways):
        assert not all(prop.p(s) for s in cycle)
    else:
        assert any(
            prop.p(states[i]) and not any(prop.q(s) for s in states[min(i, k) :]) for i in range(len(states))
        )


def verdicts(model) -> dict:
    result = explore(model)
    assert result.complete
    for prop in model.temporal:
        if prop.name in result.violations:
            judge_lasso(model, prop, result.violations[prop.name])
    return {prop.name: prop.name not in result.violations for prop in model.temporal}


# 0 -go-> 1; 1 -finish-> 2 (done); 1 -spin-> 3 -back-> 1: finish is enabled at 1 only.
SPIN = {0: [("go", 1)], 1: [("finish", 2), ("spin", 3)], 3: [("back", 1)]}
# The same with a poll that keeps finish enabled: 1 -poll-> 4 -poll-> 1, finish at 1 and 4.
POLL = {0: [("go", 1)], 1: [("finish", 2), ("poll", 4)], 4: [("finish", 2), ("poll", 1)]}


def props():
    return [
        LeadsTo("Done", lambda s: s == 0, lambda s: s == 2),
        InfinitelyOften("OftenStartOrDone", lambda s: s in (0, 2)),
        EventuallyAlways("Settles", lambda s: s == 2),
    ]


ALL = ("Done", "OftenStartOrDone", "Settles")


def test_without_fairness_a_cycle_that_never_finishes_violates_all_three():
    assert verdicts(Graph(SPIN, props())) == dict.fromkeys(ALL, False)


def test_weak_fairness_does_not_help_when_the_action_is_disabled_on_the_cycle():
    assert verdicts(Graph(SPIN, props(), [WF("finish")])) == dict.fromkeys(ALL, False)


def test_strong_fairness_flips_the_verdict_where_the_action_is_enabled_infinitely_often():
    assert verdicts(Graph(SPIN, props(), [SF("finish")])) == dict.fromkeys(ALL, True)


def test_weak_fairness_flips_the_verdict_where_the_action_stays_enabled():
    assert verdicts(Graph(POLL, props())) == dict.fromkeys(ALL, False)
    assert verdicts(Graph(POLL, props(), [WF("finish")])) == dict.fromkeys(ALL, True)


def test_a_predicate_names_every_label_it_accepts():
    fair = WF(lambda action: action in ("finish", "go"), name="Progress")
    assert verdicts(Graph(POLL, props(), [fair], stuttering=True))["Done"]


def test_with_stuttering_an_unfair_state_may_repeat_forever():
    # TLA+'s behaviours: without fairness on go, the initial state may stutter forever.
    model = Graph(POLL, props(), [WF("finish")], stuttering=True)
    result = explore(model)
    lasso = result.violations["Done"]
    assert [s.state for s in lasso.trace] == [0] and lasso.loops_back == STUTTERING
    assert verdicts(Graph(POLL, props(), [WF("finish"), WF("go")], stuttering=True))["Done"]


def test_a_deadlock_stutters_forever_and_a_stuttering_step_takes_no_action():
    # 0 -a-> 1, and 1 only steps to itself (labelled a): 1 stutters forever, which takes no a,
    # so WF(a) holds there (a is not enabled: its only step changes nothing).
    back = InfinitelyOften("BackAtZero", lambda s: s == 0)
    model = Graph({0: [("a", 1)], 1: [("a", 1)]}, [back], [WF("a")])
    result = explore(model)
    assert result.violations["BackAtZero"].trace[-1].state == 1
    ended = Graph({0: [("a", 1)]}, [EventuallyAlways("StaysZero", lambda s: s == 0)])
    lasso = explore(ended).violations["StaysZero"]
    assert [s.state for s in lasso.trace] == [0, 1] and lasso.loops_back == STUTTERING


def test_lasso_prefix_is_shortest_and_the_cycle_is_marked():
    # a chain 0..5, then a cycle 5 -> 6 -> 5 where P never holds.
    edges = {i: [("next", i + 1)] for i in range(5)} | {5: [("x", 6)], 6: [("y", 5)]}
    model = Graph(edges, [InfinitelyOften("ZeroAgain", lambda s: s == 0)])
    lasso = explore(model).violations["ZeroAgain"]
    assert [s.state for s in lasso.trace] == [0, 1, 2, 3, 4, 5, 6]
    assert lasso.cycle_start == 5 and lasso.loops_back == "y"


def test_long_chains_need_no_recursion():
    n = 20_000  # deeper than the recursion limit: Tarjan is iterative
    edges = {i: [("next", i + 1)] for i in range(n)} | {n: [("next", 0)]}
    result = explore(Graph(edges, [InfinitelyOften("Never", lambda s: s == -1)]))
    lasso = result.violations["Never"]
    assert len(lasso.trace) == n + 1 and lasso.cycle_start == 0


def test_constraints_and_symmetry_shape_the_graph_as_in_the_safety_search():
    class Ring:
        """Two tokens on a ring of 4; symmetry forgets which token is which."""

        deadlock_is_error = False
        temporal = [InfinitelyOften("AtZero", lambda s: 0 in s)]

        def __init__(self, fair):
            self.fairness = [WF(lambda a: a.startswith("move"), name="move")] if fair else []

        def initial_states(self):
            return [(0, 1)]

        def successors(self, state):
            for i in (0, 1):
                yield f"move({i})", tuple(sorted(state[:i] + ((state[i] + 1) % 4,) + state[i + 1 :]))
            yield "wait", state

        def canonical(self, state):
            return tuple(sorted(state))

        def action_constraint(self, state, action, successor):
            return len(set(successor)) == 2  # tokens never share a place

    assert not verdicts(Ring(fair=False))["AtZero"]  # waiting forever at (1, 2): a self loop
    assert verdicts(Ring(fair=True))["AtZero"]


@st.composite
def random_models(draw):
    n = draw(st.integers(1, 6))
    labels = ["a", "b", "c"]
    edges = {
        s: draw(st.lists(st.tuples(st.sampled_from(labels), st.integers(0, n - 1)), max_size=3, unique=True))
        for s in range(n)
    }
    p = frozenset(draw(st.sets(st.integers(0, n - 1))))
    q = frozenset(draw(st.sets(st.integers(0, n - 1))))
    fairness = draw(
        st.lists(st.tuples(st.booleans(), st.sampled_from(labels)), max_size=3).map(
            lambda fs: [(SF if strong else WF)(label) for strong, label in fs]
        )
    )
    temporal = [
        LeadsTo("LeadsTo", p.__contains__, q.__contains__),
        InfinitelyOften("InfinitelyOften", p.__contains__),
        EventuallyAlways("EventuallyAlways", p.__contains__),
    ]
    model = Graph(edges, temporal, fairness, stuttering=draw(st.booleans()))
    model.actions = labels  # a fairness condition may name an action no step takes
    return model


def brute_force(model) -> dict[str, bool]:
    """Every property's verdict from every set of reachable states that is strongly connected
    (with a cycle) and fair with all its inner steps: such a set is what a fair behaviour
    visits forever."""
    reach, todo = {0}, [0]
    while todo:
        s = todo.pop()
        for _a, t in model.successors(s):
            if t not in reach:
                reach.add(t)
                todo.append(t)

    def steps(s):
        found = [(a, t) for a, t in model.successors(s)]
        if model.stuttering or not found:
            found.append((STUTTERING, s))
        return found

    def reaches(inside, start):
        seen, todo = {start}, [start]
        while todo:
            s = todo.pop()
            for _a, t in steps(s):
                if t in inside and t not in seen:
                    seen.add(t)
                    todo.append(t)
        return seen

    fair_sets = []
    states = sorted(reach)
    for mask in range(1, 2 ** len(states)):
        inside = {s for i, s in enumerate(states) if mask >> i & 1}
        start = min(inside)
        if reaches(inside, start) != inside or any(start not in reaches(inside, s) for s in inside):
            continue
        if len(inside) == 1 and not any(t == start for _a, t in steps(start)):
            continue
        fair = True
        for c in model.fairness:
            taken = any(
                c.matches(a) and t != s
                for s in inside
                for a, t in steps(s)
                if t in inside and a != STUTTERING
            )
            enabled = [any(c.matches(a) and t != s for a, t in model.successors(s)) for s in inside]
            if not taken and (all(enabled) if isinstance(c, WF) else any(enabled)):
                fair = False
        if fair:
            fair_sets.append(inside)
    leads, often, always = model.temporal
    not_q = {s for s in reach if not leads.q(s)}
    starts = [s for s in not_q if leads.p(s)]
    return {
        "LeadsTo": not any(
            inside <= not_q and any(reaches(not_q, s) & inside for s in starts) for inside in fair_sets
        ),
        "InfinitelyOften": not any(not any(often.p(s) for s in inside) for inside in fair_sets),
        "EventuallyAlways": not any(not all(always.p(s) for s in inside) for inside in fair_sets),
    }


@settings(max_examples=300, deadline=None)
@given(random_models())
def test_verdicts_agree_with_a_brute_force_over_every_strongly_connected_set(model):
    assert verdicts(model) == brute_force(model)


@settings(max_examples=60, deadline=None)
@given(random_models())
def test_the_graph_on_disk_or_with_whole_states_gives_the_same_lassos(model):
    # The graph pass keeps ids by fingerprint and edges in memory: with every edge written to
    # disk and read back, or with the states kept whole (`exact`), each property gets the same
    # verdict and the same lasso, step for step.
    usual = explore(model)
    with mock.patch.object(adjacency, "IN_MEMORY", 1):
        on_disk = explore(model)
    exact = explore(model, exact=True)
    assert usual.violations == on_disk.violations == exact.violations
    assert usual.collision_probability == 0.0 and exact.collision_probability is None  # (int states)


def test_a_budget_skips_the_temporal_properties_with_the_reason():
    edges = {i: [("next", i + 1)] for i in range(50)}
    model = Graph(edges, [InfinitelyOften("Never", lambda s: s == -1)])
    stopped = explore(model, max_states=10)
    assert not stopped.complete and "Never" not in stopped.violations
    # A complete search whose graph pass hits the budget: the property is skipped, not held.
    valid = validated(model)
    complete = explore(model)
    result = decide(valid, complete, None, Limits(max_states=20), 0.0)
    assert "Never" in result.skipped and "state limit" in result.skipped["Never"]
    assert not result.holds("Never")


def test_two_workers_give_the_same_verdicts_and_lasso_lengths():
    model = Graph(POLL, props(), [WF("finish")], stuttering=True)
    one, two = explore(model), explore(model, workers=2)
    lengths = [{n: len(v.trace) for n, v in r.violations.items()} for r in (one, two)]
    assert lengths[0] == lengths[1] and set(lengths[0]) == {"Done", "Settles"}


@pytest.mark.parametrize(
    ("attribute", "value", "message"),
    [
        ("temporal", [object()], "model.temporal[0]: must be a LeadsTo, InfinitelyOften or EventuallyAlways"),
        ("temporal", [LeadsTo("X", lambda s: True, None)], "model.temporal[0]: q must be callable"),
        ("fairness", [WF(3)], "model.fairness[0]: action must be a label or callable"),
        ("stuttering", "yes", "model.stuttering: must be True or False"),
        ("fairnes", [WF("a")], "did you mean 'fairness'"),
    ],
)
def test_malformed_temporal_declarations_are_one_line(attribute, value, message):
    model = Graph(SPIN, props())
    if attribute != "fairnes":
        setattr(model, attribute, value)
    else:
        model.fairnes = value
        del model.fairness
    with pytest.raises(ModelError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        validated(model)


MODEL_FILE = """
from pymc_resume.explore import LeadsTo, WF


class Poll:
    state_fields = ("pc", "polls")
    deadlock_is_error = False
    temporal = [LeadsTo("Finishes", lambda s: s[0] == "busy", lambda s: s[0] == "done")]

    def __init__(self, fair):
        self.fairness = [WF("finish")] if fair else []

    def initial_states(self):
        return [("busy", 0)]

    def successors(self, state):
        pc, polls = state
        if pc == "busy":
            yield "finish", ("done", polls)
            yield "poll", ("busy", 1 - polls)


def fair():
    return Poll(True)


def unfair():
    return Poll(False)
"""


def run(*args: str):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", "explore", *args], capture_output=True, text=True, check=False
    )


def test_the_command_prints_the_lasso_and_writes_it_as_json(tmp_path):
    path = tmp_path / "poll.py"
    path.write_text(MODEL_FILE)
    out = tmp_path / "out.json"
    done = run(f"{path}:unfair", "--quiet", "--json", str(out))
    assert done.returncode == 1, done.stderr
    assert "Finishes  temporal  violated" in done.stdout
    assert "0 (cycle)" in done.stdout and "back to 0" in done.stdout
    found = json.loads(out.read_text())["properties"]["Finishes"]
    assert found["kind"] == "temporal" and found["verdict"] == "violated"
    lasso = found["lasso"]
    assert lasso["prefix"] == [] and [row["action"] for row in lasso["cycle"]] == ["initial state", "poll"]
    assert lasso["loops_back_to_step"] == 0 and lasso["loops_back_by"] == "poll"
    held = run(f"{path}:fair", "--quiet")
    assert held.returncode == 0 and "Finishes  temporal  holds" in held.stdout
    refused = run(f"{path}:fair", "--simulate")
    assert refused.returncode == 2 and "temporal properties" in refused.stderr
