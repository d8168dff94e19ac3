"""`pymc-resume` end to end, as a user runs it: exit codes, JSON shape, one-line errors."""

import json
import subprocess
import sys

from pymc_resume.model.contract import CLAUSE_IDS


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args], capture_output=True, text=True, cwd=cwd
    )


def test_check_small_holds_and_writes_every_id(tmp_path):
    out = tmp_path / "out.json"
    run = cli("check", "--bounds", "small", "--quiet", "--json", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(out.read_text())
    assert list(data["clauses"]) == list(CLAUSE_IDS)
    assert all(c["verdict"] == "holds" for c in data["clauses"].values())
    assert data["mutant"] is None and data["distinct_states"] > 1000
    assert {"bounds", "states_generated", "depth", "seconds"} <= set(data)


def test_mutant_violation_exits_1_with_a_trace(tmp_path):
    out = tmp_path / "out.json"
    run = cli("check", "--bounds", "small", "--mutant", "no-claim", "--quiet", "--json", str(out))
    assert run.returncode == 1
    verdict = json.loads(out.read_text())["clauses"]["consume-once-consumption"]
    assert verdict["verdict"] == "violated" and len(verdict["trace"]) > 2
    assert "consume-once-consumption violated:" in run.stdout


def test_bad_input_exits_2_with_one_line_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("nodes = ['step']\nvalues = 0\n")
    for args in (
        ["--bounds", "nosuch"],
        ["--mutant", "nosuch"],
        ["--bounds", str(bad)],
        ["--max-states", "0"],
    ):
        run = cli("check", *args)
        assert run.returncode == 2, args
        assert "Traceback" not in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1 and "error:" in run.stderr


def test_version():
    run = cli("--version")
    assert run.returncode == 0 and "0.1.0" in run.stdout
