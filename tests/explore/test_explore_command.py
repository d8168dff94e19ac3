"""`pymc-resume explore` as a new user runs it: a model file written outside the project, checked
from the command line with TLC's counts, readable counterexamples, early stops, refusals, and a
killed two-worker run recovered in a process with another string-hash salt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# AsyncTerminationDetection.tla (tlaplus/Examples specifications/ewd998), written as a newcomer
# would from the documented API, in a file of their own: TLC records 4,097 distinct states,
# 53,271 generated, depth 14 for N = 4 with its state constraint (see examples/).
USER_MODEL = """
from itertools import product
from pymc_resume.explore import Invariant

class Ring:
    state_fields = ("active", "pending", "detected")
    invariants = [Invariant("Safe", lambda s: not s[2] or ring_done(s[0], s[1]))]

    def __init__(self, n):
        self.nodes = range(n)

    def initial_states(self):
        for active in product((False, True), repeat=len(self.nodes)):
            for detected in {False, ring_done(active, (0,) * len(self.nodes))}:
                yield (active, (0,) * len(self.nodes), detected)

    def successors(self, s):
        active, pending, detected = s
        for i in self.nodes:
            if pending[i]:
                yield f"RcvMsg({i})", (put(active, i, True), put(pending, i, pending[i] - 1), detected)
            if active[i]:
                now = put(active, i, False)
                for then in dict.fromkeys((detected, ring_done(now, pending))):
                    yield f"Terminate({i})", (now, pending, then)
        for i, j in product(self.nodes, self.nodes):
            if active[i]:
                yield f"SendMsg({i},{j})", (active, put(pending, j, pending[j] + 1), detected)
        if ring_done(active, pending):
            yield "DetectTermination", (active, pending, True)

    def constraint(self, s):
        return max(s[1]) <= 3

def ring_done(active, pending):
    return not any(active) and not any(pending)

def put(values, i, value):
    return values[:i] + (value,) + values[i + 1:]

def ring():
    return Ring(4)
"""


def explore_cli(*args, env=None, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", "explore", "--quiet", *args],
        capture_output=True,
        text=True,
        env=env,
        **kwargs,
    )


@pytest.fixture
def user_model(tmp_path) -> Path:
    path = tmp_path / "ring.py"
    path.write_text(USER_MODEL)
    return path


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_model_written_outside_the_project_gives_tlc_counts(tmp_path, user_model, workers):
    out = tmp_path / "out.json"
    done = explore_cli(f"{user_model}:ring", "--workers", workers, "--json", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert (result["distinct_states"], result["states_generated"], result["depth"]) == (4097, 53271, 14)
    assert result["complete"] and result["properties"]["Safe"]["verdict"] == "holds"
    assert result["properties"]["deadlock"]["verdict"] == "holds"


def test_a_false_invariant_exits_1_with_a_step_table_of_changes(tmp_path, user_model):
    user_model.write_text(
        user_model.read_text()
        + textwrap.dedent("""
        class Wrong(Ring):
            invariants = [Invariant("NeverTwoPending", lambda s: sum(s[1]) < 2)]

        def wrong():
            return Wrong(4)
        """)
    )
    out = tmp_path / "out.json"
    done = explore_cli(f"{user_model}:wrong", "--json", str(out))
    assert done.returncode == 1, done.stderr
    assert "NeverTwoPending violated" in done.stdout
    assert "pending[0]: 0 -> 1" in done.stdout or "pending[0]: 1 -> 2" in done.stdout
    trace = json.loads(out.read_text())["properties"]["NeverTwoPending"]["trace"]
    assert len(trace) == 3  # two SendMsg steps: the shortest counterexample
    assert [row["action"][:7] for row in trace[1:]] == ["SendMsg", "SendMsg"]
    assert all(isinstance(row["state"], str) and row["changes"] for row in trace)


def test_stop_at_first_stops_early(tmp_path, user_model):
    user_model.write_text(
        user_model.read_text()
        + textwrap.dedent("""
        class Wrong(Ring):
            invariants = [Invariant("NeverTwoPending", lambda s: sum(s[1]) < 2)]

        def wrong():
            return Wrong(4)
        """)
    )
    out = tmp_path / "out.json"
    done = explore_cli(f"{user_model}:wrong", "--stop-at-first", "--workers", "2", "--json", str(out))
    assert done.returncode == 1, done.stderr
    result = json.loads(out.read_text())
    assert not result["complete"] and result["distinct_states"] < 4097
    assert len(result["properties"]["NeverTwoPending"]["trace"]) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "--workers"),
        (["--workers", "-1"], "--workers"),
        (["--max-states", "0"], "--max-states"),
    ],
)
def test_impossible_options_exit_2(user_model, args, message):
    done = explore_cli(f"{user_model}:ring", *args)
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nowhere.py:model", "no such file"),
        ("no_such_module_here:model", "no module named"),
        ("{model}:missing", "has no 'missing'"),
        ("{model}", "expected module:factory"),
        ("{model}:Invariant", "calling Invariant() raised"),
    ],
)
def test_bad_targets_exit_2_in_one_line(user_model, target, message):
    done = explore_cli(target.format(model=user_model))
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_malformed_model_exits_2_naming_the_attribute(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text(
        "class M:\n    def initial_states(self):\n        return [[0]]\n"
        "    def successors(self, s):\n        return []\n"
    )
    done = explore_cli(f"{path}:M")
    assert done.returncode == 2
    assert "model.initial_states(): states must be hashable" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_examples_run_from_the_command_line():
    done = explore_cli(f"{EXAMPLES / 'two_phase.py'}:model")
    assert done.returncode == 0, done.stderr
    assert "288 distinct states, 1,146 generated, depth 11" in done.stdout


# --- recovery: string states, another hash salt -------------------------------------------

# Processes that crash and resume revisit states by paths of different lengths, so a state met
# again after the recovery must land in the partition that stored it before the kill; its pc is
# a string. (TwoPhase would not show the fault: every path to a state there has one length.)
STRING_MODEL = f"""
import sys
sys.path.append({str(ROOT)!r})
from bench.checkpoint_resume import CheckpointResume

