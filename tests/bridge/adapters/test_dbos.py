"""The DBOS adapter against real DBOS workflows on a real SQLite (and PostgreSQL) system
database, with real SIGKILLs of the application process.

Skipped when dbos is not installed (`pip install -e '.[dbos]' -c constraints/dbos-3.4.0.txt`).
Each test is a few client operations (a second or two). The profile of every configuration
runs once, in tests/bridge/test_profile_all.py.
"""

import pytest

pytestmark = pytest.mark.dbos

pytest.importorskip(
    "dbos", reason="dbos is not installed (pip install 'pymc-resume[dbos]' -c constraints/dbos-3.4.0.txt)"
)

from live_steps import START, apply_steps, crash, resume

from pymc_resume.bridge.adapter import declared_variants
from pymc_resume.bridge.adapters.dbos_workflows import SCHEMA_TAG, DBOSAdapter
from pymc_resume.bridge.judging.session import Session
from pymc_resume.bridge.kit.postgres import connect, postgres_url, schema_of
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.state import INITIAL

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages 0..3
RECOVER = {"action": "recover", "thread": 0, "crash": None}


def session_of(adapter=None):
    return Session(adapter or DBOSAdapter(), SMALL.workflow, SMALL.values, step_timeout=60)


def run(steps, adapter=None, drain=True):
    return apply_steps(session_of(adapter), steps, drain)


