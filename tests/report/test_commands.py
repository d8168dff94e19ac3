"""`pymc-resume report` and `pymc-resume diff` as a user runs them: what they write, print and
exit with, and one line for bad input."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROFILES = Path(__file__).parent / "profiles"
HOLDING, FAULTY = str(PROFILES / "reference.json"), str(PROFILES / "reference-no-claim.json")


def cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args], capture_output=True, text=True, cwd=cwd
    )


def test_report_writes_one_page_of_every_profile(tmp_path):
    run = cli("report", HOLDING, FAULTY, "-o", "out/r.html", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "wrote out/r.html: 2 configuration(s), 1 violated cell(s)"
    html = (tmp_path / "out" / "r.html").read_text()
    assert html.startswith("<!doctype html>") and html.count('class="panel cell-panel"') == 18


def test_diff_lists_the_worse_cell_first_and_exits_1():
    run = cli("diff", HOLDING, FAULTY, cwd=PROFILES)
    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    assert lines[2].split() == [
        "worse",
        "reference",
        "sqlite",
        "consume-once-consumption",
        "holds",
        "(0.1.0)",
        "violated",
        "(0.1.0)",
    ]
    assert lines[-1].startswith(f"against {HOLDING}: 1 worse, 0 better")


def test_diff_lists_improvements_and_exits_0(tmp_path):
    run = cli("diff", FAULTY, HOLDING, "--json", "d.json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[2].startswith("better  reference")
    assert '"better": 1' in (tmp_path / "d.json").read_text()
    same = cli("diff", HOLDING, HOLDING, cwd=tmp_path)
    assert same.returncode == 0 and "0 worse, 0 better, 0 otherwise changed" in same.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("report", "nosuch.json", "-o", "r.html"), "nosuch.json: cannot read a profile"),
        (("report", "bad.json", "-o", "r.html"), "bad.json: not a profile document"),
        (("report", HOLDING), "Missing option '-o'"),
        (("diff", HOLDING, "bad.json"), "bad.json: not a profile document"),
        (("diff", "text.json", HOLDING), "text.json is not JSON"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "bad.json").write_text('{"profiles": "none"}')
    (tmp_path / "text.json").write_text("not json")
    run = cli(*args, cwd=tmp_path)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "r.html").exists()


def test_diff_of_profiles_that_share_no_configuration_exits_2_in_one_line(tmp_path):
    run = cli("diff", HOLDING, str(PROFILES / "langgraph-sqlite-sync.json"), "--json", "d.json", cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == "", run.stdout + run.stderr
    [line] = run.stderr.splitlines()
    assert "share no configuration, so nothing was compared" in line and not (tmp_path / "d.json").exists()


def test_a_cell_declared_not_applicable_is_worse_and_other_settings_are_warned_about(tmp_path):
    """An adapter change that declares an operation unsupported must not make a failing id
    disappear from the gate; a run with another seed is compared, with a warning."""
    data = json.loads(Path(FAULTY).read_text())
    data["seed"] = 3
    data["profiles"][0]["clauses"]["consume-once-consumption"] |= {
        "verdict": "not-applicable",
        "reason": "no",
    }
    (tmp_path / "new.json").write_text(json.dumps(data))
    run = cli("diff", FAULTY, "new.json", "--json", "d.json", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.splitlines()[2].split()[:6] == [
        "worse",
        "reference",
        "sqlite",
        "consume-once-consumption",
        "violated",
        "(0.1.0)",
    ]
    assert "warning: seed differs: 0 in reference-no-claim.json, 3 in new.json" in run.stdout
    written = json.loads((tmp_path / "d.json").read_text())
    assert written["worse"] == 1 and written["warnings"] == [
        "seed differs: 0 in reference-no-claim.json, 3 in new.json"
    ]
