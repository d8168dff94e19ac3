"""The LangGraph adapter against real LangGraph on a real SqliteSaver file, with real SIGKILLs.

Skipped when LangGraph is not installed (`pip install -e '.[langgraph]' -c
constraints/langgraph-1.2.9.txt`). The hand-written runs are quick; the fuzz run is slow.
"""

import json
import sqlite3
import subprocess
import sys
import traceback

import pytest

pytestmark = pytest.mark.langgraph

pytest.importorskip(
    "langgraph.checkpoint.sqlite",
    reason="langgraph and langgraph-checkpoint-sqlite are not installed "
    "(pip install 'pymc-resume[langgraph]')",
)

from live_steps import DEFAULT, START, apply_steps, crash, reproduces_again, resume

from pymc_resume.bridge.adapter import CONTRACT_OPERATIONS, framework_calls
from pymc_resume.bridge.adapters.langgraph import (
    THREAD_KEY,
    LangGraphAdapter,
    LangGraphAsync,
    LangGraphExit,
    postgres_url,
)
from pymc_resume.bridge.hosting.registry import FAMILIES, AdapterSpecError, factory, resolve
from pymc_resume.bridge.judging.session import Session, Violation
from pymc_resume.bridge.repro.replay import load_repro
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.model.state import INITIAL


