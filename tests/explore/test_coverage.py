"""--coverage, TLC's per-action counts: successors each action generated and the new states it
found first, adding up to the run's totals, with declared actions never taken listed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from two_phase import TwoPhase

from pymc_resume.errors import BadInput
from pymc_resume.explore import explore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("exact", [False, True])
def test_coverage_adds_up_to_the_runs_counts_with_either_store(exact):
    result = explore(TwoPhase(3), coverage=True, exact=exact)
    rows = result.coverage
    assert rows[0] == ("(initial states)", 1, 1)
    assert sum(taken for _, taken, _ in rows) == result.states_generated == 1146
    assert sum(new for *_, new in rows) == result.distinct_states == 288
    labels = {action for action, _, _ in rows}
    assert {f"RMPrepare(r{rm})" for rm in (1, 2, 3)} <= labels and "TMCommit" in labels


class WithAnIdleAction:
    """Counts to 3; `Reset` is declared but never enabled, `Skip` yields the state itself."""

    actions = ("Inc", "Skip", "Reset")
    deadlock_is_error = False

    def initial_states(self):
        return [0]

    def successors(self, state):
        if state < 3:
            yield "Inc", state + 1
        yield "Skip", state


def test_an_action_never_taken_is_listed_and_one_that_finds_nothing_has_zero_new():
    rows = dict(
        (action, (taken, new)) for action, taken, new in explore(WithAnIdleAction(), coverage=True).coverage
    )
    assert rows == {"(initial states)": (1, 1), "Inc": (3, 3), "Skip": (4, 0), "Reset": (0, 0)}


def test_coverage_is_refused_where_it_cannot_be_counted_whole():
    with pytest.raises(BadInput, match="one worker"):
        explore(TwoPhase(3), coverage=True, workers=2)


def test_the_command_prints_the_coverage_table_and_writes_it_in_the_json(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pymc_resume",
            "explore",
            "--quiet",
            f"{EXAMPLES / 'two_phase.py'}:model",
            "--coverage",
            "--json",
            str(tmp_path / "out.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "coverage (taken: successors generated" in done.stdout and "TMAbort" in done.stdout
    document = json.loads((tmp_path / "out.json").read_text())
    assert sum(row["taken"] for row in document["coverage"]) == document["states_generated"]
