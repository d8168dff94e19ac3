"""The Agent Framework adapter against real agent-framework-core workflows on a real
FileCheckpointStorage directory, with real SIGKILLs.

Skipped when agent-framework-core is not installed (`pip install -e '.[agent-framework]' -c
constraints/agent-framework-1.23.0.txt`). Each test is a few client operations (about a second).
"""

import pytest

pytestmark = pytest.mark.agent_framework

pytest.importorskip(
    "agent_framework",
    reason="agent-framework-core is not installed "
    "(pip install 'pymc-resume[agent-framework]' -c constraints/agent-framework-1.23.0.txt)",
)

from live_steps import START, apply_steps, crash, resume

from pymc_resume.bridge.adapter import declared_variants
from pymc_resume.bridge.adapters.agent_framework import (
    RESPOND_AT_LATEST,
    RESPOND_AT_PAUSE,
    AgentFrameworkAdapter,
)
from pymc_resume.bridge.judging.session import Session
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.state import INITIAL

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages 0..3


def session_of(allowed_types=True):
    return Session(AgentFrameworkAdapter(allowed_types), SMALL.workflow, SMALL.values, step_timeout=60)


def run(steps, allowed_types=True, drain=True):
    return apply_steps(session_of(allowed_types), steps, drain)


def statuses(session, thread=0):
    return [o["status"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def at_pause(step):
    return {**step, "variant": RESPOND_AT_PAUSE}


def test_declares_both_ways_to_address_a_response_and_update_as_unsupported():
    adapter = AgentFrameworkAdapter()
    assert adapter.version.startswith("agent-framework-core 1.")
    assert adapter.capabilities == {"recorded-inputs", "executions"}  # no lease: liveness is skipped
    assert set(adapter.unsupported) == {"update"}
    variants = declared_variants(adapter)
    assert list(variants) == ["start", "resume", "resume-together", "recover", "fork"]
    for operation in ("resume", "resume-together"):
        assert [v.name for v in variants[operation]] == [RESPOND_AT_LATEST, RESPOND_AT_PAUSE]
    assert [v.intents for v in variants["fork"]] == [("replay",), ("edit",)]
    assert all(v.docs for each in variants.values() for v in each)


def test_a_start_checkpoints_every_superstep_and_parks_at_the_request():
    session = session_of()
    try:
        session.apply(START)
        [view] = session.observation.threads
        assert view.chain[0].stage == INITIAL
        assert [c.stage for c in view.chain[1:]] == [0, 1]  # the step, then the effect before request_info
        assert view.chain[-1].pc == 2 and view.inputs == {}
        assert any(session.workdir.joinpath("checkpoints").glob("*.json"))
    finally:
        session.close()


def test_crash_free_run_holds_and_a_second_response_at_the_latest_is_refused_by_the_framework():
    violated, session = run([START, resume(1), resume(2), resume(1)])
    assert violated == set()
    assert statuses(session) == ["ok", "ok", "ok", "refused"]
    assert session.observation.threads[0].inputs == {2: 1, 3: 2}
    refusal = session.steps[-1]["outcome"][0]
    assert refusal["by"] == "framework" and "RuntimeError: No pending requests" in refusal["detail"]


def test_a_second_response_at_the_checkpoint_that_parked_is_served_again():
    # The id resolve_pause_checkpoint_id gave the client at the park still has the request
    # pending: the framework runs the response handler again (a second consumption of the
    # interrupt, counted where it is seen) and its branch becomes the latest.
    violated, session = run([START, resume(1), resume(1), at_pause(resume(2))], drain=False)
    assert violated == {"consume-once-value", "consume-once-consumption"}
    assert statuses(session) == ["ok", "ok", "ok", "ok"]
    assert session.observation.threads[0].inputs == {2: 1, 3: 2}
    [did] = session.history.late_seen.values()
    assert did.endswith("the framework recorded it in place of the consumed value")


def test_a_kill_after_a_checkpoint_was_saved_does_not_run_the_stage_again():
    session = session_of()
    try:
        session.apply({"action": "start", "thread": 0, "crash": crash(1, "after-commit")})
        session.apply({"action": "recover", "thread": 0, "crash": None})
        effects = [e for e in session.sink.events() if e.kind == "fire" and e.stage == 1]
        assert len(effects) == 1
        assert session.observation.threads[0].chain[-1].pc == 2
    finally:
        session.close()


def test_a_kill_between_the_effect_and_its_checkpoint_fires_it_again_unkeyed():
    # A plain handler is handed no stable identity: the re-fire after the restore is applied.
    violated, _ = run(
        [
            {"action": "start", "thread": 0, "crash": crash(1, "after-execute")},
            {"action": "recover", "thread": 0, "crash": None},
        ]
    )
    assert violated == {"effect-exactly-once"}


def test_the_storage_as_it_comes_stores_no_checkpoint_of_the_state_type():
    # FileCheckpointStorage refuses to save FuzzState (not in allowed_checkpoint_types); the
    # framework logs it and runs on, so a recovery starts over and fires the effect again. Its
    # lookups name no checkpoint to respond at, so the client refuses both resumes itself: no
    # evidence for a verdict.
    steps = [START, resume(1), at_pause(resume(1)), {"action": "recover", "thread": 0, "crash": None}]
    violated, session = run(steps, allowed_types=False)
    assert [c.stage for c in session.observation.threads[0].chain] == [INITIAL]  # nothing stored
    assert violated == {"effect-exactly-once"}
    latest, pause = (session.steps[i]["outcome"][0] for i in (1, 2))
    assert latest["by"] == pause["by"] == "client"
    assert "storage.get_latest found no checkpoint" in latest["detail"]
    assert "resolve_pause_checkpoint_id returned None" in pause["detail"]
    assert "resume" not in session.exercised


def test_an_edit_fork_restores_the_parked_checkpoint_with_its_new_response_and_runs_on():
    # The sample's call, run(checkpoint_id=c, responses={request_id: v}), on a new instance: the
    # fork consumes its new value and runs on to the next request, with no start of its own.
    fork = {"action": "fork", "thread": 0, "checkpoint": 2, "intent": "edit", "value": 2}
    session = session_of()
    try:
        for step in [START, resume(1), fork]:
            session.apply(step)
        assert session.steps[-1]["outcome"][0]["status"] == "ok"
        parent, child = session.observation.threads
        assert child.inputs[2] == 2 and parent.inputs[2] == 1
        assert [c.app for c in child.chain[:3]] == [c.app for c in parent.chain[:3]]
        assert child.chain[-1].pc == 3 and child.chain[-1].app[1] == 2  # ran stage 2 with v2, parked
        fork_runs = [e for e in session.sink.events() if e.kind == "execute" and e.thread == 1]
        assert [e.stage for e in fork_runs] == [2]  # its ancestry did not run again
    finally:
        session.close()
