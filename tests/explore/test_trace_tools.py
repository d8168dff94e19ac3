"""Traces as data, replayed, and the state graph as DOT: `state_json`, `trace_replay`,
`graph_dump` and their options on `pymc-resume explore` (`--replay-trace`, `--dump-graph`)."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import importlib.util
import json
import re
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import attrs
import pytest

from pymc_resume.checking.explore_check import run_explore
from pymc_resume.explore import Invariant
from pymc_resume.explore.traces.graph_dump import GraphTooLarge, dot, quoted, state_graph
from pymc_resume.explore.traces.state_json import ModelClasses, StateDataError, decode, encoded
from pymc_resume.explore.traces.trace_replay import read_trace, replay
from pymc_resume.explore.validate import validated

ROOT = Path(__file__).resolve().parents[2]


class Colour(enum.Enum):
    RED = "red"
    BLUE = 2


Pair = namedtuple("Pair", "left right")


@attrs.frozen
class Node:
    name: str
    _hidden: int  # attrs's constructor takes it as `hidden`


@dataclasses.dataclass(frozen=True)
class Box:
    items: frozenset
    colour: Colour


class Here:
    """A model defined in this module: its states' classes may be loaded back."""


RICH = (
    Pair(Node("a", 1), Box(frozenset({1, (2, "x"), None}), Colour.BLUE)),
    (True, 1, 1.5, "s", None, Colour.RED),
    frozenset({Pair(0, 1), Pair(1, 0)}),
)


def test_a_state_of_json_able_parts_loads_back_exactly_from_its_tagged_data():
    data = encoded(RICH, ModelClasses(Here()))
    assert data is not None
    back = decode(json.loads(json.dumps(data)), ModelClasses(Here()))
    assert back == RICH and type(back[0]) is Pair and type(back[0].left) is Node
    assert type(back[1][0]) is bool and type(back[1][1]) is int and back[1][5] is Colour.RED
    assert data["tuple"][1] == {
        "tuple": [True, 1, 1.5, "s", None, {"enum": f"{__name__}:Colour", "name": "RED"}]
    }
    assert data["tuple"][0]["fields"]["left"] == {
        "class": f"{__name__}:Node",
        "fields": {"name": "a", "_hidden": 1},
    }


def test_a_state_that_would_not_load_back_has_no_data():
    class Local(namedtuple("Local", "x")):  # not reachable by its qualified name
        pass

    classes = ModelClasses(Here())
    assert encoded((1, Local(2)), classes) is None
    assert encoded((1, b"bytes"), classes) is None
    assert encoded((1, float("nan")), classes) is None
    assert encoded((1, Pair(1, 2)), ModelClasses(object())) is None  # not the model's module


@pytest.mark.parametrize(
    "data, message",
    [
        ([1, 2], "expected a value or a tagged object, got a JSON list"),
        ({"tuple": [1], "list": []}, "one of the tags"),
        ({"class": "os:stat_result", "fields": {}}, "not defined by the model's own modules"),
        ({"class": f"{__name__}:Missing", "fields": {}}, "does not exist"),
        ({"class": f"{__name__}:Here", "fields": {}}, "not a named tuple, attrs class"),
        ({"class": f"{__name__}:Pair", "fields": {"left": 1}}, "takes the fields"),
        ({"enum": f"{__name__}:Colour", "name": "GREEN"}, "has no member 'GREEN'"),
        ({"frozenset": [{"list": []}]}, "an unhashable member"),
    ],
)
def test_malformed_data_is_one_error_naming_where(data, message):
    with pytest.raises(StateDataError, match=re.escape(message)):
        decode({"tuple": [0, data]}, ModelClasses(Here()))


# --- the bundled examples: a trace to their deepest state, replayed -------------------------

EXAMPLES = [
    "async_termination_detection",
    "dining_philosophers",
    "ewd840",
    "peterson",
    "tcommit",
    "two_phase",
]


def _with_a_last_state_invariant(name: str):
    """The example's model, its graph, and the model with an invariant false in its last state
    (breadth-first: one of the deepest)."""
    model = importlib.import_module(name).model()
    graph = state_graph(validated(model))
    last = graph.states[-1]
    model.invariants = [*model.invariants, Invariant("NotTheLast", lambda s: s != last)]
    return model, graph


