"""`--simulate`: seeded random walks that check every visited state, for spaces too large to
enumerate. A walk that violates a property is its trace (valid, not promised shortest); a seed
gives the same walks in any process; nothing is ever proved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pymc_resume.checking.check import simulate_check
from pymc_resume.errors import BadInput
from pymc_resume.explore import Invariant
from pymc_resume.explore.engines.simulate import simulate
from pymc_resume.model.bounds import load_bounds

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args, "--quiet"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )


class Counter:
    """Two processes each add 1 to a shared counter by reading it, then writing it back."""

    state_fields = ("pc", "local", "counter")
    invariants = [
        Invariant("NoLostUpdate", lambda s: s[0] != ("done", "done") or s[2] == 2),
        Invariant("Small", lambda s: s[2] < 5),
    ]
    deadlock_is_error = False

    def initial_states(self):
        return [(("read", "read"), (0, 0), 0)]

    def successors(self, state):
        pc, local, counter = state
        for p in (0, 1):
            if pc[p] == "read":
                yield f"read({p})", (_put(pc, p, "write"), _put(local, p, counter), counter)
            elif pc[p] == "write":
                yield f"write({p})", (_put(pc, p, "done"), local, local[p] + 1)


def _put(values, i, value):
    return values[:i] + (value,) + values[i + 1 :]


def _replays(model, trace) -> bool:
    """Whether `trace` is a path of `model`: an initial state, then one successor per step."""
    if trace[0].state not in list(model.initial_states()):
        return False
    return all(
        (step.action, step.state) in list(model.successors(before.state))
        for before, step in zip(trace, trace[1:])
    )


def test_a_walk_finds_the_lost_update_and_its_trace_is_a_path_of_the_model():
    model = Counter()
    result = simulate(model, seed=3, walks=50)
    trace = result.violations["NoLostUpdate"].trace
    assert _replays(model, trace) and len(trace) == 5  # every walk of this model is 4 steps
    assert "Small" not in result.violations and not result.complete
    assert result.walks == 50 and result.states_visited == 250 and result.longest_walk == 4
    assert "a simulation proves nothing" in result.unproved()


def test_the_same_seed_gives_the_same_walks_and_other_seeds_other_ones():
    def run(seed, walks=20):
        result = simulate(Counter(), seed=seed, walks=walks)
        return result.states_visited, result.violations

    assert run(7) == run(7)
    # One walk a seed: some seeds interleave the two reads (a lost update), others do not.
    assert {"NoLostUpdate" in run(seed, walks=1)[1] for seed in range(20)} == {True, False}


def test_depth_bounds_every_walk_and_stop_at_first_stops():
    result = simulate(Counter(), seed=0, walks=10, depth=2)
    assert result.longest_walk == 2 and result.violations == {}
    first = simulate(Counter(), seed=0, walks=1000, stop_at_first=True)
    assert first.walks < 1000 and "NoLostUpdate" in first.violations
    assert "first violation" in first.stopped_because


def test_a_deadlock_is_found_where_the_model_asks():
    class Stuck(Counter):
        deadlock_is_error = True

    result = simulate(Stuck(), seed=0, walks=5)
    assert len(result.violations["deadlock"].trace) == 5


def test_max_seconds_alone_bounds_the_run():
    result = simulate(Counter(), seed=0, max_seconds=0.2)
    assert result.walks > 0 and "time limit" in result.stopped_because


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"depth": 0}, "depth"),
        ({"walks": 0}, "walks"),
        ({"seed": -1}, "seed"),
        ({"max_seconds": 0}, "max_seconds"),
        ({"depth": 1.5}, "depth"),
    ],
)
def test_impossible_options_are_refused(options, message):
    with pytest.raises(BadInput, match=message):
        simulate(Counter(), **options)


@pytest.mark.slow  # 3 s idle, 7 s on a loaded machine: 1,000 walks at `paper`
def test_check_simulate_finds_no_claim_at_paper_with_its_trace(tmp_path):
    """The issue's must-show: `check --bounds paper --mutant no-claim --simulate --seed 1`."""
    out = tmp_path / "s.json"
    done = cli(
        "check", "--bounds", "paper", "--mutant", "no-claim", "--simulate", "--seed", "1", "--json", str(out)
    )
    assert done.returncode == 1, done.stderr
    assert "consume-once-consumption violated (a walk's trace, not promised shortest)" in done.stdout
    report = json.loads(out.read_text())
    assert report["mode"] == "simulate" and report["complete"] is False
    assert report["engine"] is None and report["distinct_states"] is None
    assert report["simulation"]["seed"] == 1 and report["simulation"]["walks"] > 0
    assert report["simulation"]["shortest_traces"] is False
    clauses = report["clauses"]
    assert clauses["consume-once-consumption"]["verdict"] == "violated"
    trace = clauses["consume-once-consumption"]["trace"]
    assert trace[0]["action"] == "initial state" and len(trace) > 2
    assert clauses["liveness"]["verdict"] == "skipped"
    assert all(v["verdict"] in ("violated", "skipped") for v in clauses.values())


def test_check_simulate_is_deterministic_for_a_seed_in_another_process(tmp_path):
    """Another process, with another string-hash salt, takes the same walks."""
    out = tmp_path / "again.json"
    cli(
        "check",
        "--bounds",
        "paper",
        "--mutant",
        "no-claim",
        "--simulate",
        "--seed",
        "1",
        "--walks",
        "100",
        "--json",
        str(out),
        env={**os.environ, "PYTHONHASHSEED": "123"},
    )
    here = simulate_check(load_bounds("paper"), "no-claim", seed=1, walks=100).as_json()
    there = json.loads(out.read_text())
    assert there["clauses"] == here["clauses"]
    assert there["simulation"] == {
        **here["simulation"],
        "walks_per_second": there["simulation"]["walks_per_second"],
    }


def test_explore_simulate_reports_a_walk_and_exits_0_when_it_finds_nothing(tmp_path):
    out = tmp_path / "t.json"
    done = cli(
        "explore",
        "examples/two_phase.py:model",
        "--simulate",
        "--walks",
        "20",
        "--depth",
        "30",
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    assert "simulated: 20 walks of up to 30 steps (seed 0)" in done.stdout
    report = json.loads(out.read_text())
    assert report["mode"] == "simulate" and report["simulation"]["walks"] == 20
    assert {v["verdict"] for v in report["properties"].values()} == {"skipped"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--walks", "3"], "--walks: only with --simulate"),
        (["check", "--simulate", "--workers", "2"], "--workers: does not apply to --simulate"),
        (["check", "--simulate", "--checkpoint-dir", "x"], "--checkpoint-dir: does not apply"),
        (["explore", "examples/two_phase.py:model", "--depth", "3"], "--depth: only with"),
        (["explore", "examples/two_phase.py:model", "--simulate", "--workers", "2"], "--workers"),
    ],
)
def test_options_of_the_other_mode_are_one_line_and_exit_2(args, message):
    done = cli(*args)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
