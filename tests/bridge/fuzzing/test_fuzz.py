"""The bridge end to end: fuzzing the reference runtime, faults found, repros replayed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pymc_resume.bridge.adapters.reference import ReferenceAdapter
from pymc_resume.bridge.fuzzing.fuzz import run_fuzz
from pymc_resume.bridge.fuzzing.machine import contract_test_case
from pymc_resume.bridge.judging.session import Session, Violation
from pymc_resume.bridge.repro.replay import load_repro, replay_repro
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.model.mutants import MUTANTS
from pymc_resume.runtime.faults import RUNTIME_FAULTS

HERE = Path(__file__).parents[1]  # tests/bridge, where bridge_test_adapters.py is
SMALL = load_bounds("small")
DEFAULT = load_bounds("default")
FUZZ = load_bounds("fuzz")  # what `fuzz reference` runs by default


def cli(*args, cwd=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def session(fault=None, bounds=DEFAULT):
    return Session(ReferenceAdapter(fault), bounds.workflow, bounds.values)


def violation_of(fault, steps, bounds=DEFAULT):
    """Apply steps (then the drain) and return the violated clause ids (empty if none)."""
    run = session(fault, bounds)
    try:
        for step in steps:
            run.apply(step)
        run.finish()
    except Violation as violation:
        return set(violation.clauses)
    finally:
        if not run.drained:
            run.close()
    return set()


START = {"action": "start", "thread": 0, "crash": None}


def resume(value, crash=None):
    return {"action": "resume", "thread": 0, "value": value, "crash": crash}


# Hand-written minimal runs, one per fault: the fault is seen, the correct runtime holds.
RUNS = {
    "no-claim": [
        START,
        resume(1),
        {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "after-load"},
    ],
    "rerun-step-on-recovery": [
        {"action": "start", "thread": 0, "crash": {"stage": 0, "when": "after-commit"}},
        {"action": "recover", "thread": 0, "crash": None},
    ],
    "refire-committed-effect": [
        {"action": "start", "thread": 0, "crash": {"stage": 1, "when": "after-commit"}},
        {"action": "recover", "thread": 0, "crash": None},
    ],
    "persist-unvalidated": [START, {"action": "update", "thread": 0, "value": -1}],
    "record-second-resume": [START, resume(1), resume(2), resume(1)],
    "stuck-claim": [START, resume(1, {"stage": 3, "when": "before-execute"})],
    "fork-without-intent": [
        START,
        resume(1),
        {"action": "fork", "thread": 0, "checkpoint": 3, "intent": "edit", "value": 2},
    ],
    "validate-after-claim": [START, resume(-1)],
}


@pytest.mark.parametrize("fault", sorted(RUNS))
def test_each_fault_is_seen_on_a_minimal_run_and_the_reference_holds(fault):
    assert MUTANTS[fault].target in violation_of(fault, RUNS[fault])
    assert violation_of(None, RUNS[fault]) == set()


def test_fuzz_reference_holds_on_all_nine_ids_quickly(tmp_path):
    report = run_fuzz("reference", {}, SMALL, examples=10, steps=8, seed=3, repro_dir=tmp_path)
    assert report.error is None
    assert list(report.clauses) == list(CLAUSE_IDS)
    assert all(result.verdict == "holds" for result in report.clauses.values())
    assert report.examples >= 10 and report.steps > 0
    assert not list(tmp_path.iterdir())  # nothing violated, no repro written


def test_an_adapter_that_cannot_observe_gets_skipped_not_holds(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    report = run_fuzz(
        "bridge_test_adapters:BlindAdapter", {}, SMALL, examples=3, steps=4, seed=1, repro_dir=tmp_path
    )
    skipped = {cid for cid, r in report.clauses.items() if r.verdict == "skipped"}
    assert {"consume-once-consumption", "fork-intent", "liveness"} <= skipped
    assert all(report.clauses[cid].reason for cid in skipped)


def test_a_hanging_adapter_is_stopped_and_reported(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    run = cli(
        "fuzz",
        "bridge_test_adapters:HangingAdapter",
        "--examples",
        "5",
        "--seed",
        "1",
        "--step-timeout",
        "1",
        "--repro-dir",
        str(tmp_path),
        cwd=tmp_path,
        env=env,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "did not finish within the step timeout" in run.stderr and "resume" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_raising_adapter_is_reported_with_its_step(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    run = cli(
        "fuzz", "bridge_test_adapters:RaisingAdapter", "--examples", "5", "--seed", "1", cwd=tmp_path, env=env
    )
    assert run.returncode == 2
    assert "RuntimeError: boom" in run.stderr and "step" in run.stderr


def test_bad_adapter_names_and_faults_exit_2(tmp_path):
    assert cli("fuzz", "nonesuch", cwd=tmp_path).returncode == 2
    bad = cli("fuzz", "reference", "--fault", "no-such-fault", cwd=tmp_path)
    assert bad.returncode == 2 and "no-such-fault" in bad.stderr
    assert cli("replay", str(tmp_path / "missing.json")).returncode == 2


def test_contract_test_case_runs_in_a_users_suite():
    case = contract_test_case(ReferenceAdapter, bounds="small", examples=3, steps=5, seed=2)
    result = case("runTest").run()
    assert result.wasSuccessful(), result.errors + result.failures


@pytest.mark.slow
def test_contract_test_case_fails_a_faulty_adapter():
    case = contract_test_case(
        lambda: ReferenceAdapter("record-second-resume"), bounds="small", examples=10, steps=6, seed=1
    )
    result = case("runTest").run()
    assert not result.wasSuccessful()
    assert "consume-once-value" in str(result.failures + result.errors)


@pytest.mark.slow
def test_fuzz_reference_holds_on_all_nine_ids(tmp_path):
    out = tmp_path / "out.json"
    run = cli("fuzz", "reference", "--examples", "40", "--seed", "1", "--json", str(out), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads(out.read_text())
    assert list(data["clauses"]) == list(CLAUSE_IDS)
    assert all(c["verdict"] == "holds" for c in data["clauses"].values())
    assert data["examples"] >= 40 and data["steps_per_second"] > 0


# Faults the fuzzer finds within seconds at bounds `fuzz`, the reference's fuzzing default, and
# stuck-claim, the README's example. Others take a minute or more in a loaded run, how long
# depending on races that move Hypothesis's draws (no-mid-node-recovery took 3 s alone and 66 s in
# the suite; refire-committed-effect and rerun-node-on-recovery 20-50 s): the battery finds each of
# those in seconds (tests/bridge/test_profile.py), and the README's table covers the catalogue.
QUICK_FAULTS = [
    "no-claim",
    "fork-by-reference",
    "record-second-resume",
    "stuck-claim",
    "unkeyed-effects",
    "validate-after-claim",
    "rerun-effects-on-restart",
]


@pytest.mark.slow
@pytest.mark.parametrize("fault", QUICK_FAULTS)
def test_fuzz_finds_each_fault_and_names_its_clause(fault, tmp_path):
    report = run_fuzz(
        "reference",
        {"fault": fault},
        FUZZ,
        # A budget, not the expected cost: each stops at its first finding. stuck-claim takes
        # 140-240 examples (races move Hypothesis's draws from run to run).
        examples=500,
        seed=1,
        repro_dir=tmp_path,
        shrink=False,
        all_clauses=False,
    )
    assert MUTANTS[fault].target in report.violated, report.as_json()["clauses"]


SEPARATING = [
    "no-claim",
    "rerun-step-on-recovery",
    "refire-committed-effect",
    "fork-by-reference",
    "persist-unvalidated",
    "record-second-resume",
    "recovery-nondeterministic-step",
    "fork-without-intent",
    "stuck-claim",
]


def test_the_separating_mutants_are_runtime_faults():
    assert set(SEPARATING) | set(QUICK_FAULTS) <= set(RUNTIME_FAULTS) <= set(MUTANTS)


@pytest.mark.slow
def test_repro_replays_fail_on_the_fault_and_pass_once_it_is_off(tmp_path):
    out = tmp_path / "out.json"
    run = cli(
        "fuzz",
        "reference",
        "--fault",
        "record-second-resume",
        "--examples",
        "30",
        "--seed",
        "1",
        "--repro-dir",
        str(tmp_path / "repros"),
        "--json",
        str(out),
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "consume-once-value" in run.stdout
    verdict = json.loads(out.read_text())["clauses"]["consume-once-value"]
    assert verdict["verdict"] == "violated" and verdict["repro_steps"] <= 4
    repro = Path(verdict["repro"])
    document = load_repro(repro)
    assert document["clause"] == "consume-once-value" and document["steps"]
    assert replay_repro(document).reproduces

    assert cli("replay", str(repro)).returncode == 1
    fixed = cli("replay", str(repro), "--fault", "none")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr

    test_file = Path(verdict["pytest"])
    faulty = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert faulty.returncode == 1, faulty.stdout
    env = {**os.environ, "PYMC_RESUME_FAULT": "none"}
    correct = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert correct.returncode == 0, correct.stdout
