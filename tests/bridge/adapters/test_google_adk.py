"""The Google ADK adapter against a real resumable ADK App whose sessions are in a real
DatabaseSessionService (SQLite in the test's workdir, or the PostgreSQL server), with real
SIGKILLs. The configurations' profiles are run once, in tests/bridge/test_profile_all.py.

Skipped when google-adk is not installed (`pip install -e '.[google-adk]' -c
constraints/google-adk-2.13.0.txt`). Each test is a few client operations (about a second).
"""

import pytest

pytestmark = pytest.mark.google_adk

pytest.importorskip(
    "google.adk",
    reason="google-adk is not installed "
    "(pip install 'pymc-resume[google-adk]' -c constraints/google-adk-2.13.0.txt)",
)

from live_steps import START, apply_steps, crash, resume

from pymc_resume.bridge.adapters.google_adk import GoogleAdkAdapter
from pymc_resume.bridge.judging.session import Session, Violation
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.state import INITIAL

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages 0..3


def session_of(store="sqlite"):
    return Session(GoogleAdkAdapter(store), SMALL.workflow, SMALL.values, step_timeout=60)


def statuses(session, thread=0):
    return [o["status"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def applied(session, steps):
    """Apply steps without the drain: the violated clause ids (the session stays open)."""
    try:
        for step in steps:
            session.apply(step)
    except Violation as violation:
        return set(violation.clauses)
    return set()


def test_declares_its_calls_and_fork_as_unsupported():
    adapter = GoogleAdkAdapter()
    assert adapter.version.startswith("google-adk 2.")
    # No lease, but a thread is parked only while a confirmation asked for its head is unanswered.
    assert adapter.capabilities == {"recorded-inputs", "executions", "late-inputs", "stuck-runs"}
    assert adapter.effect_key["key"] == "none"  # ADK documents no idempotency key
    assert set(adapter.unsupported) == {"fork"} and "rewind_async" in adapter.unsupported["fork"]
    operations = {"start", "resume", "resume-together", "crash", "recover", "update"}
    assert set(adapter.framework_calls) == operations
    with pytest.raises(ValueError, match="store must be one of"):
        GoogleAdkAdapter("memory")


def test_a_start_commits_each_tool_result_and_parks_at_the_confirmation():
    session = session_of()
    try:
        session.apply(START)
        [view] = session.observation.threads
        assert view.chain[0].stage == INITIAL
        assert [c.stage for c in view.chain[1:]] == [0, 1]  # the step, then the effect before the request
        assert view.chain[-1].pc == 2 and view.inputs == {}
    finally:
        session.close()


def test_a_confirmation_after_completion_is_recorded_and_ignored():
    # ADK stores the second confirmation response and ends the invocation without an error.
    violated, session = apply_steps(session_of(), [START, resume(1), resume(2), resume(1)])
    assert violated == {"consume-once-value"}
    assert statuses(session) == ["ok", "ok", "ok", "ok"]
    assert session.observation.threads[0].inputs == {2: 1, 3: 2}
    assert session.observation.threads[0].late_inputs == ((3, 1),)  # the session keeps it


def test_a_kill_after_a_tool_result_was_stored_does_not_run_the_tool_again():
    session = session_of()
    try:
        session.apply({"action": "start", "thread": 0, "crash": crash(1, "after-commit")})
        session.apply({"action": "recover", "thread": 0, "crash": None})
        fires = [e for e in session.sink.events() if e.kind == "fire" and e.stage == 1]
        assert len(fires) == 1
        assert session.observation.threads[0].chain[-1].pc == 2
    finally:
        session.close()


def test_a_kill_before_the_tool_result_was_stored_runs_it_again_and_applies_it_twice():
    # At least once, as ADK's resume page says, and ADK documents no key to tell the re-run by:
    # the effect is applied twice.
    session = session_of()
    try:
        violated = applied(
            session,
            [
                {"action": "start", "thread": 0, "crash": crash(1, "after-execute")},
                {"action": "recover", "thread": 0, "crash": None},
            ],
        )
        assert violated == {"effect-exactly-once"}
        fires = [e for e in session.sink.events() if e.kind == "fire" and e.stage == 1]
        assert len(fires) == 2 and fires[0].key is None and fires[1].key is None
    finally:
        session.close()


def test_a_second_confirmation_after_a_kill_mid_tool_replaces_the_claimed_value():
    session = session_of()
    try:
        violated = applied(
            session,
            [START, resume(1, crash(2, "after-execute")), resume(2)],
        )
        assert "consume-once-value" in violated
        view = session.observation.threads[0]
        assert view.inputs[2] == 1 and view.late_inputs == ((2, 2),)  # both responses are stored
        assert view.chain[3].app[1] == 2  # the tool ran with the second
    finally:
        session.close()


def test_the_reason_says_the_second_confirmation_was_stored_and_used():
    session = session_of()
    try:
        with pytest.raises(Violation) as raised:
            for step in [START, resume(1, crash(2, "after-execute")), resume(2)]:
                session.apply(step)
        reason = raised.value.clauses["consume-once-value"]
        assert "stored it beside the value already recorded and ran stage 2 with it" in reason
    finally:
        session.close()


def test_a_second_confirmation_after_the_tool_result_leaves_a_thread_no_recovery_finishes():
    # ADK stores the second response and ends the invocation before the gated tool is called;
    # its documented recovery (run_async with the invocation id) runs nothing: liveness fails.
    session = session_of()
    with pytest.raises(Violation):  # consume-once-value, at the second confirmation
        for step in [START, resume(1, crash(2, "after-commit")), resume(2)]:
            session.apply(step)
    assert session.observation.threads[0].run == "dead"  # work left that no process is doing
    with pytest.raises(Violation) as raised:
        session.finish()
    assert "t0 at stage 3" in raised.value.clauses["liveness"]


@pytest.mark.postgres
def test_on_postgres_concurrent_confirmations_are_refused_before_the_tool_runs():
    # DatabaseSessionService locks the session row (SELECT ... FOR UPDATE) and compares its
    # revision marker: the deliveries that loaded the same revision are refused (StaleSessionError).
    session = session_of("postgres")
    try:
        together = {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "after-load"}
        violated = applied(session, [START, resume(1), together])
        assert violated == set()
        outcomes = sorted(o["status"] for o in session.steps[-1]["outcome"])
        assert outcomes == ["ok", "refused"]
        assert "StaleSessionError" in "".join(o["detail"] for o in session.steps[-1]["outcome"])
        assert len([e for e in session.sink.events() if e.kind == "execute" and e.stage == 3]) == 1
    finally:
        session.close()
