"""The CrewAI adapter against a real CrewAI Flow on a real SQLiteFlowPersistence file, with real
SIGKILLs.

Skipped when CrewAI is not installed (the README's test command installs it, resolved with the
other frameworks in constraints/ci.txt).
"""

import importlib.util
import json
import subprocess
import sys
import types

import pytest

# Every CrewAI client operation is a fresh process that takes seconds (most of it importing
# what a Flow instance loads: CrewAI's memory storage, LanceDB, which is not fork-safe, so it
# cannot be imported once in the parent), so every run here is slow but the few marked fast.
pytestmark = [pytest.mark.crewai]
slow = pytest.mark.slow

# Looked up, not imported: importing CrewAI takes seconds, which every test process would pay
# at collection even when these tests are deselected (the adapter imports it when it is built).
if importlib.util.find_spec("crewai") is None:
    pytest.skip(
        "crewai is not installed (pip install -e '.[crewai]' -c constraints/ci.txt)", allow_module_level=True
    )

from live_steps import DEFAULT, START, apply_steps, crash, resume

from pymc_resume.bridge.adapter import CONTRACT_OPERATIONS, FuzzSetup, framework_calls
from pymc_resume.bridge.adapters.crewai import OFFLINE, CrewAIAdapter, raised_by
from pymc_resume.bridge.hosting.registry import FAMILIES
from pymc_resume.bridge.judging.session import Session
from pymc_resume.bridge.kit.process import FAILED, RETURNED, run_in_children
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.model.state import INITIAL

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages step, effect, wait, gated
FUZZ = load_bounds("fuzz")  # ... gated, overflow, step: the overflow node can break the schema
RECOVER = {"action": "recover", "thread": 0, "crash": None}
ADAPTER = "pymc_resume.bridge.adapters.crewai:CrewAIAdapter"
EVERY_CLAUSE = frozenset(CLAUSE_IDS)


def start_killed_at(stage, when):
    return {"action": "start", "thread": 0, "crash": crash(stage, when)}


def fork(checkpoint, intent="replay", value=None, thread=0):
    return {"action": "fork", "thread": thread, "checkpoint": checkpoint, "intent": intent, "value": value}


class EventKeepingSession(Session):
    """A session that keeps the sink's events (`events`) when it closes its directory."""

    def close(self) -> None:
        self.events = self.sink.events()
        super().close()


def run(steps, drain=True, bounds=DEFAULT, ignore=frozenset(), **options):
    """Apply steps (then the drain); (violated clause ids, the closed session)."""
    session = EventKeepingSession(
        CrewAIAdapter(**options), bounds.workflow, bounds.values, step_timeout=120, ignore=ignore
    )
    return apply_steps(session, steps, drain)


def outcomes(session):
    return [outcome for step in session.steps for outcome in step["outcome"]]


def statuses(session):
    return [outcome["status"] for outcome in outcomes(session)]


def committed(session, thread=0):
    return [c.stage for c in session.observation.threads[thread].chain if c.stage >= 0]


def fires(session):
    return [e for e in session.events if e.kind == "fire"]


# -- what the adapter declares (no CrewAI process runs) ----------------------------------------


def test_declares_what_crewai_lets_us_observe_and_what_it_cannot_express():
    capabilities = CrewAIAdapter.capabilities
    assert "leases" not in capabilities  # nothing in CrewAI's store tells a live run from a dead one
    assert {"recorded-inputs", "executions"} <= capabilities
    assert set(CrewAIAdapter.unsupported) == {"update"}  # fork goes through restore_from_state_id
    assert CrewAIAdapter().version.startswith("crewai 1.")


def test_names_the_crewai_call_of_every_operation_it_performs():
    calls = framework_calls(CrewAIAdapter())
    assert list(calls) == [op for op in CONTRACT_OPERATIONS if op != "update"]
    assert "restore_from_state_id" in calls["fork"]
    assert 'kickoff(inputs={"id"' in calls["start"] and 'kickoff(inputs={"id"' in calls["recover"]
    assert "from_pending" in calls["resume"] and "human_feedback" in calls["resume"]
    assert "SIGKILL" in calls["crash"]


