"""The pydantic-graph adapter against real pydantic-graph 1.x on a real FileStatePersistence
JSON file, with real SIGKILLs.

Skipped when pydantic-graph 1.x is not installed (`pip install -e '.[pydantic-graph]' -c
constraints/pydantic-graph-1.107.10.txt`). The hand-written runs are quick; the fuzz run is slow.
"""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.pydantic_graph

pytest.importorskip("pydantic_graph.persistence.file",
                    reason="pydantic-graph 1.x (with FileStatePersistence) is not installed "
                           "(pip install 'pymc-resume[pydantic-graph]' -c constraints/pydantic-graph-1.107.10.txt)")

from live_steps import DEFAULT, START, apply_steps, crash, resume  # noqa: E402

from pymc_resume.bridge.adapters.pydantic_graph import PydanticGraphAdapter  # noqa: E402
from pymc_resume.bridge.repro import load_repro, replay_repro  # noqa: E402
from pymc_resume.bridge.session import Session  # noqa: E402
from pymc_resume.model.state import INITIAL  # noqa: E402

SPEC = "pymc_resume.bridge.adapters.pydantic_graph:PydanticGraphAdapter"


def fork(checkpoint, intent, value=None):
    return {"action": "fork", "thread": 0, "checkpoint": checkpoint, "intent": intent, "value": value}


def run(steps, drain=True):
    """Apply steps (then the drain); (violated clause ids, the session)."""
    session = Session(PydanticGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    return apply_steps(session, steps, drain)


def statuses(session, thread=0):
    return [o["status"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def test_declares_what_the_file_store_shows_and_update_as_unsupported():
    adapter = PydanticGraphAdapter()
    assert adapter.version.startswith("pydantic-graph 1.")
    assert adapter.capabilities == {"recorded-inputs", "leases", "executions", "late-inputs"}
    assert set(adapter.unsupported) == {"update"}


def test_a_start_commits_up_to_the_first_interrupt_and_parks_there():
    session = Session(PydanticGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    try:
        session.apply(START)
        [view] = session.observation.threads
        assert view.chain[0].stage == INITIAL
        assert [c.stage for c in view.chain[1:]] == [0, 1, 2]
        assert view.chain[-1].pc == 3  # the snapshot of the wait node, status 'created'
        assert view.run == "free"
        snapshots = json.loads((session.workdir / "t0.json").read_text())
        assert [s["status"] for s in snapshots] == ["success", "success", "success", "created"]
        fires = [e for e in session.sink.events() if e.kind == "fire"]
        assert len(fires) == 2 and all(e.key for e in fires)  # keyed by the node's snapshot id
    finally:
        session.close()


def test_crash_free_run_holds_and_a_late_resume_is_refused():
    violated, session = run([START, resume(1), resume(2), resume(1)])
    assert violated == set()
    assert statuses(session) == ["ok", "ok", "ok", "refused"]
    assert session.observation.threads[0].inputs == {3: 1, 4: 2}


@pytest.mark.parametrize("when", ["before-execute", "after-execute"])
@pytest.mark.parametrize("stage", [0, 1, 2])
def test_a_kill_in_the_middle_of_a_node_is_never_recovered(stage, when):
    # The killed node's snapshot stays 'running'; iter_from_persistence finds no 'created' one.
    violated, session = run([{"action": "start", "thread": 0, "crash": crash(stage, when)},
                             {"action": "recover", "thread": 0, "crash": None}])
    assert violated == {"liveness"}
    recovered = session.steps[1]["outcome"][0]
    assert recovered["status"] == "refused"
    assert "GraphRuntimeError: Unable to restore snapshot from state persistence" in recovered["detail"]
    assert session.observation.threads[0].run == "dead"
    assert session.observation.threads[0].chain[-1].pc == stage


def test_a_kill_in_the_middle_of_a_delivered_interrupt_keeps_its_claim_stuck():
    violated, session = run([START, resume(1, crash(3, "before-execute")),
                             {"action": "recover", "thread": 0, "crash": None}])
    assert violated == {"liveness"}
    assert session.observation.threads[0].inputs == {3: 1}  # recorded, never consumed


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_a_kill_after_the_next_snapshot_is_written_is_recovered(stage):
    violated, session = run([{"action": "start", "thread": 0, "crash": crash(stage, "after-commit")},
                             {"action": "recover", "thread": 0, "crash": None}, resume(1), resume(2)])
    assert violated == set()
    assert statuses(session)[:2] == ["crashed", "ok"]


def test_a_schema_invalid_resume_value_is_recorded_before_it_is_refused():
    # The client appends the node with value -1; record_run's reload validates the file and raises.
    violated, session = run([START, resume(-1)], drain=False)
    assert violated == {"checkpoint-validity"}
    assert "ValidationError" in session.steps[1]["outcome"][0]["detail"]


@pytest.mark.parametrize("window", ["after-load", "after-execute"])
def test_concurrent_deliveries_are_served_once_by_load_next(window):
    violated, session = run([START, {"action": "resume-together", "thread": 0, "values": [1, 2], "window": window}])
    assert violated == set()
    assert sorted(o["status"] for o in session.steps[1]["outcome"]) == ["ok", "refused"]


def test_an_edit_fork_runs_from_a_copy_of_the_snapshots():
    violated, session = run([START, resume(1), resume(2), fork(3, "edit", 2),
                             {"action": "start", "thread": 1, "crash": None}, resume(1, thread=1)])
    assert violated == set()
    assert session.observation.threads[1].inputs == {3: 2, 4: 1}


def test_a_replay_fork_does_not_reuse_the_inputs_recorded_after_its_fork_point():
    violated, _ = run([START, resume(1), resume(2), fork(0, "replay")], drain=False)
    assert violated == {"fork-intent"}


def test_newest_release_without_persistence_is_refused_with_a_reason(tmp_path, monkeypatch):
    # pydantic-graph 2.x ships no pydantic_graph.graph / .persistence: the adapter cannot be built.
    import builtins
    real_import = builtins.__import__

    def without_persistence(name, *args, **kwargs):
        if name.startswith(("pydantic_graph.persistence", "pydantic_graph.graph")):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_persistence)
    with pytest.raises(RuntimeError, match="no state persistence"):
        PydanticGraphAdapter()


@pytest.mark.slow
def test_fuzz_through_the_cli_judges_every_clause_and_its_repros_replay(tmp_path):
    # A small fixed-seed budget without shrinking (shrinking is tested on LangGraph and the
    # reference runtime). The kill mid-node that is never recovered (liveness) is the
    # battery's finding (test_profile_all) and the hand-written runs' above.
    out = tmp_path / "out.json"
    fuzz = subprocess.run(
        [sys.executable, "-m", "pymc_resume", "fuzz", SPEC, "--examples", "8", "--steps", "8", "--seed", "1",
         "--no-shrink", "--repro-dir", str(tmp_path / "repros"), "--json", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=1200,
    )
    assert fuzz.returncode == 1, fuzz.stdout + fuzz.stderr
    result = json.loads(out.read_text())
    assert result["adapter_version"].startswith("pydantic-graph 1.")
    verdicts = {cid: v["verdict"] for cid, v in result["clauses"].items()}
    assert "skipped" not in verdicts.values() and "not-applicable" not in verdicts.values()  # all observable
    violated = [v for v in result["clauses"].values() if v["verdict"] == "violated"]
    assert violated
    for verdict in violated:
        assert replay_repro(load_repro(verdict["repro"])).reproduces, verdict["reason"]
