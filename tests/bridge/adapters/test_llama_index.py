"""The LlamaIndex Workflows adapter against real llama-index-workflows, its Context serialized
with the JsonSerializer to a JSON file and restored with Context.from_dict in fresh processes,
with real SIGKILLs.

Skipped when llama-index-workflows is not installed (`pip install -e '.[llama-index]' -c
constraints/llama-index-2.26.1.txt`). Each test is a few client operations (about a second).
"""

import json

import pytest

pytestmark = pytest.mark.llama_index

pytest.importorskip(
    "workflows",
    reason="llama-index-workflows is not installed "
    "(pip install 'pymc-resume[llama-index]' -c constraints/llama-index-2.26.1.txt)",
)

from live_steps import START, apply_steps, crash, resume

from pymc_resume.bridge.adapter import declared_variants
from pymc_resume.bridge.adapters.llama_index import LlamaIndexAdapter
from pymc_resume.bridge.judging.session import Session, Violation
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.state import INITIAL, UPDATE

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages 0..3


def session_of(ignore=frozenset()):
    return Session(LlamaIndexAdapter(), SMALL.workflow, SMALL.values, step_timeout=60, ignore=ignore)


# The effect before a wait fires again at every resume (the step is replayed): judged at once, so
# the tests of later behaviour set it aside.
REFIRE = frozenset({"effect-exactly-once"})


def statuses(session, thread=0):
    return [o["status"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def test_declares_its_calls_and_fork_as_unsupported():
    adapter = LlamaIndexAdapter()
    assert adapter.version.startswith("llama-index-workflows 2.")
    assert adapter.capabilities == {"recorded-inputs", "executions"}
    assert set(adapter.unsupported) == {"fork"} and "no checkpoint history" in adapter.unsupported["fork"]
    performed = {"start", "resume", "resume-together", "crash", "recover", "update"}
    assert set(adapter.framework_calls) == performed
    # One documented call per operation, each with where the framework documents it.
    variants = declared_variants(adapter)
    assert set(variants) == performed - {"crash"}
    assert all(len(each) == 1 and each[0].docs for each in variants.values())


def test_a_start_saves_the_idle_context_parked_at_the_wait():
    session = session_of()
    try:
        session.apply(START)
        [view] = session.observation.threads
        assert view.chain[0].stage == INITIAL
        assert [c.stage for c in view.chain[1:]] == [0, 1] and view.chain[-1].pc == 2
        saved = json.loads((session.workdir / "t0.json").read_text())
        assert saved["is_running"] and saved["workers"]["n1"]["collected_waiters"]
    finally:
        session.close()


def test_the_waiting_step_runs_again_whole_when_the_response_arrives():
    # wait_for_event pauses by raising and replays the step: the effect before the wait fires twice.
    session = session_of()
    try:
        session.apply(START)
        try:
            session.apply(resume(1))
        except Violation:  # the session may judge the re-fire at once
            pass
        fires = [e for e in session.sink.events() if e.kind == "fire" and e.stage == 1]
        assert [e.role for e in fires] == ["run", "delivery"]
    finally:
        session.close()


def test_an_invalid_response_is_refused_by_the_event_schema():
    violated, session = apply_steps(session_of(), [START, resume(-1)], drain=False)
    assert statuses(session) == ["ok", "refused"]
    assert "ValidationError" in session.steps[-1]["outcome"][0]["detail"]
    assert "checkpoint-validity" not in violated


def test_a_kill_after_the_context_was_saved_recovers_to_the_saved_park():
    session = session_of()
    try:
        session.apply({"action": "start", "thread": 0, "crash": crash(0, "after-commit")})
        session.apply({"action": "recover", "thread": 0, "crash": None})
        assert session.observation.threads[0].chain[-1].pc == 2
        assert len([e for e in session.sink.events() if e.kind == "execute" and e.stage == 0]) == 1
    finally:
        session.close()


def test_an_update_shows_as_its_own_checkpoint_so_recovery_replays_it():
    # Each operation writes the saved context at most once: the versions read after each
    # operation are its history, and an update is a version at the same position.
    steps = [
        START,
        resume(1),
        resume(1, crash=crash(3, "after-execute")),
        {"action": "update", "thread": 0, "value": 2},
        {"action": "recover", "thread": 0, "crash": None},
        resume(2),
    ]
    violated, session = apply_steps(session_of(REFIRE), steps, drain=False)
    assert len(session.steps) == len(steps) and "recovery-determinism" not in violated
    assert any(c.stage == UPDATE and c.app[-1] == 2 for c in session.observation.threads[0].chain)


def test_a_value_sent_to_a_completed_run_is_ignored_and_the_run_starts_again():
    # run(ctx=restored) on a stopped context starts a new run from the StartEvent with the old
    # state store; the response finds no waiting step (an UnhandledEvent) and is recorded nowhere.
    violated, session = apply_steps(session_of(REFIRE), [START, resume(1), resume(1), resume(2)], drain=False)
    assert statuses(session) == ["ok", "ok", "ok", "ok"]  # not refused
    assert violated == {"prefix-continuation", "consume-once-value"}
    view = session.observation.threads[0]
    assert view.chain[-1].pc == 2 and view.inputs == {2: 1, 3: 1}  # parked at the first wait again
    [did] = session.history.late_seen.values()
    assert did.endswith(
        "the framework accepted it without an error, recorded it nowhere, and ran the thread "
        "again (its head went from stage 4 to stage 2)"
    )
