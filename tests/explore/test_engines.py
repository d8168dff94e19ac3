"""Choosing an engine: bad choices are one line before any work starts, and a missing Ray
(the optional extra) is an environment problem, not a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from two_phase import TwoPhase

from pymc_resume.errors import BadInput, EnvironmentProblem
from pymc_resume.explore import explore
from pymc_resume.explore.engines import ray_engine

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"engine": "spark"}, "engine: must be one of multiprocess, ray"),
        ({"address": "head:6379"}, "address: only with the ray engine"),
    ],
)
def test_impossible_engine_options_are_refused(options, message):
    with pytest.raises(BadInput, match=message):
        explore(TwoPhase(3), workers=2, **options)


def test_the_ray_engine_without_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(ray_engine, "ray", None)
    with pytest.raises(EnvironmentProblem, match=r"pip install 'pymc-resume\[ray\]'"):
        explore(TwoPhase(3), workers=2, engine="ray")


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--address", "head:6379"],
        ["explore", "examples/two_phase.py:model", "--address", "head:6379"],
        ["check", "--simulate", "--engine", "ray"],
    ],
)
def test_engine_options_out_of_place_are_one_line_and_exit_2(args):
    done = subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args, "--quiet"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert (
        "--address: only with --engine ray" in done.stderr
        or "--engine ray: does not apply to --simulate" in done.stderr
    )
