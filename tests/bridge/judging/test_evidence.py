"""Evidence on every cell: the operation table, fork-determinism judged on the parent, the
sink's counts and keys, replays of a violated cell's repro, unconfirmed cells listed apart, and
`holds` reasons that count only what exercised the id (issue 14)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bridge_test_adapters import ParentRewritingForkAdapter

from pymc_resume.bridge.fuzzing.fuzz import run_fuzz
from pymc_resume.bridge.fuzzing.scenarios import scenarios
from pymc_resume.bridge.hosting.host import AdapterInfo
from pymc_resume.bridge.hosting.registry import Configuration, factory
from pymc_resume.bridge.judging.session import Session, Violation
from pymc_resume.bridge.profile import NOT_DECLARED, operation_table, run_profile
from pymc_resume.bridge.repro.replay import load_repro, replay_repro
from pymc_resume.cli.profile import profile_text
from pymc_resume.model.bounds import load_bounds

HERE = Path(__file__).parents[1]  # tests/bridge, where bridge_test_adapters.py is
SMALL = load_bounds("small")
REWRITING = "bridge_test_adapters:ParentRewritingForkAdapter"
DECLARING = "bridge_test_adapters:DeclaringAdapter"

START = {"action": "start", "thread": 0, "crash": None}
APPROVE = {"action": "resume", "thread": 0, "value": 1, "crash": None}
FORK_AT_THE_INTERRUPT = {"action": "fork", "thread": 0, "checkpoint": 2, "intent": "replay", "value": None}


def cli(*args, cwd):
    env = {"PYTHONPATH": str(HERE)}
    import os

    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **env},
    )


def verdicts(profile) -> dict[str, str]:
    return {cid: result.verdict for cid, result in profile.clauses.items()}


# -- the operation table ---------------------------------------------------------------------


def test_the_operation_table_names_each_call_a_reason_or_that_none_was_declared():
    info = factory(DECLARING).info
    table = operation_table(info)
    assert list(table) == ["start", "resume", "resume-together", "crash", "recover", "fork", "update"]
    assert table["start"] == "Runtime.start(thread, op)" and table["fork"].startswith("Runtime.fork")
    assert table["update"] == "not-applicable: no client call writes a thread's state"
    assert table["recover"] == NOT_DECLARED and table["crash"] == NOT_DECLARED


def test_an_operation_table_naming_an_unknown_operation_is_refused():
    info = AdapterInfo("odd", "1", frozenset(), {}, framework_calls={"teleport": "beam()"})
    with pytest.raises(ValueError, match="teleport"):
        operation_table(info)


def test_profile_operations_alone_prints_the_table_writes_it_and_runs_nothing(tmp_path):
    run = cli("profile", DECLARING, "--operations", "--json", "ops.json", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (
        "Runtime.resume(thread, value, op)" in run.stdout and "not-applicable: no client call" in run.stdout
    )
    [entry] = json.loads((tmp_path / "ops.json").read_text())["profiles"]
    assert entry["operations"]["recover"] == NOT_DECLARED and entry["clauses"] is None
    assert not (tmp_path / "pymc-resume-repros").exists()  # no battery ran


def test_every_profiles_json_carries_its_operation_table(tmp_path):
    run = cli(
        "profile",
        DECLARING,
        "--operations",
        "--examples",
        "0",
        "--bounds",
        "small",
        "--json",
        "p.json",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    [profile] = json.loads((tmp_path / "p.json").read_text())["profiles"]
    assert profile["operations"]["start"] == "Runtime.start(thread, op)"
    assert profile["clauses"]["liveness"]["verdict"] == "holds"
    assert run.stdout.index("framework call") < run.stdout.index("identical profiles")


# -- fork-determinism on the parent -----------------------------------------------------------


def test_a_fork_that_rewrites_its_parents_recorded_input_at_the_fork_point_is_seen():
    for adapter, seen in ((ParentRewritingForkAdapter, True), ("reference", False)):
        session = Session(
            factory(adapter) if isinstance(adapter, str) else adapter, SMALL.workflow, SMALL.values
        )
        try:
            for step in (START, APPROVE, APPROVE, FORK_AT_THE_INTERRUPT):
                session.apply(step)
            session.finish()
        except Violation as violation:
            assert seen and set(violation.clauses) == {"fork-determinism"}
            reason = violation.clauses["fork-determinism"]
            assert "recorded input at stage 2 (the fork point) changed from v1 to v2" in reason
            # What the changed record also breaks is derived, counted under fork-determinism only.
            assert "consume-once-value, fork-intent also fail, counted here only" in reason
        else:
            assert not seen
        finally:
            if not session.drained:
                session.close()


def test_the_faulty_fork_profiles_fork_determinism_violated_with_a_replayed_repro(tmp_path):
    configuration = Configuration("rewrites-parent", REWRITING)
    profile = run_profile("faulty-fork", configuration, SMALL, examples=0, repro_dir=tmp_path)
    assert profile.violated == ["fork-determinism"], verdicts(profile)
    cell = profile.clauses["fork-determinism"].as_json()
    assert cell["replays"]["reproduced"] >= 1 and cell["replays"]["of"] >= cell["replays"]["reproduced"]
    assert (
        f"reproduced in {cell['replays']['reproduced']} of {cell['replays']['of']} replays" in cell["reason"]
    )
    assert replay_repro(load_repro(cell["repro"]), allowed=(REWRITING,)).reproduces


def test_fuzzing_the_faulty_fork_finds_fork_determinism_and_nothing_it_derives(tmp_path):
    report = run_fuzz(REWRITING, {}, SMALL, examples=15, steps=8, seed=1, repro_dir=tmp_path, shrink=False)
    assert report.violated == ["fork-determinism"], {c: r.verdict for c, r in report.clauses.items()}
    assert report.clauses["fork-determinism"].replays[0] >= 1


# -- evidence on every cell -------------------------------------------------------------------


def test_holds_reasons_count_only_what_exercised_the_id_and_say_where(tmp_path):
    profile = run_profile(
        "reference", Configuration("sqlite", "reference"), SMALL, examples=0, repro_dir=tmp_path
    )
    reasons = {cid: result.reason for cid, result in profile.clauses.items()}
    ran = profile.scenarios
    # Every fork scenario made a fork but the edit forks at a parked head (a fresh client's and a
    # warm client's), which the reference runtime refuses as the model has none
    # (docs/contract.md, "Fork at a parked head").
    forking = [s for s in scenarios(SMALL.workflow, SMALL.processes, warm=True) if "fork" in s.needs]
    assert reasons["fork-determinism"].startswith(
        f"held in {len(forking) - 2} of {ran} targeted scenarios that made a fork (at: "
    )
    assert "checkpoint 2 (stage 2), replay" in reasons["fork-determinism"]
    assert "the parked head), replay" in reasons["fork-determinism"]
    assert reasons["consume-once-consumption"].startswith(
        f"held in 2 of {ran} targeted scenarios that delivered"
    )
    assert "window after-load" in reasons["consume-once-consumption"]
    assert "crashed a process (at: stage 0 after-commit" in reasons["recovery-determinism"]
    assert reasons["liveness"].startswith(f"held in {ran} of {ran} targeted scenarios")


def test_an_id_nothing_exercised_is_skipped_not_holds(tmp_path):
    one_process = tmp_path / "one-process.toml"
    one_process.write_text(
        'nodes = ["step", "interrupt"]\nvalues = 2\nprocesses = 1\nresumes = 1\ncrashes = 1\n'
        "forks = 1\ninvalid_updates = 1\n"
    )
    profile = run_profile(
        "reference",
        Configuration("sqlite", "reference"),
        load_bounds(str(one_process)),
        examples=0,
        repro_dir=tmp_path,
    )
    cell = profile.clauses["consume-once-consumption"]
    assert cell.verdict == "skipped" and "none of the" in cell.reason and "concurrently" in cell.reason
    assert profile.clauses["effect-exactly-once"].verdict == "skipped"  # the workflow has no effect
    assert profile.violated == []


def test_the_sink_counts_fires_and_applications_and_notes_every_refire_a_key_hid(tmp_path):
    profile = run_profile(
        "declaring", Configuration("default", DECLARING), SMALL, examples=0, repro_dir=tmp_path
    )
    effects = profile.effects
    assert effects["fires"] > effects["applications"] > 0
    assert effects["hidden_refires"] == effects["keyed_fires"] - effects["keyed_applications"] > 0
    assert effects["key"].startswith("Runtime.effect_key") and "contract identity" in effects["why"]
    notes = profile.clauses["effect-exactly-once"].notes
    assert f"{effects['fires']} fires and {effects['applications']} applications" in notes[0]
    assert "hidden by the key" in notes[1] and "scenario crash-stage-1-after-execute" in notes[1]
    assert profile.as_json()["clauses"]["effect-exactly-once"]["notes"] == list(notes)


def test_an_unconfirmed_cell_is_listed_apart_and_never_counted_as_violated(tmp_path):
    marker = tmp_path / "seen-once"
    run = cli(
        "profile",
        "bridge_test_adapters:OnceFaultyAdapter",
        "--adapter-option",
        f"marker={marker}",
        "--bounds",
        "small",
        "--examples",
        "0",
        "--no-shrink",
        "--json",
        "p.json",
        "--markdown",
        "p.md",
        cwd=tmp_path,
    )
    # unconfirmed: the exit code says nothing was violated
    assert run.returncode == 0, run.stdout + run.stderr
    [profile] = json.loads((tmp_path / "p.json").read_text())["profiles"]
    cell = profile["clauses"]["checkpoint-validity"]
    assert (
        cell["verdict"] == "unconfirmed" and cell["replays"]["reproduced"] == 0 and cell["replays"]["of"] >= 1
    )
    assert "unconfirmed (seen in a live run, never reproduced" in run.stdout
    assert "Unconfirmed (seen in a live run" in (tmp_path / "p.md").read_text()
    listed = run.stdout.split("unconfirmed (seen in a live run")[1].splitlines()[1]
    assert "checkpoint-validity" in listed and cell["repro"] in listed


def test_the_text_explains_each_cell_as_its_json_does(tmp_path):
    profile = run_profile(
        "reference", Configuration("sqlite", "reference"), SMALL, examples=0, repro_dir=tmp_path
    )
    text = profile_text([profile], [])
    for cid, cell in profile.as_json()["clauses"].items():
        assert f"  {cid} {cell['verdict']}: {cell['reason']}" in text


def test_a_resume_accepted_by_a_rewound_interrupt_counts_under_prefix_continuation():
    from pymc_resume.bridge.adapter import Observation, ThreadView
    from pymc_resume.model.state import Checkpoint

    waiting_again = (
        Checkpoint(0, (0, 0, 0, 0), -2),
        Checkpoint(1, (1, 0, 0, 0), 0),
        Checkpoint(2, (1, 1, 0, 0), 1),
        Checkpoint(3, (1, 1, 1, 0), 2),
        Checkpoint(2, (1, 1, 0, 0), 1),
    )
    rewound = Observation((ThreadView(waiting_again, "free", {2: 1}),))
    assert Session._rewound_across(rewound, 0, 2)  # stage 2 committed, yet the head waits at it again
    in_order = Observation((ThreadView(waiting_again[:4], "free", {2: 1}),))
    assert not Session._rewound_across(in_order, 0, 2)
