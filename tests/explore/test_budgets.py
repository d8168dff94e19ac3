"""`--max-memory` is the whole run's budget: every process counted, liveness's needs included."""

import json
import subprocess
import sys

import pytest

from pymc_resume.explore.store.limits import Limits, MemoryForecast, results_reserve


def test_the_memory_message_says_what_was_counted():
    reason = Limits(max_memory=100 * 2**20).exceeded(0, 0.0, 101 * 2**20)
    assert reason.startswith("memory budget of 100 MiB: the run reached 101 MiB")
    assert results_reserve(0, 0) == 0 < results_reserve(1, 1)


@pytest.mark.slow
def test_a_two_worker_run_stops_within_its_budget_counting_every_process(tmp_path):
    """At `default` the whole run peaks near 180 MiB (coordinator and two workers, liveness
    decided where the edges are); with 160 it stops, and the peaks it reports add up to no more
    than 160: it stopped before a level's growth crossed the budget, not after."""
    out = tmp_path / "out.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pymc_resume",
            "check",
            "--quiet",
            "--bounds",
            "default",
            "--workers",
            "2",
            "--max-memory",
            "160",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    result = json.loads(out.read_text())
    assert done.returncode == 2 and "memory budget of 160 MiB" in done.stderr
    assert not result["complete"] and len(result["peak_rss_mib"]["workers"]) == 2
    assert result["peak_rss_mib"]["total"] <= 160


def test_the_forecast_keeps_twice_the_largest_step_free():
    forecast = MemoryForecast()
    assert forecast.headroom(100) == 0  # nothing seen yet
    assert forecast.headroom(110) == 20
    assert forecast.headroom(112) == 20  # a smaller step keeps the largest
    assert Limits(max_memory=125).exceeded(0, 0.0, 110, 20) is not None
    assert Limits(max_memory=125).exceeded(0, 0.0, 110) is None