def model():
    return CheckpointResume(4, 3)
"""


@pytest.mark.parametrize("workers, store", [("2", "fingerprints"), ("2", "exact"), ("1", "fingerprints")])
def test_a_killed_run_of_string_states_recovers_under_another_hash_seed(tmp_path, workers, store):
    # Python's hash() of the states' strings differs between the killed run (seed 1) and its
    # recovery (seed 2). Owners from hash() gave 38,591 distinct states here, reported complete;
    # every one of the ((3+1)(3+2)/2 + 3+1)^4 = 38,416 states is reachable. A fingerprint store
    # must fingerprint them alike in both processes, on one worker as on two.
    path, folder, out = tmp_path / "strings.py", tmp_path / "ck", tmp_path / "out.json"
    path.write_text(STRING_MODEL)
    seeded = lambda seed: {**os.environ, "PYTHONHASHSEED": str(seed)}
    exact = ["--exact"] if store == "exact" else []
    whole = explore_cli(f"{path}:model", "--workers", workers, *exact, "--json", str(out), env=seeded(3))
    assert whole.returncode == 0, whole.stderr
    expected = json.loads(out.read_text())
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pymc_resume",
            "explore",
            "--quiet",
            f"{path}:model",
            "--workers",
            workers,
            *exact,
            "--checkpoint-dir",
            str(folder),
            "--checkpoint-every",
            "0",
        ],
        env=seeded(1),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pointer = folder / "current"
    while run.poll() is None and not (
        pointer.exists() and int(pointer.read_text().strip().split("-")[1]) >= 8
    ):
        time.sleep(0.01)
    assert run.poll() is None, "the run finished before it could be killed"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    time.sleep(0.5)  # its workers notice their coordinator is gone
    out.unlink()
    done = explore_cli(f"{path}:model", "--recover", str(folder), "--json", str(out), env=seeded(2))
    assert done.returncode == 0, done.stderr
    recovered = json.loads(out.read_text())
    counts = ("distinct_states", "states_generated", "depth")
    assert [recovered[k] for k in counts] == [expected[k] for k in counts]
    assert recovered["distinct_states"] == 38416 and recovered["complete"]
    assert recovered["store"] == store


@pytest.mark.parametrize("store", ["fingerprints", "exact"])
def test_a_run_stopped_early_recovers_with_its_own_store_and_says_which(tmp_path, user_model, store):
    exact = ["--exact"] if store == "exact" else []
    target, folder = f"{user_model}:ring", tmp_path / "ck"
    stopped = explore_cli(
        target, *exact, "--max-states", "900", "--checkpoint-dir", str(folder), "--checkpoint-every", "0"
    )
    assert stopped.returncode == 2 and "incomplete" in stopped.stderr
    done = explore_cli(
        target, "--recover", str(folder), "--max-states", "10000", "--json", str(tmp_path / "out.json")
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "out.json").read_text())
    assert (result["distinct_states"], result["states_generated"], result["depth"]) == (4097, 53271, 14)
    assert result["store"] == store and (result["collision_probability"] is None) == (store == "exact")
    line = done.stdout.splitlines()[1]
    assert line.startswith("store: ") and ("whole states" in line) == (store == "exact")
    again = explore_cli(target, "--recover", str(folder), "--exact")
    assert again.returncode == 2 and "come from the checkpoint" in again.stderr


# Three interchangeable counters (0..2): 27 states, 10 up to permuting the counters.
SYMMETRIC_MODEL = """
class Counters:
    def initial_states(self):
        return [(0, 0, 0)]

    def successors(self, s):
        for i in range(3):
            if s[i] < 2:
                yield f"Inc({i})", s[:i] + (s[i] + 1,) + s[i + 1:]

    def canonical(self, s):
        return tuple(sorted(s))