def test_the_default_configuration_is_crewais_state_as_it_comes_and_validation_is_named_apart():
    configurations = {c.name: c for c in FAMILIES["crewai"].configurations}
    assert configurations["sqlite/persist"].options == {}
    assert configurations["sqlite/persist+validated"].options == {"validate_assignment": True}
    assert CrewAIAdapter().options() == {"validate_assignment": False}


def test_the_one_method_configuration_names_its_pause_as_a_crash_point():
    configurations = {c.name: c for c in FAMILIES["crewai"].configurations}
    assert configurations["sqlite/persist+one-method"].options == {"effect_then_interrupt": "one-method"}
    one_method = CrewAIAdapter(effect_then_interrupt="one-method")
    assert one_method.options() == {"validate_assignment": False, "effect_then_interrupt": "one-method"}
    calls = framework_calls(one_method)
    assert "save_pending_feedback" in calls["crash"] and "@human_feedback method" in calls["start"]
    assert "save_pending_feedback" not in framework_calls(CrewAIAdapter())["crash"]
    with pytest.raises(KeyError, match="one-method"):
        CrewAIAdapter(effect_then_interrupt="one-node")


def test_telemetry_is_switched_off_before_crewai_is_imported():
    import os

    CrewAIAdapter()  # imports CrewAI, as every session does
    for name, value in OFFLINE.items():
        assert os.environ[name] == value


# -- refusals: CrewAI's only when CrewAI raised them ------------------------------------------


def test_an_exception_is_crewais_when_a_crewai_frame_raised_it_and_ours_when_our_code_did(
    tmp_path, monkeypatch
):
    import tempfile

    from crewai.flow.persistence import SQLiteFlowPersistence

    from pymc_resume.bridge.adapters import crewai as adapter_module

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # CrewAI's lock file goes there
    persistence = SQLiteFlowPersistence(str(tmp_path / "flows.db"))
    flow_class = adapter_module._flow_class(SMALL.workflow, None, persistence, False)
    with pytest.raises(ValueError, match="No pending feedback") as crewai_error:
        flow_class.from_pending("no-such-flow", persistence)
    assert raised_by(crewai_error.value) == "crewai"
    wait = SMALL.workflow.consuming[0]
    method = adapter_module._stage_method(wait, SMALL.workflow.stages[wait], [], None, Exception)
    flow = types.SimpleNamespace(last_human_feedback=types.SimpleNamespace(feedback="not a value"))
    with pytest.raises(ValueError) as our_error:
        method(flow)  # the adapter's own parsing of the feedback
    assert raised_by(our_error.value) == "adapter"


def test_a_value_error_from_the_adapters_own_code_is_a_failure_not_a_crewai_refusal(tmp_path):
    adapter = CrewAIAdapter()

    def crewai_refuses():
        adapter._flow.from_pending("no-such-flow", adapter._persistence)

    adapter.open(FuzzSetup(SMALL.workflow, SMALL.values, tmp_path, None))
    try:
        ours = adapter._task(0, lambda: int("not a value"), "run", None, "op", None)
        theirs = adapter._task(0, crewai_refuses, "run", None, "op", None)
        our_result, their_result = run_in_children([ours, theirs])
    finally:
        adapter.close()
    assert our_result.status == FAILED and "ValueError" in our_result.error
    assert their_result.status == RETURNED
    assert their_result.value["status"] == "refused"
    assert their_result.value["detail"].startswith("refused by CrewAI: ValueError: No pending feedback")


# -- runs through, crashes, races (the default configuration) ----------------------------------


@slow
def test_a_start_commits_up_to_the_first_human_feedback_step_and_pauses_there():
    violated, session = run([START], drain=False)
    assert violated == set()
    [view] = session.observation.threads
    assert view.chain[0].stage == INITIAL
    assert committed(session) == [0, 1, 2]  # step, effect, effect of e-t-i
    assert view.chain[-1].pc == 3  # paused at the human feedback of the effect-then-interrupt node
    assert view.run == "free"
    assert [e.key for e in fires(session)] == [None, None]  # CrewAI hands methods no stable key