@pytest.mark.parametrize("name", EXAMPLES)
def test_a_trace_of_each_example_replays_and_a_tampered_one_does_not(tmp_path, name):
    model, graph = _with_a_last_state_invariant(name)
    report = run_explore(name, model)
    assert report.result.distinct_states == len(graph.states)  # the graph's nodes are the search's states
    out = tmp_path / "out.json"
    out.write_text(json.dumps(report.as_json()))
    valid = validated(model)
    trace = read_trace(str(out), valid, "NotTheLast")
    outcome = replay(valid, trace)
    assert outcome.path and outcome.violated, outcome.why
    # The same trace with its last two actions swapped is not a path (the swapped labels are
    # not both enabled where they now stand, or lead elsewhere).
    rows = json.loads(out.read_text())["properties"]["NotTheLast"]["trace"]
    assert len(rows) >= 3
    rows[-1]["action"], rows[-2]["action"] = rows[-2]["action"], rows[-1]["action"]
    if rows[-1]["action"] != rows[-2]["action"]:
        tampered = tmp_path / "tampered.json"
        tampered.write_text(json.dumps({"properties": {"NotTheLast": {"kind": "invariant", "trace": rows}}}))
        outcome = replay(valid, read_trace(str(tampered), valid))
        assert not outcome.path and outcome.step == len(rows) - 2, outcome


# --- the command line: a racy model --------------------------------------------------------

RACY = '''
from pymc_resume.explore import Invariant


class Racy:
    """Two processes add 1 to a shared counter: read it, then write it back plus one."""

    state_fields = ("pc", "local", "counter")
    invariants = [Invariant("NoLostUpdate", lambda s: s[0] != ("done", "done") or s[2] == 2)]
    deadlock_is_error = False

    def initial_states(self):
        return [(("read", "read"), (0, 0), 0)]

    def successors(self, state):
        pc, local, counter = state
        for p in (0, 1):
            if pc[p] == "read":
                yield f"read({p})", (put(pc, p, "write"), put(local, p, counter), counter)
            elif pc[p] == "write":
                yield f"write({p})", (put(pc, p, "done"), local, local[p] + 1)

    def canonical(self, state):  # the processes are interchangeable: sort them
        pc, local, counter = state
        pairs = sorted(zip(pc, local))
        return (tuple(p for p, _ in pairs), tuple(value for _, value in pairs), counter)


def put(values, i, value):
    return values[:i] + (value,) + values[i + 1:]


def model():
    return Racy()


class Atomic(Racy):
    def successors(self, state):
        pc, local, counter = state
        for p in (0, 1):
            if pc[p] != "done":
                yield f"add({p})", (put(pc, p, "done"), put(local, p, counter), counter + 1)


def atomic():
    return Atomic()
'''


def explore_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", "explore", "--quiet", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


