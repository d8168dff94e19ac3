"""No silent wrong verdict for a TLA+ user (issue 42): a symmetry never decides a temporal
property, fairness reads ENABLED as TLC does under a CONSTRAINT, and every misspelt or TLA+-
flavoured attribute name is refused in one line."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

from pymc_resume.explore import SF, WF, EventuallyAlways, InfinitelyOften, Invariant, LeadsTo, explore
from pymc_resume.explore.validate import ModelError, validated


class Flips:
    """Two bits, each flipped by its own action; `canonical` sorts them (a symmetry under
    which the properties, about bit 0, are not symmetric: TLC's "dangerous" case)."""

    deadlock_is_error = False

    def __init__(self, fairness, temporal):
        self.fairness = fairness
        self.temporal = temporal

    def initial_states(self):
        return [(0, 0)]

    def successors(self, state):
        a, b = state
        yield "flip0", (1 - a, b)
        yield "flip1", (a, 1 - b)

    def canonical(self, state):
        return tuple(sorted(state))


TEMPORAL = [
    InfinitelyOften("BitZeroSet", lambda s: s[0] == 1),
    EventuallyAlways("BitZeroClear", lambda s: s[0] == 0),
    LeadsTo("ClearThenSet", lambda s: s[0] == 0, lambda s: s[0] == 1),
    InfinitelyOften("BothSet", lambda s: s == (1, 1)),
]
FAIRNESS = [[], [WF("flip0")], [SF("flip1")], [WF("flip0"), WF("flip1")]]


@pytest.mark.parametrize("fairness", FAIRNESS, ids=["none", "wf0", "sf1", "wf-both"])
def test_a_symmetry_never_changes_a_temporal_verdict(fairness):
    model = Flips(fairness, TEMPORAL)
    reduced, whole = explore(model, canonical=model.canonical), explore(model)
    assert reduced.distinct_states == 3 and whole.distinct_states == 4  # the safety search reduces
    for prop in TEMPORAL:
        assert reduced.holds(prop.name) == whole.holds(prop.name), prop.name
        if prop.name in reduced.violations:  # a lasso of real states, as without symmetry
            assert len(reduced.violations[prop.name].trace) == len(whole.violations[prop.name].trace)


def test_under_weak_fairness_of_flip0_bit_zero_is_set_infinitely_often_with_symmetry_too():
    # On the representatives, (0,0) -flip0-> (0,1) -flip1-> (0,0) takes flip0 and never sets
    # bit 0: a verdict on classes would say violated.
    model = Flips([WF("flip0")], TEMPORAL[:1])
    assert explore(model, canonical=model.canonical).holds("BitZeroSet")


class Counter:
    """TLC's ten lines: VARIABLE x; Init == x = 0; Inc == x' = x + 1;
    Spec == Init /\\ [][Inc]_x /\\ WF_x(Inc); CONSTRAINT x <= 2; PROPERTY []<>(x = 0).
    TLC: no error. ENABLED Inc is evaluated without the constraint, so Inc is enabled at x = 2
    and every behaviour that stutters anywhere is unfair: there is no fair behaviour at all."""

    stuttering = True
    deadlock_is_error = False
    temporal = [InfinitelyOften("BackToZero", lambda x: x == 0)]
    fairness = [WF("Inc")]

    def __init__(self, within=None):
        if within is not None:
            self.enabled_within_constraints = within

    def initial_states(self):
        return [0]

    def successors(self, x):
        yield "Inc", x + 1

    def constraint(self, x):
        return x <= 2


def test_fairness_under_a_constraint_reads_enabled_as_tlc_does():
    result = explore(Counter())
    assert result.complete and result.distinct_states == 3
    assert result.holds("BackToZero")  # TLC: "Model checking completed. No error has been found."


def test_the_constrained_reading_is_an_option():
    # Inc's only step at x = 2 leaves the constraint: read as disabled, stuttering there is fair.
    lasso = explore(Counter(within=True)).violations["BackToZero"]
    assert [step.state for step in lasso.trace] == [0, 1, 2] and lasso.loops_back == "stuttering"


def test_the_same_holds_for_an_action_constraint():
    class Bounded(Counter):
        constraint = None

        def action_constraint(self, x, action, y):
            return y <= 2

    assert explore(Bounded()).holds("BackToZero")
    assert not explore(Bounded(within=True)).holds("BackToZero")


def _model(**attributes):
    """A one-state model with `attributes` set on it (a class attribute each)."""

    class Model:
        deadlock_is_error = False

        def initial_states(self):
            return [0]

        def successors(self, state):
            return [("inc", state)]

    for name, value in attributes.items():
        setattr(Model, name, value)
    return Model()


SAFE = [Invariant("Safe", lambda s: True)]
LIVE = [InfinitelyOften("Live", lambda s: True)]
MISSPELT = [
    ({"invariants": [], "invariant": SAFE}, "model.invariant: .*did you mean 'invariants'"),
    ({"temporal": LIVE, "fairness": [], "fairnes": [WF("inc")]}, "model.fairnes: .*did you mean 'fairness'"),
    ({"Invariants": SAFE}, "did you mean 'invariants'"),
    ({"initialStates": lambda self: [0]}, "did you mean 'initial_states'"),
    ({"constraints": lambda self, s: True}, "model.constraints: a TLA\\+/TLC name.*constraint\\(state\\)"),
    (
        {"action_constraints": lambda self, s, a, t: True},
        "model.action_constraints: a TLA\\+/TLC name.*action_constraint\\(state",
    ),
    ({"properties": LIVE}, "model.properties: a TLA\\+/TLC name.*temporal"),
    ({"property": LIVE}, "model.property: a TLA\\+/TLC name.*temporal"),
    ({"symmetry": lambda self, s: s}, "model.symmetry: a TLA\\+/TLC name.*canonical\\(state\\)"),
    ({"check_deadlock": False}, "model.check_deadlock: a TLA\\+/TLC name.*deadlock_is_error"),
    ({"state_constraint": lambda self, s: True}, "model.state_constraint: a TLA\\+/TLC name.*constraint"),
    ({"stutter": True}, "did you mean 'stuttering'"),
    ({"state_field": ("x",)}, "did you mean 'state_fields'"),
    ({"reachable": []}, "did you mean 'reachability'"),
    ({"canonicalize": lambda self, s: s}, "did you mean 'canonical'"),
    ({"deadlock_is_eror": False}, "did you mean 'deadlock_is_error'"),
    ({"enabled_within_constraint": True}, "did you mean 'enabled_within_constraints'"),
    ({"invariants": {"Safe": lambda s: True}}, "model.invariants: must be a list of Invariant.*got a dict"),
    ({"temporal": {"Live": LIVE[0]}}, "model.temporal: must be a list of .*got a dict"),
    ({"enabled_within_constraints": "yes"}, "model.enabled_within_constraints: must be True or False"),
    ({"CHECK_DEADLOCK": False}, "model.CHECK_DEADLOCK: a TLA\\+/TLC name.*deadlock_is_error"),
    ({"temporal_properties": LIVE}, "model.temporal_properties: a TLA\\+/TLC name.*temporal"),
    ({"stuttering_allowed": True}, "model.stuttering_allowed: a TLA\\+/TLC name.*stuttering"),
    ({"weak_fairness": [WF("inc")]}, "model.weak_fairness: a TLA\\+/TLC name.*fairness"),
    ({"safety": SAFE}, "model.safety: a TLA\\+/TLC name.*invariants"),
    ({"checks": SAFE}, "model.checks: holds what the explorer reads only in model.invariants"),
    ({"live": {"Live": LIVE[0]}}, "model.live: holds what the explorer reads only in model.temporal"),
    ({"fair": (WF("inc"),)}, "model.fair: holds what the explorer reads only in model.fairness"),
    ({"successor": lambda self, s: []}, "did you mean 'successors'"),
    ({"state_fields": "x"}, "model.state_fields: must be a list of field names"),
]


@pytest.mark.parametrize(("attributes", "message"), MISSPELT, ids=[next(iter(a)) for a, _ in MISSPELT])
def test_a_misspelt_or_tla_flavoured_attribute_is_refused_in_one_line(attributes, message):
    with pytest.raises(ModelError, match=message) as raised:
        validated(_model(**attributes))
    assert "\n" not in str(raised.value)


def test_a_missing_successors_names_what_the_model_has_instead():
    class Spec:
        def initial_states(self):
            return [0]

        def next(self, state):
            return [("inc", state + 1)]

    with pytest.raises(ModelError, match=r"model.successors: missing.*is model.next meant\?"):
        validated(Spec())


def test_a_factory_returning_none_is_named():
    with pytest.raises(ModelError, match="the factory returned None"):
        validated(None)


def test_a_fairness_label_no_step_carries_is_an_error_after_the_search():
    model = _model(temporal=LIVE, fairness=[WF("Inc")])
    with pytest.raises(ModelError, match=r"model.fairness\[0\]: WF\(Inc\) takes no step.*did you mean 'inc'"):
        explore(model)


def test_a_fairness_label_outside_the_declared_actions_is_an_error_before_the_search():
    model = _model(temporal=LIVE, fairness=[WF("Inc")], actions=["inc"])
    with pytest.raises(
        ModelError, match=r"model.fairness\[0\]: WF\(Inc\) names 'Inc', none of model.actions"
    ):
        validated(model)


@pytest.mark.parametrize(
    "name",
    [
        "async_termination_detection",
        "dining_philosophers",
        "distributed_replicated_log",
        "ewd840",
        "lamport_mutex",
        "simple_regular",
        "tcommit",
        "two_phase",
    ],
)
def test_the_example_models_pass_the_attribute_checks(name):
    validated(importlib.import_module(name).model())


FAULTY = """
from pymc_resume.explore import Invariant, InfinitelyOften, WF


class Faulty:
    deadlock_is_error = False
    state_fields = ("x", "y")

    def __init__(self, where):
        self.where = where
        self.invariants = [Invariant("Small", self.small)]
        self.temporal = [InfinitelyOften("Back", self.back)]
        self.fairness = [WF(self.is_inc, name="Inc")]

    def initial_states(self):
        return [(0, 0)]

    def successors(self, s):
        x, y = s
        if self.where == "successors" and x == 3:
            raise KeyError("boom")
        if x < 4:
            yield "inc", (x + 1, y)
        if y < 3:
            yield "up", (x, y + 1)

    def small(self, s):
        if self.where == "invariant" and s == (3, 2):
            raise ValueError("bad invariant")
        return True

    def back(self, s):
        if self.where == "temporal" and s == (2, 3):
            raise ZeroDivisionError("bad temporal")
        return s == (0, 0)

    def is_inc(self, label):
        if self.where == "fairness" and label == "up":
            raise RuntimeError("bad fairness")
        return label == "inc"


def model(where):
    return Faulty(where)
"""
FAULTS = [
    ("successors", 1, "KeyError: 'boom' in model.successors() in state (3, 0) (reached by inc, step 3)"),
    ("successors", 2, "KeyError: 'boom' in model.successors() in state (3, 0) (reached by inc, step 3)"),
    (
        "invariant",
        1,
        "bad invariant in Faulty.small() (invariant 'Small') in state (3, 2) (reached by up, step 5)",
    ),
    (
        "invariant",
        2,
        "bad invariant in Faulty.small() (invariant 'Small') in state (3, 2) (reached by up, step 5)",
    ),
    (
        "temporal",
        2,
        "bad temporal in Faulty.back() (temporal property 'Back', its p) in state (2, 3) (reached by up",
    ),
    (
        "fairness",
        1,
        "bad fairness in Faulty.is_inc('up') (fairness[0] WF(Inc), asked of a step's label) in state",
    ),
]


@pytest.mark.parametrize(("where", "workers", "line"), FAULTS)
def test_a_model_error_names_function_state_and_action_and_gives_the_path(tmp_path, where, workers, line):
    path = tmp_path / "faulty.py"
    path.write_text(FAULTY + f"\n\ndef {where}():\n    return Faulty({where!r})\n")
    out = tmp_path / "out.json"
    done = run(f"{path}:{where}", "--quiet", "--workers", str(workers), "--json", str(out))
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and line in done.stderr
    written = json.loads(out.read_text())
    assert written["error"] in done.stderr and written["trace"][0]["action"] == "initial state"
    last = written["trace"][-1]
    assert (
        last["state"] in done.stderr
        and f"{last['action']}, step {last['step']}" in done.stderr
        or where == "fairness"
    )
    assert "the model raised in the last state of this path" in done.stdout


def run(*args: str, env: dict | None = None):
    environment = {**os.environ, **env} if env else None
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", "explore", *args],
        capture_output=True,
        text=True,
        check=False,
        env=environment,
    )