@slow
def test_a_crash_free_run_with_two_resumes_completes_and_holds():
    violated, session = run([START, resume(2), resume(1)])
    assert violated == set()
    assert session.observation.threads[0].chain[-1].pc == DEFAULT.workflow.end
    assert session.observation.threads[0].inputs == {3: 2, 4: 1}


@slow
def test_a_second_resume_to_a_consumed_feedback_step_is_refused_by_crewai():
    violated, session = run([START, resume(1), resume(2), resume(1)], drain=False)
    assert violated == set()
    assert statuses(session) == ["ok", "ok", "ok", "refused"]
    assert outcomes(session)[-1]["detail"].startswith("refused by CrewAI: ValueError: No pending feedback")
    assert outcomes(session)[-1]["by"] == "framework"  # CrewAI raised it: evidence for the clause


@slow
@pytest.mark.parametrize("when", ["after-execute", "after-commit"])
def test_recovery_after_a_sigkill_runs_the_completed_effect_method_again(when):
    # The paper's claim: kickoff(inputs={"id": ...}) restores the state and starts the flow
    # over, so the effect method, whose completion CrewAI had persisted, runs and fires again.
    violated, session = run([start_killed_at(1, when), RECOVER])
    assert violated == {"prefix-continuation", "effect-exactly-once"}
    assert statuses(session)[:2] == ["crashed", "ok"]
    assert len(fires(session)) == 3  # the effect at stage 1 twice, the effect at stage 2 once


@slow
def test_recovery_after_a_sigkill_before_the_effect_reruns_the_committed_step():
    violated, session = run([start_killed_at(1, "before-execute"), RECOVER])
    assert violated == {"prefix-continuation"}
    assert committed(session)[:3] == [0, 0, 1]  # stage 0 committed again: a rewind


@slow
def test_two_concurrent_resumes_both_consume_the_feedback_step():
    race = {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "after-load"}
    violated, session = run([START, race], drain=False)
    assert "consume-once-consumption" in violated
    assert statuses(session) == ["ok", "ok", "ok"]


# -- schema-invalid values: what CrewAI does by default, and with the adapter's validation -----


@slow
def test_by_default_crewai_persists_a_schema_invalid_resume_value_then_refuses_to_load_it():
    steps = [START, resume(-1, thread=0), resume(1), RECOVER, fork(3)]
    violated, session = run(steps, drain=False, bounds=SMALL, ignore=EVERY_CLAUSE)
    assert statuses(session) == ["ok", "ok", "refused", "refused", "refused"]
    view = session.observation.threads[0]
    assert view.chain[-1].app[1] == -1  # stage 2 (node 1's wait) committed the forbidden value
    # CrewAI validates the state against its model only when it loads it: from_pending,
    # kickoff(inputs={"id": ...}) and restore_from_state_id all refuse it from then on.
    for refused in outcomes(session)[2:]:
        assert refused["detail"].startswith("refused by CrewAI: ")
        assert "greater than or equal to 0" in refused["detail"]
    assert len(session.observation.threads) == 1  # the refused fork made no thread
    violated, _ = run([START, resume(-1)], drain=False, bounds=SMALL)
    assert violated == {"checkpoint-validity"}


@slow
def test_with_the_adapters_validation_an_invalid_value_is_refused_by_the_adapter_after_crewai_consumed_it():
    violated, session = run(
        [START, resume(-1), resume(1)], drain=False, bounds=SMALL, validate_assignment=True
    )
    assert statuses(session) == ["ok", "refused", "refused"]
    assert outcomes(session)[1]["detail"].startswith("refused by the adapter's validation")
    # ...but CrewAI had already cleared the pending feedback: no value can be delivered any more.
    assert outcomes(session)[2]["detail"].startswith("refused by CrewAI: ValueError: No pending feedback")
    assert session.observation.threads[0].chain[-1].pc == 2
    # CrewAI records no claim, but a valid value refused where the invalid one was refused shows
    # the invalid value consumed the interrupt, which the clause forbids.
    assert violated == {"checkpoint-validity"}


