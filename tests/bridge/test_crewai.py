"""The CrewAI adapter against a real CrewAI Flow on a real SQLiteFlowPersistence file, with real
SIGKILLs.

Skipped when CrewAI is not installed (the README's test command installs it, resolved with the
other frameworks in constraints/ci.txt).
"""

import importlib.util
import json
import subprocess
import sys

import pytest

# Every CrewAI client operation is a fresh process that takes seconds (most of it importing
# what a Flow instance loads: CrewAI's memory storage, LanceDB, which is not fork-safe, so it
# cannot be imported once in the parent), so every run here is slow.
pytestmark = [pytest.mark.crewai, pytest.mark.slow]

# Looked up, not imported: importing CrewAI takes seconds, which every test process would pay
# at collection even when these tests are deselected (the adapter imports it when it is built).
if importlib.util.find_spec("crewai") is None:
    pytest.skip("crewai is not installed (pip install -e '.[crewai]' -c constraints/ci.txt)",
                allow_module_level=True)

from live_steps import DEFAULT, START, apply_steps, crash, resume  # noqa: E402

from pymc_resume.bridge.adapters.crewai import OFFLINE, CrewAIAdapter  # noqa: E402
from pymc_resume.bridge.session import Session  # noqa: E402
from pymc_resume.model.state import INITIAL  # noqa: E402

RECOVER = {"action": "recover", "thread": 0, "crash": None}
ADAPTER = "pymc_resume.bridge.adapters.crewai:CrewAIAdapter"


def start_killed_at(stage, when):
    return {"action": "start", "thread": 0, "crash": crash(stage, when)}


class EventKeepingSession(Session):
    """A session that keeps the sink's events (`events`) when it closes its directory."""

    def close(self) -> None:
        self.events = self.sink.events()
        super().close()


def run(steps, drain=True):
    """Apply steps (then the drain); (violated clause ids, the closed session)."""
    session = EventKeepingSession(CrewAIAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=120)
    return apply_steps(session, steps, drain)


def statuses(session):
    return [outcome["status"] for step in session.steps for outcome in step["outcome"]]


def committed(session, thread=0):
    return [c.stage for c in session.observation.threads[thread].chain if c.stage >= 0]


def fires(session):
    return [e for e in session.events if e.kind == "fire"]


def test_declares_what_crewai_lets_us_observe_and_what_it_cannot_express():
    capabilities = CrewAIAdapter.capabilities
    assert "leases" not in capabilities  # nothing in CrewAI's store tells a live run from a dead one
    assert {"recorded-inputs", "executions"} <= capabilities
    assert set(CrewAIAdapter.unsupported) == {"fork", "update"}
    assert CrewAIAdapter().version.startswith("crewai 1.")


def test_telemetry_is_switched_off_before_crewai_is_imported():
    import os
    CrewAIAdapter()  # imports CrewAI, as every session does
    for name, value in OFFLINE.items():
        assert os.environ[name] == value


def test_a_start_commits_up_to_the_first_human_feedback_step_and_pauses_there():
    violated, session = run([START], drain=False)
    assert violated == set()
    [view] = session.observation.threads
    assert view.chain[0].stage == INITIAL
    assert committed(session) == [0, 1, 2]  # step, effect, effect of e-t-i
    assert view.chain[-1].pc == 3  # paused at the human feedback of the effect-then-interrupt node
    assert view.run == "free"
    assert [e.key for e in fires(session)] == [None, None]  # CrewAI hands methods no stable key


def test_a_crash_free_run_with_two_resumes_completes_and_holds():
    violated, session = run([START, resume(2), resume(1)])
    assert violated == set()
    assert session.observation.threads[0].chain[-1].pc == DEFAULT.workflow.end
    assert session.observation.threads[0].inputs == {3: 2, 4: 1}


