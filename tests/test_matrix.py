"""The fault matrix: the reference holds everywhere, every id has a separating mutant, and the
result is the same every time and for any number of workers."""

import json
import subprocess
import sys

import pytest

from pymc_resume.checking.matrix import REFERENCE, Cell, Matrix, Row, compute_matrix, row_of
from pymc_resume.cli.matrix_report import _split_header, matrix_table, matrix_text
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.contract import CLAUSE_IDS, HOLDS, VIOLATED
from pymc_resume.model.mutants import MUTANTS
from pymc_resume.model.semantics import ResumeModel

# Checked in seconds, and still every id has a separating mutant.
MINI = """
description = "a step and a gated node: the smallest bounds that separate every id"
nodes = ["step", "gated"]
values = 2
processes = 2
resumes = 2
crashes = 1
forks = 1
invalid_updates = 1
"""

# Without forks, nothing can break fork-determinism or fork-intent.
NO_FORKS = MINI.replace("forks = 1", "forks = 0")

TIMINGS = ("seconds", "total_seconds")


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args], capture_output=True, text=True, cwd=cwd
    )


def untimed(data: dict) -> dict:
    return {key: value for key, value in data.items() if key not in TIMINGS}


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    path = tmp_path_factory.mktemp("bounds") / "mini.toml"
    path.write_text(MINI)
    return path


@pytest.fixture(scope="module")
def mini_matrix(mini):
    return compute_matrix(load_bounds(str(mini)))


# -- at small ------------------------------------------------------------------------------


def test_reference_row_holds_everywhere_at_small(small_matrix):
    reference = small_matrix.rows[REFERENCE]
    assert list(reference.cells) == list(CLAUSE_IDS)
    assert all(cell == Cell(HOLDS) for cell in reference.cells.values())
    assert small_matrix.reference_breaks() == []


def test_every_id_has_a_separating_mutant_at_small(small_matrix):
    separating = small_matrix.separating()
    assert list(separating) == list(CLAUSE_IDS)
    for clause_id, names in separating.items():
        assert names, f"{clause_id} has no separating mutant"
        for name in names:
            assert small_matrix.rows[name].violated == (clause_id,)
    assert small_matrix.unseparated() == [] and small_matrix.ok


def test_rows_are_the_reference_then_the_catalogue(small_matrix):
    assert list(small_matrix.rows) == [REFERENCE, *MUTANTS]
    assert len(small_matrix.mutant_rows) >= 13
    assert small_matrix.missed_targets() == []


def test_json_shape(small_matrix):
    data = json.loads(json.dumps(small_matrix.as_json()))
    assert {"rows", "separating", "distinct_states"} <= set(data)
    assert list(data["rows"]) == [REFERENCE, *MUTANTS]
    for row in data["rows"].values():
        assert list(row) == list(CLAUSE_IDS)
        for cell in row.values():
            assert set(cell) == {"verdict", "trace_length"}
            if cell["verdict"] == VIOLATED:
                assert isinstance(cell["trace_length"], int) and cell["trace_length"] > 0
            else:
                assert cell["verdict"] == HOLDS and cell["trace_length"] is None
    assert list(data["separating"]) == list(CLAUSE_IDS)
    assert all(isinstance(n, int) and n > 0 for n in data["distinct_states"].values())
    assert data["distinct_states"][REFERENCE] == 39_413
    assert data["ok"] is True and data["reference_holds"] is True and data["unseparated"] == []


# -- determinism ---------------------------------------------------------------------------


# The matrix is the same every time and for any number of workers: the command line test
# below computes it again with two workers and compares it with `mini_matrix` (one worker).


# -- rendering and bookkeeping, without exploring ------------------------------------------


def fake_row(name, violated=(), lengths=None):
    cells = {
        cid: Cell(VIOLATED, (lengths or {}).get(cid, 5)) if cid in violated else Cell(HOLDS)
        for cid in CLAUSE_IDS
    }
    return Row(name, cells, 100, 0.1, True)


def test_separation_bookkeeping():
    rows = {
        REFERENCE: fake_row(REFERENCE, violated=("liveness",)),
        "no-claim": fake_row("no-claim", violated=("consume-once-consumption",)),
        "validate-after-claim": fake_row(
            "validate-after-claim", violated=("checkpoint-validity", "liveness")
        ),
    }
    matrix = Matrix(load_bounds("small"), True, rows, 1.0)
    assert matrix.separating()["consume-once-consumption"] == ["no-claim"]
    assert matrix.separating()["checkpoint-validity"] == []  # breaks two ids: not separating
    assert matrix.reference_breaks() == ["liveness"]
    assert "consume-once-consumption" not in matrix.unseparated()
    assert "checkpoint-validity" in matrix.unseparated()
    assert not matrix.ok
    text = matrix_text(matrix)
    assert "FAILED: the reference does not hold on: liveness" in text
    assert "FAILED: no separating mutant for: prefix-continuation" in text


def test_header_split_and_table_layout():
    assert _split_header("consume-once-consumption") == ("consume-once-", "consumption")
    assert _split_header("liveness") == ("liveness", "")
    rows = {
        REFERENCE: fake_row(REFERENCE),
        "no-claim": fake_row(
            "no-claim", violated=("consume-once-consumption",), lengths={"consume-once-consumption": 9}
        ),
    }
    lines = matrix_table(Matrix(load_bounds("small"), True, rows, 1.0)).splitlines()
    assert lines[0].startswith("row") and "prefix-" in lines[0]
    assert "continuation" in lines[1] and set(lines[2]) <= {"-", " "}
    assert lines[3].startswith("reference") and lines[4].startswith("no-claim")
    assert "violated 9*" in lines[4]


# -- the command line ----------------------------------------------------------------------


def test_cli_exits_0_and_writes_the_same_json_as_the_library(mini, mini_matrix, tmp_path):
    assert mini_matrix.ok
    out = tmp_path / "m.json"
    run = cli("matrix", "--bounds", str(mini), "--workers", "2", "--json", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(out.read_text())
    assert untimed(data) == untimed(mini_matrix.as_json())  # one worker vs two
    # The same text too, apart from the last line (the time it took).
    assert run.stdout.splitlines()[:-1] == matrix_text(mini_matrix).splitlines()[:-1]
    assert run.stdout.splitlines()[-1].startswith("took ")
    assert "OK: the reference holds on all nine ids" in run.stdout
    for clause_id in CLAUSE_IDS:
        assert f"  {clause_id} " in run.stdout
    rows = len(MUTANTS) + 1
    assert f"matrix: [{rows}/{rows}] " in run.stderr  # a progress line per row


def test_cli_exits_1_when_an_id_has_no_separating_mutant(tmp_path):
    bounds = tmp_path / "noforks.toml"
    bounds.write_text(NO_FORKS)
    run = cli("matrix", "--bounds", str(bounds), "--quiet")
    assert run.returncode == 1
    assert "FAILED: no separating mutant for: fork-determinism, fork-intent" in run.stdout
    assert run.stderr == ""


def test_cli_bad_input_exits_2_with_one_line(tmp_path):
    for args in (["--bounds", "nosuch"], ["--workers", "0"], ["--workers", "x"]):
        run = cli("matrix", *args)
        assert run.returncode == 2, args
        assert "Traceback" not in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1 and "error:" in run.stderr


# -- at default ----------------------------------------------------------------------------


@pytest.mark.slow
def test_reference_row_holds_everywhere_at_default(default_exploration):
    row = row_of(REFERENCE, ResumeModel(load_bounds("default")), default_exploration)
    assert row.complete and row.violated == ()
    assert row.distinct_states == 434_197
