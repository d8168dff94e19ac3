"""The OpenAI Agents SDK adapter against a real `Agent` run by the SDK's `Runner` with a scripted
model, its `RunState` in a file (and its conversation in a real SQLiteSession), with real SIGKILLs.

Skipped when openai-agents is not installed (`pip install -e '.[openai-agents]' -c
constraints/openai-agents-0.20.0.txt`). Each test is a few client operations (about a second).
"""

import json
from contextlib import contextmanager

import pytest

pytestmark = pytest.mark.openai_agents

pytest.importorskip(
    "agents",
    reason="openai-agents is not installed "
    "(pip install 'pymc-resume[openai-agents]' -c constraints/openai-agents-0.20.0.txt)",
)

from live_steps import START, crash, resume

from pymc_resume.bridge.adapter import declared_variants
from pymc_resume.bridge.adapters.openai_agents import OpenAIAgentsAdapter
from pymc_resume.bridge.judging.session import Session, Violation
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.state import INITIAL, UPDATE

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages 0..3
RECOVER = {"action": "recover", "thread": 0, "crash": None}


@contextmanager
def applied(steps, store="state-file"):
    """Apply `steps` (no drain: recoveries are steps here) up to the first violation; yield (the
    violated clause ids, the session) while its store and sink can still be read."""
    session = Session(OpenAIAgentsAdapter(store), SMALL.workflow, SMALL.values, step_timeout=60)
    violated = set()
    try:
        try:
            for step in steps:
                session.apply(step)
        except Violation as violation:
            violated = set(violation.clauses)
        yield violated, session
    finally:
        session.close()