def test_a_second_resume_to_a_consumed_feedback_step_is_refused():
    violated, session = run([START, resume(1), resume(2), resume(1)], drain=False)
    assert violated == set()
    assert statuses(session) == ["ok", "ok", "ok", "refused"]
    assert "No pending feedback" in session.steps[-1]["outcome"][0]["detail"]


@pytest.mark.parametrize("when", ["after-execute", "after-commit"])
def test_recovery_after_a_sigkill_runs_the_completed_effect_method_again(when):
    # The paper's claim: kickoff(inputs={"id": ...}) restores the state and starts the flow
    # over, so the effect method, whose completion CrewAI had persisted, runs and fires again.
    violated, session = run([start_killed_at(1, when), RECOVER])
    assert violated == {"prefix-continuation", "effect-exactly-once"}
    assert statuses(session)[:2] == ["crashed", "ok"]
    assert len(fires(session)) == 3  # the effect at stage 1 twice, the effect at stage 2 once


def test_recovery_after_a_sigkill_before_the_effect_reruns_the_committed_step():
    violated, session = run([start_killed_at(1, "before-execute"), RECOVER])
    assert violated == {"prefix-continuation"}
    assert committed(session)[:3] == [0, 0, 1]  # stage 0 committed again: a rewind


def test_recovery_of_a_resumed_thread_asks_again_for_feedback_it_already_consumed():
    steps = [START, resume(2, crash(4, "before-execute")), RECOVER]
    violated, session = run(steps, drain=False)
    assert "prefix-continuation" in violated
    assert session.observation.threads[0].chain[-1].pc == 3  # paused at stage 3 again


def test_a_schema_invalid_resume_value_is_refused_after_crewai_consumed_the_feedback_step():
    violated, session = run([START, resume(-1), resume(1)], drain=False)
    assert statuses(session) == ["ok", "refused", "refused"]
    assert "ValidationError" in session.steps[1]["outcome"][0]["detail"]  # the state's own check
    # ...but CrewAI had already cleared the pending feedback: no value can be delivered any more.
    assert "No pending feedback" in session.steps[2]["outcome"][0]["detail"]
    assert session.observation.threads[0].chain[-1].pc == 3
    # CrewAI records no claim, but a valid value refused where the invalid one was refused shows
    # the invalid value consumed the interrupt, which the clause forbids.
    assert violated == {"checkpoint-validity"}


def test_two_concurrent_resumes_both_consume_the_feedback_step():
    race = {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "after-load"}
    violated, session = run([START, race], drain=False)
    assert "consume-once-consumption" in violated
    assert statuses(session) == ["ok", "ok", "ok"]


def test_fork_and_update_are_refused_as_not_expressible():
    fork = {"action": "fork", "thread": 0, "checkpoint": 1, "intent": "replay", "value": None}
    update = {"action": "update", "thread": 0, "value": 1}
    violated, session = run([START, fork, update], drain=False)
    assert violated == set()
    assert statuses(session) == ["ok", "refused", "refused"]


def test_fuzz_through_the_cli_finds_the_rerun_of_completed_methods(tmp_path):
    # A small fixed-seed budget without shrinking: every CrewAI step is a fresh process that
    # takes seconds (most of it importing what a Flow instance loads), so shrinking over CrewAI
    # took most of half an hour. Shrinking is tested on LangGraph and the reference runtime.
    out = tmp_path / "out.json"
    fuzz = subprocess.run(
        [sys.executable, "-m", "pymc_resume", "fuzz", ADAPTER, "--examples", "3", "--steps", "4", "--seed", "1",
         "--no-shrink", "--repro-dir", str(tmp_path / "repros"), "--json", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=1800,
    )
    assert fuzz.returncode == 1, fuzz.stdout + fuzz.stderr
    result = json.loads(out.read_text())
    assert result["adapter_version"].startswith("crewai ")
    assert result["clauses"]["liveness"]["verdict"] == "skipped"
    assert result["clauses"]["prefix-continuation"]["verdict"] == "violated"