@pytest.fixture
def racy(tmp_path) -> Path:
    (tmp_path / "racy.py").write_text(RACY)
    done = explore_cli("racy.py:model", "--json", "out.json", "--dump-graph", "racy.dot", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    return tmp_path


def test_replay_trace_exits_0_on_the_explorers_own_trace_and_1_where_it_is_not_a_path(racy):
    done = explore_cli("racy.py:model", "--replay-trace", "out.json", cwd=racy)
    assert done.returncode == 0, done.stderr
    assert "the trace of NoLostUpdate (4 steps) replays: a path of the model" in done.stdout
    # The race fixed (one atomic step): the recorded actions are not the model's.
    done = explore_cli("racy.py:atomic", "--replay-trace", "out.json", "--property", "NoLostUpdate", cwd=racy)
    assert done.returncode == 1, done.stderr
    assert "is not a path of the model: step 1 (read(" in done.stdout and "is not enabled" in done.stdout
    # A state changed by hand (the counter of step 3): its action does not lead there.
    found = json.loads((racy / "out.json").read_text())
    row = found["properties"]["NoLostUpdate"]["trace"][3]
    row["data"]["tuple"][2] = 7
    (racy / "edited.json").write_text(json.dumps(found))
    done = explore_cli("racy.py:model", "--replay-trace", "edited.json", cwd=racy)
    assert (
        done.returncode == 1
        and "step 3 (write(" in done.stdout
        and "does not lead to this state" in done.stdout
    )


def test_replay_compares_states_after_canonical_unless_symmetry_is_off(racy):
    # The trace cut after step 3, whose processes are swapped: the state write(0) leads to
    # up to symmetry only (and the invariant holds there).
    found = json.loads((racy / "out.json").read_text())
    rows = found["properties"]["NoLostUpdate"]["trace"] = found["properties"]["NoLostUpdate"]["trace"][:4]
    pc, local, counter = rows[-1]["data"]["tuple"]
    assert pc == {"tuple": ["done", "write"]}
    rows[-1]["data"]["tuple"] = [{"tuple": ["write", "done"]}, {"tuple": local["tuple"][::-1]}, counter]
    (racy / "swapped.json").write_text(json.dumps(found))
    done = explore_cli("racy.py:model", "--replay-trace", "swapped.json", cwd=racy)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "is a path of the model, but NoLostUpdate is not violated in its last state" in done.stdout
    done = explore_cli("racy.py:model", "--replay-trace", "swapped.json", "--no-symmetry", cwd=racy)
    assert done.returncode == 1 and "not a path of the model: step 3 (write(0))" in done.stdout, done.stdout


@pytest.mark.parametrize(
    "content, args, message",
    [
        ("not json", [], "not JSON"),
        ("/dev/zero", [], "the trace file is not a regular file"),
        ('{"properties": {}}', [], "no property has a trace"),
        (None, ["--property", "Nope"], "no trace of 'Nope' (traces: NoLostUpdate)"),
        (None, ["--workers", "2"], "--replay-trace: --workers does not apply"),
        (
            '{"properties": {"P": {"kind": "invariant", "trace": [{"data": {"tuple": [1]}}]}}}',
            [],
            "no invariant named 'P'",
        ),
        ('{"properties": {"P": {"trace": [{"state": "(1,)"}]}}}', [], "step 0 has no state data"),
    ],
)
def test_a_malformed_trace_file_is_one_line_and_exit_2(racy, content, args, message):
    file = "out.json"
    if content == "/dev/zero":
        file = content
    elif content is not None:
        (racy / "bad.json").write_text(content)
        file = "bad.json"
    done = explore_cli("racy.py:model", "--replay-trace", file, *args, cwd=racy)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert message in done.stderr


# --- the graph -----------------------------------------------------------------------------


def test_dump_graph_writes_the_searchs_states_and_every_distinct_edge(racy):
    text = (racy / "racy.dot").read_text()
    nodes = re.findall(r"^  (\d+) \[label=", text, re.M)
    edges = re.findall(r"^  (\d+) -> (\d+) \[label=\"([^\"]*)\"\];$", text, re.M)
    found = json.loads((racy / "out.json").read_text())
    assert len(nodes) == found["distinct_states"] == 8  # symmetry: 13 states without it
    # Edges computed here: every (state, action, successor) between canonical states.
    sys.path.insert(0, str(racy))
    try:
        spec = importlib.util.spec_from_file_location("racy_for_edges", racy / "racy.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(racy))
    model = module.Racy()
    seen, todo, expected = set(), [model.canonical(s) for s in model.initial_states()], set()
    while todo:
        state = todo.pop()
        if state in seen:
            continue
        seen.add(state)
        for action, successor in model.successors(state):
            expected.add((state, action, model.canonical(successor)))
            todo.append(model.canonical(successor))
    assert len(edges) == len(expected)
    assert text.count("peripheries=2") == 1 and text.count("violates: NoLostUpdate") == 1


def test_dump_graph_refuses_a_large_state_space_and_writes_nothing(tmp_path):
    with pytest.raises(GraphTooLarge, match="more than 100 states"):
        state_graph(validated(importlib.import_module("two_phase").model()), limit=100)
    done = explore_cli(f"{ROOT / 'examples/simple_regular.py'}:model", "--dump-graph", "g.dot", cwd=tmp_path)
    assert done.returncode == 2 and "more than 10,000 states" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_dot_strings_escape_quotes_and_backslashes():
    assert quoted('say "hi" \\ bye') == '"say \\"hi\\" \\\\ bye"'
    assert quoted("a\nb\n") == '"a\\lb\\l"'
    graph = state_graph(validated(importlib.import_module("tcommit").model()))
    text = dot(graph, 'name "quoted"')
    assert text.startswith('digraph "name \\"quoted\\"" {')
    assert text.count(" -> ") == len(graph.edges) and len(graph.states) == 34
