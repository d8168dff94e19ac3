"""The adapter kit for a framework with built-in node kinds: examples/kinds_executor.py runs node
kinds of its own (no node code of ours), and examples/kinds_adapter.py, in at most 150 lines,
passes `profile` with every id holding; the adapter's reading of the store decides verdicts (a
wrong reading of one node kind is caught)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pymc_resume.model.contract import CLAUSE_IDS

ROOT = Path(__file__).resolve().parents[3]
ADAPTER = ROOT / "examples" / "kinds_adapter.py"
MOST_LINES = 150


def profile(spec: str, *args: str, cwd: Path) -> tuple[subprocess.CompletedProcess, dict]:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pymc_resume",
            "profile",
            spec,
            "--bounds",
            "small",
            *args,
            "--json",
            "p.json",
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    [data] = json.loads((cwd / "p.json").read_text())["profiles"]
    return run, data


@pytest.mark.slow
def test_the_adapter_for_built_in_node_kinds_holds_every_id_in_at_most_150_lines(tmp_path):
    lines = len(ADAPTER.read_text().splitlines())
    assert lines <= MOST_LINES, f"{ADAPTER.name} has {lines} lines"
    run, data = profile(f"{ADAPTER}:KindsAdapter", "--examples", "2", "--seed", "1", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    verdicts = {cid: cell["verdict"] for cid, cell in data["clauses"].items()}
    assert verdicts == dict.fromkeys(CLAUSE_IDS, "holds"), verdicts
    # Effects came from Kindflow's transport, keyed by its message ids: re-fires were deduplicated.
    assert data["effects"]["keyed_fires"] == data["effects"]["fires"] > data["effects"]["applications"]


@pytest.mark.slow
def test_reading_a_node_kinds_output_wrong_is_caught(tmp_path):
    # A `Sum` read as stored, not as the model's step output: the state after a recovery no
    # longer matches the crash-free run of the same inputs.
    (tmp_path / "raw.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ADAPTER.parent)!r})\n"
        "from kinds_adapter import KindsAdapter\n\n"
        "class RawSums(KindsAdapter):\n"
        "    def _app(self, state, pc):\n"
        "        return tuple(state[field] for field in self.fields)\n"
    )
    run, data = profile("raw.py:RawSums", "--examples", "0", "--no-shrink", cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert data["clauses"]["recovery-determinism"]["verdict"] == "violated"
