"""`pymc-resume profile --all` on every framework the README's test command installs: the
reference conforms, and every violation cell comes with a repro that `replay` reproduces."""

import json
import subprocess
import sys

import pytest

from pymc_resume.bridge.registry import FAMILIES
from pymc_resume.model.contract import CLAUSE_IDS

pytestmark = pytest.mark.slow


def cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "pymc_resume", *args], capture_output=True, text=True,
                          cwd=cwd)


def test_every_framework_extra_is_installed():
    missing = {name: family.install for name, family in FAMILIES.items() if not family.installed()}
    assert not missing, f"install the framework extras (the README's test command): {missing}"


def test_profile_all_conforms_for_the_reference_and_every_violation_replays(tmp_path):
    run = cli("profile", "--all", "--examples", "2", "--json", "t.json", "--markdown", "t.md", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr  # the frameworks violate clauses
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["skipped"] == []
    assert {p["adapter"] for p in data["profiles"]} == set(FAMILIES)
    for profile in data["profiles"]:
        assert profile["error"] is None, profile
        assert list(profile["clauses"]) == list(CLAUSE_IDS)
    [reference] = [p for p in data["profiles"] if p["adapter"] == "reference"]
    assert {c["verdict"] for c in reference["clauses"].values()} == {"holds"}
    replayed = 0
    for profile in data["profiles"]:
        for clause_id, cell in profile["clauses"].items():
            if cell["verdict"] != "violated":
                continue
            replay = cli("replay", cell["repro"], cwd=tmp_path)
            assert replay.returncode == 1, (profile["adapter"], profile["config"], clause_id, replay.stdout,
                                            replay.stderr)
            replayed += 1
    assert replayed > 0
    assert "identical profiles" in run.stdout and "| reference |" in (tmp_path / "t.md").read_text()