def run(steps, durability="sync", drain=True, store="sqlite", **options):
    """Apply steps (then the drain); (violated clause ids, the session)."""
    adapter = LangGraphAdapter(durability, store, **options)
    session = Session(adapter, DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    return apply_steps(session, steps, drain)


def fork(checkpoint, intent, value=None, thread=0):
    return {"action": "fork", "thread": thread, "checkpoint": checkpoint, "intent": intent, "value": value}


def rows(session):
    """The SqliteSaver's rows: (thread id, checkpoint id, parent id, metadata) per checkpoint, and
    (checkpoint id, task id, channel) per pending write."""
    with sqlite3.connect(session.workdir / "langgraph.db") as db:
        checkpoints = db.execute(
            "SELECT thread_id, checkpoint_id, parent_checkpoint_id, metadata "
            "FROM checkpoints ORDER BY checkpoint_id"
        ).fetchall()
        writes = db.execute(
            "SELECT checkpoint_id, task_id, channel FROM writes ORDER BY checkpoint_id"
        ).fetchall()
    return [(t, c, p, json.loads(m)) for t, c, p, m in checkpoints], writes


def test_every_operation_names_the_langgraph_call_it_is():
    calls = framework_calls(LangGraphAdapter())
    assert tuple(calls) == CONTRACT_OPERATIONS
    assert "checkpoint_id" in calls["fork"] and "update_state" in calls["fork"]
    assert "saver" not in " ".join(calls.values())  # no operation writes the checkpointer itself
    assert "ConsumeOnceGate" in framework_calls(LangGraphAdapter(gate=True))["resume"]


def test_a_replay_fork_is_a_branch_of_the_same_thread_made_by_time_travel():
    # How the fork is made, not what is judged of it (fork-intent is violated: LangGraph asks again).
    session = Session(
        LangGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60, ignore=frozenset(CLAUSE_IDS)
    )
    try:
        for step in (START, resume(1), fork(3, "replay")):
            session.apply(step)
        before = rows(session)
        session.apply({"action": "start", "thread": 1, "crash": None})
        checkpoints, _ = rows(session)
        assert {thread for thread, *_ in checkpoints} == {thread for thread, *_ in before[0]}  # one thread id
        [copy] = [row for row in checkpoints if row[3].get("source") == "fork"]
        point = session.observation.threads[0].chain[3]
        assert point.pc == 3 and copy[3][THREAD_KEY] == 1
        parked_at = [c for _, c, _, m in before[0] if m.get("step") == 3 and m.get("source") == "loop"]
        assert copy[2] == parked_at[0]  # branches from the fork point's checkpoint id
        assert session.observation.threads[1].chain[-1].pc == 3  # time travel asks the interrupt again
    finally:
        session.close()


def test_a_fork_writes_nothing_itself_and_an_edit_fork_is_update_state_at_the_past_checkpoint(
    tmp_path, monkeypatch
):
    # Every put/put_writes on the saver, in every process, records who called the checkpointer:
    # LangGraph's own code must be the caller (the adapter's Saver only watches).
    from langgraph.checkpoint.sqlite import SqliteSaver

    callers = tmp_path / "callers"

    def recording(method):
        def wrapper(self, *args, **kwargs):
            stack = traceback.extract_stack()[:-1]
            outside = [
                f
                for f in stack
                if not (f.name in ("put", "put_writes") and f.filename.endswith("adapters/langgraph.py"))
            ]
            with callers.open("a") as out:
                out.write(f"{method.__name__} {outside[-1].filename}:{outside[-1].name}\n")
            return method(self, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(SqliteSaver, "put", recording(SqliteSaver.put))
    monkeypatch.setattr(SqliteSaver, "put_writes", recording(SqliteSaver.put_writes))
    session = Session(
        LangGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60, ignore=frozenset(CLAUSE_IDS)
    )
    try:
        for step in (START, resume(1)):
            session.apply(step)
        checkpoints_before, _ = rows(session)
        callers.write_text("")
        session.apply(fork(0, "replay"))
        assert callers.read_text() == "" and rows(session)[0] == checkpoints_before  # nothing written
        session.apply(fork(3, "edit", 2))
        written = callers.read_text().splitlines()
        # update_state's own superstep (bulk_update_state) wrote them: LangGraph's code, not ours
        assert written and all("/langgraph/pregel/main.py:perform_superstep" in line for line in written), (
            written
        )
        checkpoints, _ = rows(session)
        [update] = [row for row in checkpoints if row not in checkpoints_before]
        assert update[3]["source"] == "update" and update[3][THREAD_KEY] == 2
        assert session.observation.threads[2].inputs[3] == 2  # the new input, as the interrupt's output
    finally:
        session.close()


def test_an_edit_fork_at_a_parked_head_records_its_input_on_the_parents_checkpoint():
    # update_state at the parent's parked checkpoint, as the interrupt's node, writes that
    # node's output under the parent's interrupted task on the parent's own checkpoint: read on
    # every checkpoint, the parent's recorded input at its fork point changes from none to v2.
    session = Session(
        LangGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60, ignore=frozenset(CLAUSE_IDS)
    )
    try:
        session.apply(START)
        assert 3 not in session.observation.threads[0].inputs
        session.apply(fork(3, "edit", 2))
        parent, edit = session.observation.threads
        assert parent.chain[-1].pc == 3 and parent.inputs[3] == 2
        assert edit.inputs[3] == 2 and edit.chain[-1].stage == 3
    finally:
        session.close()
    violated, _ = run([START, fork(3, "edit", 2)], drain=False)
    assert violated & {"fork-determinism", "fork-intent"}


def test_the_gate_serves_a_parents_resume_once_after_an_edit_fork_at_its_parked_head():
    # The fork's branch is the LangGraph thread's newest checkpoint; the parent is addressed by
    # its own head's checkpoint_id, where the gate claims and runs (it used to read the newest
    # checkpoint, not parked, and refused the parent's resume).
    session = Session(
        LangGraphAdapter(gate=True),
        DEFAULT.workflow,
        DEFAULT.values,
        step_timeout=60,
        ignore=frozenset(CLAUSE_IDS),
    )
    race = {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "after-load"}
    try:
        for step in (START, fork(3, "edit", 2), race):
            session.apply(step)
        assert [o["status"] for o in session.steps[-1]["outcome"]] in (["ok", "refused"], ["refused", "ok"])
        deliveries = [
            e for e in session.sink.events() if e.kind == "execute" and e.thread == 0 and e.role == "delivery"
        ]
        assert [e.stage for e in deliveries if e.stage == 3] == [3]  # served once
        assert session.observation.threads[0].chain[-1].pc == 4  # and parked at the gated node
    finally:
        session.close()


def test_one_node_effect_then_interrupt_is_a_configuration_of_its_own():
    [one_node] = [c for c in FAMILIES["langgraph"].configurations if c.name == "sqlite/sync+one-node"]
    assert one_node.options == {"durability": "sync", "effect_then_interrupt": "one-node"}
    assert LangGraphAdapter(effect_then_interrupt="one-node").options()["effect_then_interrupt"] == "one-node"
    with pytest.raises(AdapterSpecError, match="effect_then_interrupt"):
        factory("langgraph", {"effect_then_interrupt": "three-nodes"})


def test_one_node_reruns_its_effect_on_resume_and_both_fires_apply():
    # The node fires, then interrupt() parks it; the resume re-runs it from its top: the effect
    # fires again. LangGraph documents no key for it, so the sink applies both fires.
    session = Session(
        LangGraphAdapter(effect_then_interrupt="one-node"), DEFAULT.workflow, DEFAULT.values, step_timeout=60
    )
    try:
        session.apply(START)
        view = session.observation.threads[0]
        assert [c.stage for c in view.chain[1:]] == [0, 1, 2]  # stage 2 recorded by its interrupt
        assert view.chain[-1].pc == 3  # parked at the interrupt, inside the same LangGraph node
        with pytest.raises(Violation) as violation:
            session.apply(resume(1))
        assert set(violation.value.clauses) == {"effect-exactly-once"}
        assert (
            "(lineage t0, node 2, inputs []) applied 2 times"
            in violation.value.clauses["effect-exactly-once"]
        )
        assert [c.stage for c in session.observation.threads[0].chain[1:]] == [0, 1, 2, 3]
        fires = [e for e in session.sink.events() if e.kind == "fire" and e.stage == 2]
        assert len(fires) == 2 and {e.key for e in fires} == {None}
        assert [e.applied for e in fires] == [True, True]
    finally:
        session.close()


def test_one_node_replay_fork_reruns_the_effect_before_its_fork_point_under_a_new_key():
    violated, _ = run(
        [START, fork(3, "replay"), {"action": "start", "thread": 1, "crash": None}],
        drain=False,
        effect_then_interrupt="one-node",
    )
    assert {"effect-exactly-once", "fork-determinism"} <= violated


def test_registered_as_langgraph_with_a_durability_per_configuration():
    assert resolve("langgraph").load() is LangGraphAdapter
    assert LangGraphAdapter().options() == {"durability": "sync"}
    assert LangGraphAsync().options() == {"durability": "async"}
    assert LangGraphExit().options() == {"durability": "exit"}
    assert LangGraphAdapter().version.startswith("langgraph 1.")
    with pytest.raises(AdapterSpecError, match="durability"):
        factory("langgraph", {"durability": "sometimes"})
    assert [c.name for c in FAMILIES["langgraph"].configurations][:2] == [
        "sqlite/sync",
        "sqlite/sync+one-node",
    ]


def test_effects_are_unkeyed_because_langgraph_documents_no_key_quoting_its_docs():
    assert LangGraphAdapter.effect_key["key"] == "none"
    assert "Use idempotency keys or verify existing results" in LangGraphAdapter.effect_key["why"]
    assert "durable-execution" in LangGraphAdapter.effect_key["why"]


def test_command_at_checkpoint_names_both_documented_calls_it_combines():
    [variant] = [v for v in LangGraphAdapter().variants if v.name == "command-at-checkpoint"]
    assert "two documented calls combined" in variant.call
    assert "use-time-travel" in variant.docs and "interrupts" in variant.docs


def test_capabilities_are_what_langgraph_lets_us_observe():
    capabilities = LangGraphAdapter.capabilities
    assert "leases" not in capabilities  # LangGraph has no run lease: liveness is skipped
    assert {"recorded-inputs", "executions"} <= capabilities


def test_a_start_commits_up_to_the_first_interrupt_and_parks_there():
    session = Session(LangGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    try:
        session.apply(START)
        [view] = session.observation.threads
        assert view.chain[0].stage == INITIAL
        assert [c.stage for c in view.chain[1:]] == [0, 1, 2]  # step, effect, effect of e-t-i
        assert view.chain[-1].pc == 3  # parked at the interrupt of the effect-then-interrupt node
        assert view.run == "free"
        fires = [e for e in session.sink.events() if e.kind == "fire"]
        assert len(fires) == 2 and all(e.key is None for e in fires)  # LangGraph documents no key
    finally:
        session.close()


def test_a_crash_is_a_real_sigkill_and_the_thread_is_recovered():
    session = Session(LangGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    try:
        session.apply({"action": "start", "thread": 0, "crash": crash(1, "before-execute")})
        assert session.steps[-1]["outcome"][0]["status"] == "crashed"
        assert session.observation.threads[0].run == "dead"
        session.apply({"action": "recover", "thread": 0, "crash": None})
        assert session.observation.threads[0].chain[-1].pc == 3
    finally:
        session.close()


def test_a_second_resume_to_a_consumed_interrupt_is_accepted_and_recorded():
    # The paper's claim for 1.2.9: recorded durably (a __resume__ write) and never read.
    steps = [START, resume(1), resume(2), resume(1)]
    violated, session = run(steps, drain=False)
    assert "consume-once-value" in violated
    outcomes = [s["outcome"][0]["status"] for s in session.steps]
    assert outcomes == ["ok", "ok", "ok", "ok"]


def test_a_schema_invalid_update_is_persisted_without_error():
    violated, session = run([START, {"action": "update", "thread": 0, "value": -1}], drain=False)
    assert violated == {"checkpoint-validity"}
    assert session.steps[-1]["outcome"][0]["status"] == "ok"


def test_a_schema_invalid_resume_value_is_persisted_before_langgraph_raises():
    violated, session = run([START, resume(-1)], drain=False)
    assert "checkpoint-validity" in violated
    assert session.steps[-1]["outcome"][0]["status"] == "refused"  # ValidationError, but too late:
    assert session.observation.threads[0].chain[-1].app[2] == -1  # the interrupt's output is stored


def test_a_crash_free_run_with_forks_holds_everywhere_it_is_judged():
    steps = [
        START,
        resume(2),
        {"action": "fork", "thread": 0, "checkpoint": 3, "intent": "edit", "value": 1},
        {"action": "start", "thread": 1, "crash": None},
        resume(1, thread=1),
        resume(2),
    ]
    violated, session = run(steps)
    assert violated == set()
    assert [v.chain[-1].pc for v in session.observation.threads] == [DEFAULT.workflow.end] * 2


def test_two_concurrent_resumes_both_execute_the_interrupt():
    # LangGraph takes no claim before running a node: both deliveries run it.
    race = {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "after-execute"}
    violated, _ = run([START, race], drain=False)
    assert "consume-once-consumption" in violated


def test_a_replay_fork_does_not_reuse_the_inputs_recorded_after_its_fork_point():
    fork = {"action": "fork", "thread": 0, "checkpoint": 0, "intent": "replay", "value": None}
    violated, _ = run([START, resume(1), fork], drain=False)
    assert violated == {"fork-intent"}


def test_a_replay_fork_refires_an_effect():
    # The fork re-runs the node from the fork point, so its effect fires again (unkeyed).
    fork = {"action": "fork", "thread": 0, "checkpoint": 0, "intent": "replay", "value": None}
    violated, session = run([START, fork])
    assert "effect-exactly-once" in violated


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("before-execute", set()),
        # Killed after the effect node's code fired and before LangGraph stored its result, the
        # node runs again on recovery and fires again: with no key (LangGraph documents none),
        # the sink applies both. Nothing committed runs again.
        ("after-execute", {"effect-exactly-once"}),
        ("after-commit", set()),
    ],
)
def test_sync_recovery_after_a_sigkill_reruns_no_committed_work(when, expected):
    steps = [
        {"action": "start", "thread": 0, "crash": crash(1, when)},
        {"action": "recover", "thread": 0, "crash": None},
    ]
    violated, session = run(steps)
    assert violated == expected
    assert session.steps[0]["outcome"][0]["status"] == "crashed"


def test_exit_durability_loses_a_fired_effect_and_refires_it():
    # Nothing is written before the run parks, so recovery starts over from new checkpoints.
    steps = [
        {"action": "start", "thread": 0, "crash": crash(2, "before-execute")},
        {"action": "recover", "thread": 0, "crash": None},
    ]
    violated, _ = run(steps, durability="exit")
    assert violated == {"effect-exactly-once"}


def test_a_node_output_that_breaks_the_schema_is_persisted_by_default():
    # The fuzz bounds' overflow node writes -1 from valid inputs (v1 then v2: an odd sum); the
    # framework stores that state and only the next node's input validation raises ValidationError.
    fuzz = load_bounds("fuzz")
    session = Session(LangGraphAdapter(), fuzz.workflow, fuzz.values, step_timeout=60)
    violated, session = apply_steps(session, [START, resume(1), resume(2)], drain=False)
    assert violated == {"checkpoint-validity"}
    assert session.steps[-1]["outcome"][0]["status"] == "refused"
    assert "ValidationError" in session.steps[-1]["outcome"][0]["detail"]


@pytest.mark.slow
def test_fuzz_shrinks_and_every_repro_replays(tmp_path):
    # A small fixed-seed budget: LangGraph's findings show up in the first examples, and
    # shrinking runs over real LangGraph processes. Repros replay here, as `replay` does.
    out = tmp_path / "out.json"
    fuzz = subprocess.run(
        [
            sys.executable,
            "-m",
            "pymc_resume",
            "fuzz",
            "langgraph",
            "--examples",
            "4",
            "--steps",
            "6",
            "--seed",
            "1",
            "--repro-dir",
            str(tmp_path / "repros"),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=1200,
    )
    assert fuzz.returncode == 1, fuzz.stdout + fuzz.stderr
    result = json.loads(out.read_text())
    assert result["adapter_options"] == {"durability": "sync"}
    assert result["clauses"]["liveness"]["verdict"] == "skipped"
    violated = {cid: v for cid, v in result["clauses"].items() if v["verdict"] == "violated"}
    assert violated, result["clauses"]
    for clause_id, verdict in violated.items():
        # Unshrunk, the first failures were 5 and 6 steps. A failure that reproduces on every
        # replay is minimized; one whose steps race (a SIGKILL against LangGraph's background
        # write, which a loaded machine makes likelier) may keep longer steps: its reason says
        # so, and its replays show it (a CI run's repro reproduced in 5 of 6).
        replays = verdict["replays"]
        racy = "a race" in verdict["reason"] or replays["reproduced"] < replays["of"]
        if not racy:
            assert verdict["repro_steps"] <= 4, (clause_id, verdict["reason"])
        assert reproduces_again(load_repro(verdict["repro"])), clause_id


def _postgres_or_skip():
    pytest.importorskip(
        "langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed"
    )
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed")
    try:
        psycopg.connect(postgres_url(), connect_timeout=3).close()
    except psycopg.Error as error:
        pytest.skip(f"no PostgreSQL server at {postgres_url()}: {error}")


@pytest.mark.postgres
def test_postgres_saver_shows_the_same_second_resume_and_invalid_update():
    _postgres_or_skip()
    violated, _ = run([START, resume(1), resume(2), resume(1)], drain=False, store="postgres")
    assert "consume-once-value" in violated
    violated, _ = run([START, {"action": "update", "thread": 0, "value": -1}], drain=False, store="postgres")
    assert violated == {"checkpoint-validity"}


@pytest.mark.postgres
def test_postgres_saver_crash_free_run_with_an_edit_fork_holds():
    _postgres_or_skip()
    steps = [
        START,
        resume(2),
        {"action": "fork", "thread": 0, "checkpoint": 3, "intent": "edit", "value": 1},
        {"action": "start", "thread": 1, "crash": None},
        resume(1, thread=1),
        resume(2),
    ]
    violated, _ = run(steps, store="postgres")
    assert violated == set()