def statuses(session, thread=0):
    return [o["status"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def executions(session, stage):
    return [e for e in session.sink.events() if e.kind == "execute" and e.stage == stage]


def stages(session, thread=0):
    return [c.stage for c in session.observation.threads[thread].chain[1:]]


def test_declares_its_calls_and_fork_as_unsupported():
    adapter = OpenAIAgentsAdapter()
    assert adapter.version.startswith("openai-agents 0.")
    assert adapter.capabilities == {"recorded-inputs", "executions", "late-inputs"}  # no lease: no liveness
    assert set(adapter.unsupported) == {"fork"}
    assert {op: [v.name for v in variants] for op, variants in declared_variants(adapter).items()} == {
        "start": ["run", "run-streamed"],
        "resume": ["interruption", "pending", "run-streamed"],
        "resume-together": ["interruption"],
        "recover": ["run", "run-streamed"],
        "update": ["context-override"],
    }
    assert "session=session" in OpenAIAgentsAdapter("sqlite-session").variants[0].call
    assert adapter.options() == {"store": "state-file"}
    with pytest.raises(ValueError, match="store must be one of"):
        OpenAIAgentsAdapter("postgres")


@pytest.mark.parametrize("store", ["state-file", "sqlite-session"])
def test_a_start_stops_for_approval_and_a_crash_free_run_holds(store):
    with applied([START, resume(1), resume(2)], store) as (violated, session):
        assert violated == set()
        assert statuses(session) == ["ok", "ok", "ok"]
        assert "stopped for approval of s2" in session.steps[0]["outcome"][0]["detail"]
        view = session.observation.threads[0]
        assert view.chain[0].stage == INITIAL and stages(session) == [0, 1, 2, 3]
        assert view.inputs == {2: 1, 3: 2}  # approved, then rejected (the formatter ran the node code)
        assert [len(executions(session, s)) for s in range(4)] == [1, 1, 1, 1]


def test_a_second_decision_to_a_finished_run_is_recorded_not_refused():
    # The interruption the run stopped with last (s3, rejected) approved again: the SDK takes the
    # decision, runs without an error and saves it in the state's approvals; nothing runs again.
    with applied([START, resume(1), resume(2), resume(1)]) as (violated, session):
        assert violated == {"consume-once-value"}
        assert statuses(session) == ["ok"] * 4
        assert len(executions(session, 3)) == 1
        approvals = json.loads((session.workdir / "t0.json").read_text())["context"]["approvals"]
        assert approvals["s3"]["rejected"] == [] and len(approvals["s3"]["approved"]) == 1
        assert session.observation.threads[0].late_inputs == ((3, 1),)  # read off those approvals


def test_a_value_approve_and_reject_cannot_carry_is_refused_by_the_client():
    with applied([START, resume(-1), resume(1)]) as (violated, session):
        assert violated == set()
        assert statuses(session) == ["ok", "refused", "ok"]
        assert session.steps[1]["outcome"][0]["detail"].startswith("NotExpressible: approve and reject")
        assert session.steps[1]["outcome"][0]["by"] == "not-expressible"


@pytest.mark.parametrize("store", ["state-file", "sqlite-session"])
def test_a_kill_between_the_effect_and_its_commit_fires_it_again_unkeyed(store):
    steps = [{"action": "start", "thread": 0, "crash": crash(1, "after-execute")}, RECOVER]
    with applied(steps, store) as (violated, session):
        assert violated == {"effect-exactly-once"}
        fires = [e for e in session.sink.events() if e.kind == "fire" and e.stage == 1]
        assert len(fires) == 2 and fires[0].key is None is fires[1].key  # the SDK documents no key
        # Without a session nothing was durable before the run stopped: the step runs again too.
        assert len(executions(session, 0)) == (2 if store == "state-file" else 1)


def test_with_a_session_recovery_continues_after_the_last_stored_turn():
    # Killed right after the session stored the effect's turn: recovery continues the stored
    # conversation (Runner.run(agent, [], session=...)), nothing that was stored runs again, and
    # resuming the state that recovery saved runs on to the end.
    steps = [
        {"action": "start", "thread": 0, "crash": crash(1, "after-commit")},
        RECOVER,
        resume(1),
        resume(1),
    ]
    with applied(steps, "sqlite-session") as (violated, session):
        assert violated == set()
        assert statuses(session) == ["crashed", "ok", "ok", "ok"]
        assert [len(executions(session, s)) for s in range(4)] == [1, 1, 1, 1]
        assert stages(session) == [0, 1, 2, 3]


def test_with_a_session_a_resume_from_the_saved_state_after_a_kill_runs_a_stored_tool_again():
    # Killed right after the session stored the approved tool's turn, before the state was saved
    # again: the saved RunState still stops at that interruption, and resuming it (as documented,
    # with the same session) runs the tool again and stores its output a second time.
    with applied([START, resume(1, crash(2, "after-commit")), resume(2)], "sqlite-session") as (
        violated,
        session,
    ):
        assert "prefix-continuation" in violated
        assert stages(session) == [0, 1, 2, 2]


def test_an_update_replaces_the_context_of_the_saved_state_and_a_schema_invalid_one_is_kept():
    with applied([START, {"action": "update", "thread": 0, "value": 1}, resume(1)]) as (violated, session):
        assert violated == set()
        assert stages(session) == [0, 1, UPDATE, 2]
        assert [c.app[-1] for c in session.observation.threads[0].chain[3:]] == [1, 1]  # tools ran on it
    with applied([START, {"action": "update", "thread": 0, "value": -1}]) as (violated, session):
        assert violated == {"checkpoint-validity"}
        assert statuses(session) == ["ok", "ok"]


@pytest.mark.parametrize("store", ["state-file", "sqlite-session"])
def test_concurrent_approvals_each_run_the_tool(store):
    together = {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "after-load"}
    with applied([START, together], store) as (violated, session):
        assert "consume-once-consumption" in violated
        assert statuses(session) == ["ok", "ok", "ok"]
        assert len(executions(session, 2)) == 2


def test_a_decision_on_the_pending_interruptions_has_nothing_to_decide_once_the_run_finished():
    late = {**resume(1), "variant": "pending"}
    with applied([START, resume(1), resume(2), late]) as (violated, session):
        assert violated == set()
        assert statuses(session) == ["ok", "ok", "ok", "refused"]
        assert session.steps[3]["outcome"][0]["by"] == "not-expressible"


@pytest.mark.parametrize("store", ["state-file", "sqlite-session"])
def test_streamed_runs_stop_resume_and_recover_as_the_plain_ones(store):
    streamed = {"variant": "run-streamed"}
    killed = {"action": "start", "thread": 0, "crash": crash(1, "after-commit"), **streamed}
    steps = [killed, {**RECOVER, **streamed}, {**resume(1), **streamed}, {**resume(2), **streamed}]
    with applied(steps, store) as (violated, session):
        assert violated == set()
        assert statuses(session) == ["crashed", "ok", "ok", "ok"]
        assert stages(session) == [0, 1, 2, 3]
        assert [len(executions(session, s)) for s in range(4)] == [1, 1, 1, 1]