def details(session, thread=0):
    return [o["detail"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def fires(session, stage):
    return [e for e in session.sink.events() if e.kind == "fire" and e.stage == stage]


def test_declares_its_calls_and_update_as_unsupported():
    adapter = DBOSAdapter()
    assert adapter.version.startswith("dbos 3.")
    assert adapter.capabilities == {"recorded-inputs", "late-inputs", "leases", "executions"}
    assert set(adapter.unsupported) == {"update"}
    variants = {op: [v.name for v in vs] for op, vs in declared_variants(adapter).items()}
    assert variants == {
        "start": ["enqueue"],
        "resume": ["send", "client-send"],
        "resume-together": ["send", "client-send"],
        "recover": ["launch", "resume-workflow"],
        "fork": ["fork-workflow"],
    }
    with pytest.raises(ValueError, match="store must be one of"):
        DBOSAdapter(store="mysql")


def test_a_start_records_each_step_and_parks_at_the_first_recv():
    session = session_of()
    try:
        session.apply(START)
        [view] = session.observation.threads
        assert view.chain[0].stage == INITIAL
        assert [c.stage for c in view.chain[1:]] == [0, 1]  # the step, then the effect before recv
        assert view.chain[-1].pc == 2 and view.inputs == {} and view.run == "free"
        assert details(session) == ["parked at stage 2"]
    finally:
        session.close()


def test_a_send_to_a_consumed_interrupt_is_recorded_and_never_read():
    # DBOS.send refuses nothing: the late message stays in the store, unconsumed.
    violated, session = run([START, resume(1), resume(2), resume(1)])
    assert violated == {"consume-once-value"}
    assert details(session) == ["parked at stage 2", "parked at stage 3", "completed", "completed"]
    view = session.observation.threads[0]
    assert view.inputs == {2: 1, 3: 2} and view.late_inputs == ((3, 1),)


def test_a_kill_after_a_step_was_recorded_does_not_run_the_step_again():
    session = session_of()
    try:
        session.apply({"action": "start", "thread": 0, "crash": crash(1, "after-commit")})
        session.apply(RECOVER)
        assert len(fires(session, 1)) == 1
        assert session.observation.threads[0].chain[-1].pc == 2
    finally:
        session.close()


def test_a_kill_inside_a_step_runs_it_again_with_the_same_step_identity():
    # Steps are at least once: the re-fire carries the same workflow id and step id, which
    # the sink applies once.
    session = session_of()
    try:
        session.apply({"action": "start", "thread": 0, "crash": crash(1, "after-execute")})
        session.apply(RECOVER)
        effects = fires(session, 1)
        assert [e.key for e in effects] == ["t0:2", "t0:2"] and sum(e.applied for e in effects) == 1
        assert session.observation.threads[0].chain[-1].pc == 2
    finally:
        session.close()


def test_a_message_delivered_before_a_crash_is_consumed_by_the_recovery():
    # Killed before the gated stage ran with the delivered value: the thread is dead (work
    # outstanding) until a recovery continues with the recorded value.
    session = session_of()
    try:
        for step in [START, resume(1), resume(1, crash=crash(3, "before-execute"))]:
            session.apply(step)
        view = session.observation.threads[0]
        assert view.run == "dead" and view.inputs == {2: 1, 3: 1}
        session.apply(RECOVER)
        view = session.observation.threads[0]
        assert view.run == "free" and view.chain[-1].pc == 4 and view.inputs == {2: 1, 3: 1}
    finally:
        session.close()


def test_the_client_send_and_resume_workflow_variants_continue_the_thread():
    steps = [START, {**resume(1), "variant": "client-send"}, {**resume(1), "variant": "client-send"}]
    violated, session = run(steps)
    assert violated == set() and details(session)[-1] == "completed"
    steps = [
        START,
        resume(1),
        resume(1, crash=crash(3, "after-execute")),
        {**RECOVER, "variant": "resume-workflow"},
    ]
    violated, session = run(steps)
    assert violated == set() and details(session)[-1] == "completed"


def test_a_replay_fork_copies_the_recorded_recv_but_waits_for_the_later_ones():
    # fork_workflow copies the steps before start_step only: the parent's later recorded input
    # is not replayed, the fork waits in recv for a new message.
    fork = {"action": "fork", "thread": 0, "checkpoint": 2, "intent": "replay", "value": None}
    violated, session = run([START, resume(1), resume(1), fork], drain=False)
    assert violated == {"fork-intent"}
    parent, child = session.observation.threads
    assert child.inputs == {2: 1} and parent.inputs == {2: 1, 3: 1}
    assert child.chain == parent.chain[:3]


def test_an_edit_fork_consumes_its_new_value():
    fork = {"action": "fork", "thread": 0, "checkpoint": 2, "intent": "edit", "value": 2}
    steps = [START, resume(1), fork, {"action": "start", "thread": 1, "crash": None}]
    violated, session = run(steps, drain=False)
    assert not violated & {"fork-determinism", "fork-intent"}
    parent, child = session.observation.threads
    assert child.inputs == {2: 2} and parent.inputs == {2: 1}
    assert child.chain[:3] == parent.chain[:3] and child.chain[-1].pc == 3


def test_one_idempotency_key_per_interrupt_keeps_a_second_send_out_of_the_store():
    # The second send is dropped by its key, silently: DBOS still answers it with success.
    violated, session = run(
        [START, resume(1), resume(2), resume(1)], adapter=DBOSAdapter(idempotency_key=True)
    )
    assert violated == {"consume-once-value"}
    view = session.observation.threads[0]
    assert view.inputs == {2: 1, 3: 2} and view.late_inputs == ()


@pytest.mark.postgres
def test_postgres_runs_in_a_schema_of_its_own_and_drops_it():
    session = Session(DBOSAdapter(store="postgres"), SMALL.workflow, SMALL.values, step_timeout=60)
    schema = schema_of(session.workdir, SCHEMA_TAG)

    def schemas():
        with connect(postgres_url()) as connection:
            query = "SELECT count(*) FROM pg_namespace WHERE nspname = %s"
            return connection.execute(query, (schema,)).fetchone()[0]

    session.apply(START)
    assert schemas() == 1
    violated, session = apply_steps(session, [resume(1), resume(2)])
    assert violated == set()
    assert session.observation.threads[0].chain[-1].pc == 4
    assert schemas() == 0