@slow
def test_by_default_crewai_persists_a_schema_invalid_node_output_from_valid_inputs():
    # Inputs 2 and 1: the overflow node's output runs past its bound and is the forbidden value.
    violated, session = run([START, resume(2), resume(1)], drain=False, bounds=FUZZ)
    assert violated == {"checkpoint-validity"}
    view = session.observation.threads[0]
    assert view.chain[-1].pc == FUZZ.workflow.end  # the flow ran on past it to its end
    assert -1 in view.chain[-1].app


@slow
def test_with_the_adapters_validation_a_schema_invalid_node_output_fails_the_thread():
    violated, session = run([START, resume(2), resume(1), resume(1)], bounds=FUZZ, validate_assignment=True)
    assert violated == set()
    assert statuses(session) == ["ok", "ok", "refused", "refused"]
    refusal = outcomes(session)[2]["detail"]
    assert "adapter's validation" in refusal and "node output" in refusal
    view = session.observation.threads[0]
    assert view.run == "failed"
    assert all(-1 not in c.app for c in view.chain)


# -- the effect inside the @human_feedback method (sqlite/persist+one-method) ------------------

ONE_METHOD = {"effect_then_interrupt": "one-method"}


def executions(session, stage):
    """The roles of the executions of `stage` on thread 0, in order."""
    return [e.role for e in session.events if e.kind == "execute" and e.thread == 0 and e.stage == stage]


def test_one_method_builds_the_effect_into_the_feedback_method(tmp_path, monkeypatch):
    import tempfile

    from crewai.flow.persistence import SQLiteFlowPersistence

    from pymc_resume.bridge.adapters import crewai as adapter_module

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # CrewAI's lock file goes there
    persistence = SQLiteFlowPersistence(str(tmp_path / "flows.db"))
    two = adapter_module._flow_class(SMALL.workflow, None, persistence, False)
    one = adapter_module._flow_class(SMALL.workflow, None, persistence, False, one_method=True)

    def flow_methods(flow_class):
        return sorted(name for name in vars(flow_class) if name.startswith(("ask", "notify", "s")))

    # Stages: 0 step, 1 effect and 2 wait (the effect-then-interrupt node), 3 gated.
    assert flow_methods(two) == ["ask2", "ask3", "s0", "s1", "s2", "s3"]
    assert flow_methods(one) == ["ask3", "notify1", "s0", "s2", "s3"]


@slow
def test_one_method_fires_the_effect_in_the_feedback_methods_body_and_a_resume_does_not_run_it_again():
    violated, session = run([START, resume(1), resume(1)], bounds=SMALL, **ONE_METHOD)
    assert violated == set()
    assert statuses(session) == ["ok", "ok", "ok"]
    # The pause row (save_pending_feedback, once the body ran) commits stage 1; the completion
    # row the resume writes for the same method commits nothing; s2 takes the value.
    assert committed(session) == [0, 1, 2, 3]
    assert [c.pc for c in session.observation.threads[0].chain] == [0, 1, 2, 3, 4]
    # The body ran once, in the start; CrewAI resumed from the output it kept in the pending
    # feedback: the effect fired once, and stage 2 ran in the delivery.
    assert executions(session, 1) == ["run"]
    assert [(e.stage, e.role) for e in fires(session)] == [(1, "run"), (3, "delivery")]
    assert executions(session, 2) == ["delivery"]


@slow
def test_one_method_killed_once_crewai_persisted_the_pause_reruns_the_body_on_recovery():
    # SIGKILL right after save_pending_feedback returned: the pause (stage 1's commit) is durable.
    violated, session = run(
        [start_killed_at(1, "after-commit"), RECOVER], drain=False, bounds=SMALL, **ONE_METHOD
    )
    assert violated == {"prefix-continuation", "effect-exactly-once"}
    assert statuses(session) == ["crashed", "ok"]
    # kickoff(inputs={"id": ...}) restores the state and starts the flow over: the step and the
    # feedback method's body run again, the effect fires again, and CrewAI pauses again.
    assert committed(session) == [0, 1, 0, 1]
    assert executions(session, 1) == ["run", "recovery"]
    assert [(e.stage, e.role) for e in fires(session)] == [(1, "run"), (1, "recovery")]
    assert session.observation.threads[0].chain[-1].pc == 2