"""


@pytest.mark.parametrize("args, states", [([], 10), (["--no-symmetry"], 27)])
def test_explore_reduces_by_the_models_symmetry_unless_told_not_to(tmp_path, args, states):
    (tmp_path / "counters.py").write_text(SYMMETRIC_MODEL)
    done = explore_cli(
        f"{tmp_path / 'counters.py'}:Counters", "--no-deadlock", *args, "--json", "o.json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "o.json").read_text())["distinct_states"] == states


def test_a_misspelt_optional_attribute_is_an_error_naming_both(tmp_path):
    # `invariant` (for `invariants`) would otherwise check nothing and exit 0.
    (tmp_path / "typo.py").write_text(SYMMETRIC_MODEL + "\n    invariant = []\n")
    done = explore_cli(f"{tmp_path / 'typo.py'}:Counters")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "model.invariant" in done.stderr and "'invariants'" in done.stderr


RAISING_MODEL = """
class Divides:
    def initial_states(self):
        return [(0, 0)]

    def successors(self, s):
        a, b = s
        if a < 3:
            yield "IncA", (a + 1, b)
        if a == 2:
            yield "Div", (a, 10 // (a - 2))
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_exception_in_the_model_names_the_function_state_and_action_in_one_line(tmp_path, workers):
    (tmp_path / "divides.py").write_text(RAISING_MODEL)
    done = explore_cli(f"{tmp_path / 'divides.py'}:Divides", "--workers", workers)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "ZeroDivisionError" in done.stderr and "in model.successors()" in done.stderr
    assert "in state (2, 0) (reached by IncA, step 2)" in done.stderr  # the action that produced it


@pytest.mark.parametrize("workers", ["1", "2"])
def test_traceback_prints_the_models_own_traceback_before_the_line(tmp_path, workers):
    (tmp_path / "divides.py").write_text(RAISING_MODEL)
    done = explore_cli(f"{tmp_path / 'divides.py'}:Divides", "--workers", workers, "--traceback")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "divides.py" in lines[1] and lines[1].endswith("in successors")
    assert "pymc_resume" not in done.stderr.split("pymc-resume: error:")[0]  # the model's frames only
    assert lines[-2].startswith("ZeroDivisionError")
    assert lines[-1].startswith("pymc-resume: error: the model raised ZeroDivisionError")


def test_traceback_also_shows_an_exception_met_while_the_model_is_validated(tmp_path):
    (tmp_path / "bad.py").write_text(RAISING_MODEL.replace("return [(0, 0)]", "raise KeyError('x')"))
    done = explore_cli(f"{tmp_path / 'bad.py'}:Divides", "--traceback")
    assert done.returncode == 2, done.stderr
    assert "in initial_states" in done.stderr and "KeyError: 'x'" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("pymc-resume: error:")