POLL = """
from typing import NamedTuple

from pymc_resume.explore import WF, InfinitelyOften, LeadsTo


class S(NamedTuple):
    pc: str
    polls: int


class Poll:
    temporal = [
        LeadsTo("Finishes", lambda s: s.pc == "busy", lambda s: s.pc == "done"),
        InfinitelyOften("Polls", lambda s: s.polls == 1),
    ]

    def __init__(self, fair):
        self.fairness = [WF("finish")] if fair else []

    def initial_states(self):
        return [S("busy", 0)]

    def successors(self, state):
        if state.pc == "busy":
            yield "finish", S("done", state.polls)
            yield "poll", S("busy", 1 - state.polls)


def fair():
    return Poll(True)


def unfair():
    return Poll(False)
"""


def test_a_lasso_replays_and_a_named_tuple_trace_travels(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "poll.py").write_text(POLL)
    (second / "poll.py").write_text(POLL)
    out = tmp_path / "lasso.json"
    found = run(f"{first / 'poll.py'}:unfair", "--quiet", "--no-deadlock", "--json", str(out))
    assert found.returncode == 1, found.stderr
    assert '"class": "poll:S"' in out.read_text()  # the file's stem, not its path's hash
    for target, env in (
        (f"{first / 'poll.py'}:unfair", None),
        (f"{second / 'poll.py'}:unfair", None),  # the file copied elsewhere
        ("poll:unfair", {"PYTHONPATH": str(second)}),  # loaded as module:factory
    ):
        done = run(target, "--replay-trace", str(out), "--property", "Finishes", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert (
            "replays: a fair lasso of the model" in done.stdout
            and "Finishes is violated on it" in done.stdout
        )
    # Under WF(finish) the recorded cycle is unfair: the replay says so and exits 1.
    unfair = run(f"{first / 'poll.py'}:fair", "--replay-trace", str(out), "--property", "Finishes")
    assert unfair.returncode == 1 and "the cycle is not fair: WF(finish)" in unfair.stdout
    # A lasso whose closing step is altered does not close.
    data = json.loads(out.read_text())
    data["properties"]["Finishes"]["lasso"]["loops_back_by"] = "finish"
    out.write_text(json.dumps(data))
    broken = run(f"{first / 'poll.py'}:unfair", "--replay-trace", str(out), "--property", "Finishes")
    assert broken.returncode == 1 and "the cycle does not close" in broken.stdout


def test_stop_at_first_stops_at_the_first_temporal_violation(tmp_path):
    (tmp_path / "poll.py").write_text(POLL)
    out = tmp_path / "out.json"
    args = (f"{tmp_path / 'poll.py'}:unfair", "--quiet", "--no-deadlock", "--json", str(out))
    done = run(*args, "--stop-at-first")
    assert done.returncode == 1, done.stderr
    verdicts = json.loads(out.read_text())["properties"]
    assert verdicts["Finishes"]["verdict"] == "violated" and verdicts["Polls"]["verdict"] == "skipped"
    assert "stopped at the first violation" in verdicts["Polls"]["reason"]
    assert run(*args).returncode == 1  # without it, both are decided
    assert {v["verdict"] for v in json.loads(out.read_text())["properties"].values()} == {"violated"}


def test_every_verdict_row_shows_the_runs_states(tmp_path):
    (tmp_path / "poll.py").write_text(POLL)
    done = run(f"{tmp_path / 'poll.py'}:unfair", "--quiet")
    assert done.returncode == 1, done.stderr
    # The deadlock row below a lasso shows the run's 4 states, not the lasso's length.
    lines = done.stdout.splitlines()
    rows = [row for row in map(str.split, lines) if len(row) > 3 and row[1] in ("temporal", "deadlock")]
    assert [(row[0], row[3]) for row in rows] == [("Finishes", "4"), ("Polls", "4"), ("deadlock", "4")]