@slow
def test_one_method_killed_once_crewai_persisted_the_pause_continues_from_it_on_a_delivery():
    # The same kill, then a delivery instead of a recovery: from_pending finds the pause, and
    # the body does not run again.
    steps = [start_killed_at(1, "after-commit"), resume(1), resume(1)]
    violated, session = run(steps, bounds=SMALL, **ONE_METHOD)
    assert violated == set()
    assert statuses(session) == ["crashed", "ok", "ok"]
    assert committed(session) == [0, 1, 2, 3]
    assert executions(session, 1) == ["run"]
    assert [(e.stage, e.role) for e in fires(session)] == [(1, "run"), (3, "delivery")]


# -- forks through kickoff(restore_from_state_id=...) ------------------------------------------


@slow
def test_a_replay_fork_from_the_head_goes_through_restore_from_state_id_and_reruns_the_flow():
    violated, session = run([START, resume(1), fork(3)], drain=False, bounds=SMALL, ignore=EVERY_CLAUSE)
    assert statuses(session) == ["ok", "ok", "ok"]
    assert outcomes(session)[-1]["thread"] == 1
    parent, forked = session.observation.threads
    assert forked.chain[:4] == parent.chain  # hydrated from the parent's latest snapshot
    # CrewAI's fork runs the flow from its @start method with the copied state: stages 0 and 1
    # run again (the effect fires again) and it asks again for the feedback it had consumed.
    assert [c.stage for c in forked.chain[4:]] == [0, 1]
    assert forked.chain[-1].pc == 2 and forked.run == "free"
    assert [(e.thread, e.stage) for e in fires(session)] == [(0, 1), (1, 1)]
    assert committed(session, 0) == [0, 1, 2]  # the parent is left as it was
    violated, _ = run([START, resume(1), fork(3)], drain=False, bounds=SMALL)
    # Re-running the ancestry is fork-determinism's fault; prefix-continuation failing on it is
    # derived and counted there (docs/contract.md, "Where a derived fault is counted"). The
    # replay fork waits again for feedback its parent consumed: fork-intent, from the fork's own
    # rows (none records a value at stage 2).
    assert violated == {"effect-exactly-once", "fork-determinism", "fork-intent"}
    assert forked.inputs == {} and parent.inputs == {2: 1}


@slow
def test_forks_restore_from_state_id_cannot_express_are_refused_with_the_reason():
    steps = [START, resume(1), fork(1), fork(2, "edit", 2), {"action": "update", "thread": 0, "value": 1}]
    violated, session = run(steps, drain=False, bounds=SMALL)
    assert violated == set()
    assert statuses(session) == ["ok", "ok", "refused", "refused", "refused"]
    earlier, edit, update = (o["detail"] for o in outcomes(session)[2:])
    assert earlier.startswith("not expressible in CrewAI") and "latest snapshot" in earlier
    assert edit.startswith("not expressible in CrewAI") and "new input" in edit
    assert update.startswith("not expressible in CrewAI")
    assert len(session.observation.threads) == 1


@slow
def test_fuzz_through_the_cli_finds_the_rerun_of_completed_methods(tmp_path):
    # A small fixed-seed budget without shrinking: every CrewAI step is a fresh process that
    # takes seconds (most of it importing what a Flow instance loads), so shrinking over CrewAI
    # took most of half an hour. Shrinking is tested on LangGraph and the reference runtime.
    out = tmp_path / "out.json"
    fuzz = subprocess.run(
        [
            sys.executable,
            "-m",
            "pymc_resume",
            "fuzz",
            ADAPTER,
            "--examples",
            "3",
            "--steps",
            "4",
            "--seed",
            "1",
            "--no-shrink",
            "--repro-dir",
            str(tmp_path / "repros"),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=1800,
    )
    assert fuzz.returncode == 1, fuzz.stdout + fuzz.stderr
    result = json.loads(out.read_text())
    assert result["adapter_version"].startswith("crewai ")
    assert result["clauses"]["liveness"]["verdict"] == "skipped"
    # The first example forks at the head: the fork runs the completed methods again, which is
    # fork-determinism's fault (prefix-continuation failing on it is derived, counted there).
    rerun = result["clauses"]["fork-determinism"]
    assert rerun["verdict"] == "violated" and "ancestry" in rerun["reason"], rerun
