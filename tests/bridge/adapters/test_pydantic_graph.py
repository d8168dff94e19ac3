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

pytest.importorskip(
    "pydantic_graph.persistence.file",
    reason="pydantic-graph 1.x (with FileStatePersistence) is not installed "
    "(pip install 'pymc-resume[pydantic-graph]' -c constraints/pydantic-graph-1.107.10.txt)",
)

from live_steps import DEFAULT, START, apply_steps, crash, reproduces_again, resume

from pymc_resume.bridge.adapter import declared_variants, framework_calls
from pymc_resume.bridge.adapters.pydantic_graph import (
    ADAPTER_RULE,
    ITER_FROM_PERSISTENCE,
    LOAD_NEXT,
    NO_SNAPSHOT,
    PydanticGraphAdapter,
    _from_pydantic_graph,
)
from pymc_resume.bridge.judging.session import Session, Violation
from pymc_resume.bridge.repro.replay import load_repro
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.state import INITIAL

SPEC = "pymc_resume.bridge.adapters.pydantic_graph:PydanticGraphAdapter"


def run(steps, drain=True):
    """Apply steps (then the drain); (violated clause ids, the session)."""
    session = Session(PydanticGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    return apply_steps(session, steps, drain)


def statuses(session, thread=0):
    return [o["status"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def test_declares_what_the_file_store_shows_and_fork_and_update_as_unsupported():
    adapter = PydanticGraphAdapter()
    assert adapter.version.startswith("pydantic-graph 1.")
    assert adapter.capabilities == {"recorded-inputs", "leases", "executions", "late-inputs"}
    assert set(adapter.unsupported) == {"update", "fork"}
    assert "no fork API" in adapter.unsupported["fork"]
    assert not hasattr(adapter, "fork")  # no snapshot-file copy stands in for a fork API


def test_every_operation_it_performs_names_its_pydantic_graph_call():
    calls = framework_calls(PydanticGraphAdapter())
    assert list(calls) == ["start", "resume", "resume-together", "crash", "recover"]
    assert "load_next" in calls["resume"] and "iter_from_persistence" in calls["recover"]


def test_it_declares_both_documented_ways_to_answer_a_parked_run_the_pattern_first():
    variants = declared_variants(PydanticGraphAdapter())
    for op in ("resume", "resume-together"):
        assert [v.name for v in variants[op]] == [LOAD_NEXT, ITER_FROM_PERSISTENCE]
    load_next, from_persistence = variants["resume"]
    assert "load_next" in load_next.call and "example-human-in-the-loop" in load_next.docs
    assert "iter_from_persistence" in from_persistence.call
    assert "run.next(S{k}(value=v))" in from_persistence.call
    assert "GraphRun.next" in from_persistence.docs
    assert [v.name for v in variants["recover"]] == [ITER_FROM_PERSISTENCE]


def in_variant(step, variant):
    return {**step, "variant": variant}


# The consume-once-value situation: the run consumed v1 at S3 and v2 at S4 and ended; v1 again.
ANSWERED = [START, resume(1), resume(2)]


def test_a_second_value_under_load_next_is_ignored_and_the_pattern_starts_the_run_again():
    # load_next returns None and raises nothing; the example's else branch starts a new run on
    # the same file: the value is silently ignored and the first stage's effect fires again.
    session = Session(PydanticGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    try:
        with pytest.raises(Violation) as violation:
            for step in [*ANSWERED, in_variant(resume(1), LOAD_NEXT)]:
                session.apply(step)
        # a second run in the file: committed stages commit again, their effects fire again
        again = {"effect-exactly-once", "prefix-continuation"}
        assert set(violation.value.clauses) == {"consume-once-value", *again}
        [late] = session.steps[-1]["outcome"]
        assert late["status"] == "ok" and "started a new run (parked at S3)" in late["detail"]
        assert session.observation.threads[0].inputs == {}  # the new run's: v1 recorded nowhere
        assert session.observation.threads[0].late_inputs == ()
        snapshots = json.loads((session.workdir / "t0.json").read_text())
        ended = next(i for i, s in enumerate(snapshots) if s["kind"] == "end")
        assert [s["node"]["node_id"] for s in snapshots[ended + 1 :]] == ["S0", "S1", "S2", "S3"]
    finally:
        session.close()


def test_a_second_value_under_iter_from_persistence_is_refused_by_pydantic_graph():
    violated, session = run([*ANSWERED, in_variant(resume(1), ITER_FROM_PERSISTENCE)], drain=False)
    assert violated == set()
    [late] = session.steps[-1]["outcome"]
    assert late["status"] == "refused" and late["by"] == "framework"
    assert late["detail"] == "GraphRuntimeError: Unable to restore snapshot from state persistence."
    assert session.observation.threads[0].inputs == {3: 1, 4: 2}
    assert session.observation.threads[0].late_inputs == ()


def test_iter_from_persistence_answers_a_parked_run_as_the_pattern_does():
    session = Session(PydanticGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    try:
        for step in [START] + [in_variant(resume(v), ITER_FROM_PERSISTENCE) for v in (1, 2)]:
            session.apply(step)
        assert statuses(session) == ["ok", "ok", "ok"]
        assert session.observation.threads[0].inputs == {3: 1, 4: 2}
        snapshots = json.loads((session.workdir / "t0.json").read_text())
        # the parked S3() restored and claimed (pending), the answered S3(value=1) appended and run
        assert [(s["node"]["node_id"], s["node"].get("value"), s["status"]) for s in snapshots[3:5]] == [
            ("S3", None, "pending"),
            ("S3", 1, "success"),
        ]
    finally:
        session.close()


def test_a_second_value_after_a_kill_mid_node_is_refused_by_pydantic_graph_under_iter_from_persistence():
    # v1 claimed (S3(value=1) left 'running'): nothing is 'created', iter_from_persistence raises.
    steps = [START, resume(1, crash(3, "before-execute")), in_variant(resume(2), ITER_FROM_PERSISTENCE)]
    violated, session = run(steps, drain=False)
    assert violated == set()
    [late] = session.steps[-1]["outcome"]
    assert late["status"] == "refused" and late["by"] == "framework"
    assert "GraphRuntimeError" in late["detail"]
    assert session.observation.threads[0].inputs == {3: 1}


@pytest.mark.parametrize("variant", [LOAD_NEXT, ITER_FROM_PERSISTENCE])
def test_a_second_value_after_an_invalid_one_was_recorded_is_refused_by_pydantic_graph(variant):
    # S3(value=-1) stays in the file: pydantic-graph's own load of it raises, under both variants.
    skip = frozenset({"checkpoint-validity"})  # judged on the -1 (above); go on to the second value
    session = Session(PydanticGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60, ignore=skip)
    violated, session = apply_steps(session, [START, resume(-1), in_variant(resume(1), variant)], drain=False)
    assert violated == set() and len(session.steps) == 3
    [late] = session.steps[-1]["outcome"]
    assert late["status"] == "refused" and late["by"] == "framework"
    assert late["detail"].startswith("ValidationError")


def test_fork_determinism_and_fork_intent_are_not_applicable_in_its_profile():
    session = Session(PydanticGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    try:
        assert not session.can("fork")
        for clause_id in ("fork-determinism", "fork-intent"):
            assert "no fork API" in session.not_applicable[clause_id]
    finally:
        session.close()


def test_effects_are_unkeyed_because_pydantic_graph_documents_no_key_quoting_its_docs():
    import pymc_resume.bridge.adapters.pydantic_graph as module

    assert PydanticGraphAdapter.effect_key["key"] == "none"
    assert "'Unique ID of the snapshot'" in PydanticGraphAdapter.effect_key["why"]
    assert '"Unique ID of the snapshot"' in module.__doc__


def test_a_refusal_made_by_the_client_says_the_rule_is_the_adapters():
    # Killed right after S1's result was persisted, the file's waiting node is S2, no interrupt:
    # answering it would skip it, so the client refuses before it calls pydantic-graph.
    steps = [{"action": "start", "thread": 0, "crash": crash(1, "after-commit")}, resume(1)]
    violated, session = run(steps, drain=False)
    assert violated == set()
    [late] = session.steps[-1]["outcome"]
    assert late["status"] == "refused" and late["detail"].startswith(ADAPTER_RULE)
    assert "next to run: S2" in late["detail"] and late["by"] == "client"


def test_a_refusal_counts_as_pydantic_graphs_only_where_pydantic_graph_raised_it():
    from pydantic_graph.exceptions import GraphRuntimeError

    def raised_in_this_test():
        raise GraphRuntimeError("raised by our code, though of pydantic-graph's type")

    with pytest.raises(GraphRuntimeError) as ours:
        raised_in_this_test()
    assert not _from_pydantic_graph(ours.value)


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
        assert len(fires) == 2 and all(e.key is None for e in fires)  # pydantic-graph documents no key
    finally:
        session.close()


def test_crash_free_run_holds_and_a_late_resume_is_refused_by_iter_from_persistence():
    violated, session = run([START, resume(1), resume(2), in_variant(resume(1), ITER_FROM_PERSISTENCE)])
    assert violated == set()
    assert statuses(session) == ["ok", "ok", "ok", "refused"]
    assert session.observation.threads[0].inputs == {3: 1, 4: 2}


@pytest.mark.parametrize("when", ["before-execute", "after-execute"])
@pytest.mark.parametrize("stage", [0, 1, 2])
def test_a_kill_in_the_middle_of_a_node_is_never_recovered(stage, when):
    # The killed node's snapshot stays 'running'; iter_from_persistence finds no 'created' one.
    violated, session = run(
        [
            {"action": "start", "thread": 0, "crash": crash(stage, when)},
            {"action": "recover", "thread": 0, "crash": None},
        ]
    )
    assert violated == {"liveness"}
    recovered = session.steps[1]["outcome"][0]
    assert recovered["status"] == "refused"
    assert "GraphRuntimeError: Unable to restore snapshot from state persistence" in recovered["detail"]
    assert session.observation.threads[0].run == "dead"
    assert session.observation.threads[0].chain[-1].pc == stage


def test_a_kill_in_the_middle_of_a_delivered_interrupt_keeps_its_claim_stuck():
    violated, session = run(
        [START, resume(1, crash(3, "before-execute")), {"action": "recover", "thread": 0, "crash": None}]
    )
    assert violated == {"liveness"}
    assert session.observation.threads[0].inputs == {3: 1}  # recorded, never consumed


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_a_kill_after_the_next_snapshot_is_written_is_recovered(stage):
    violated, session = run(
        [
            {"action": "start", "thread": 0, "crash": crash(stage, "after-commit")},
            {"action": "recover", "thread": 0, "crash": None},
            resume(1),
            resume(2),
        ]
    )
    assert violated == set()
    assert statuses(session)[:2] == ["crashed", "ok"]


def test_a_schema_invalid_resume_value_is_recorded_before_it_is_refused():
    # The client appends the node with value -1; record_run's reload validates the file and raises.
    violated, session = run([START, resume(-1)], drain=False)
    assert violated == {"checkpoint-validity"}
    assert "ValidationError" in session.steps[1]["outcome"][0]["detail"]


@pytest.mark.parametrize("variant", [LOAD_NEXT, ITER_FROM_PERSISTENCE])
def test_a_delivery_that_loads_while_another_is_between_load_and_claim_runs_the_interrupt_again(variant):
    # Held at after-load, the deliveries load one at a time: the second one's load comes after the
    # first appended S3(value=1) as `created` and before record_run marks it `running`. load_next
    # (or iter_from_persistence) hands it that node; the pattern builds its own answer and runs it
    # on the loaded state, as the example does, and record_run accepts both: S3 runs twice.
    session = Session(PydanticGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    violated = set()
    try:
        session.apply(START)
        step = {"action": "resume-together", "thread": 0, "values": [1, 2], "window": "after-load"}
        try:
            session.apply({**step, "variant": variant})
        except Violation as violation:
            violated = set(violation.clauses)
        ran = sorted({e.op for e in session.sink.events() if e.kind != "fire" and e.stage == 3})
    finally:
        session.close()
    outcomes = session.steps[1]["outcome"]
    if any(o.get("by") == "framework" for o in outcomes):  # pydantic-graph's file lock failed under one
        return
    assert [o["status"] for o in outcomes] == ["ok", "ok"], outcomes
    assert ran == ["s1.0", "s1.1"]
    assert violated == {"consume-once-consumption", "consume-once-value"}


def test_concurrent_deliveries_held_after_execute_are_all_taken_by_the_pattern():
    # Free to load together, the one whose load_next comes second gets nothing (and the else
    # branch starts a new run), or the next interrupt's snapshot (and answers it), or the other's
    # answered S3 between its `created` and `running` (and runs it again, as the example does), or
    # pydantic-graph's file lock fails under it. The client refuses none of them.
    session = Session(PydanticGraphAdapter(), DEFAULT.workflow, DEFAULT.values, step_timeout=60)
    violated = set()
    try:
        session.apply(START)
        try:
            session.apply(
                {"action": "resume-together", "thread": 0, "values": [1, 2], "window": "after-execute"}
            )
        except Violation as violation:
            violated = set(violation.clauses)
        fired = [(e.op, e.stage) for e in session.sink.events() if e.kind == "fire"]
        ran_s3 = {e.op for e in session.sink.events() if e.kind != "fire" and e.stage == 3}
    finally:
        session.close()
    outcomes = session.steps[1]["outcome"]
    assert all(o["status"] == "ok" or o.get("by") == "framework" for o in outcomes), outcomes
    # Effects the start fired that fired again in a delivery: only a new run fires them.
    started = {stage for op, stage in fired if op == "s0"}
    refired = started & {stage for op, stage in fired if op.startswith("s1.")}
    new_run = [o for o in outcomes if o["detail"].startswith(NO_SNAPSHOT)]  # ok, or refused in it
    # Both accepted (ok): the one not consumed at S3 was not refused, a second record of S3
    # (docs/contract.md, "Concurrent deliveries the framework accepted").
    accepted = [o for o in outcomes if o["status"] == "ok"]
    second = {"consume-once-value"} if len(accepted) > 1 else set()
    twice = {"consume-once-consumption"} if len(ran_s3) > 1 else set()
    if refired:
        assert new_run, outcomes
        assert "effect-exactly-once" in violated <= {"effect-exactly-once", "prefix-continuation", *second}
    elif new_run:  # pydantic-graph's file lock stopped the new run before its first effect
        assert "effect-exactly-once" not in violated
    else:
        assert violated == second | twice


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


def test_a_node_output_that_breaks_the_schema_is_persisted_by_default():
    # The fuzz bounds' overflow node writes -1 from valid inputs (v1 then v2: an odd sum); the
    # framework stores that state and only its reload of the file raises ValidationError.
    fuzz = load_bounds("fuzz")
    session = Session(PydanticGraphAdapter(), fuzz.workflow, fuzz.values, step_timeout=60)
    violated, session = apply_steps(session, [START, resume(1), resume(2)], drain=False)
    assert violated == {"checkpoint-validity"}
    assert session.steps[-1]["outcome"][0]["status"] == "refused"
    assert "ValidationError" in session.steps[-1]["outcome"][0]["detail"]


@pytest.mark.slow
def test_fuzz_through_the_cli_judges_every_clause_and_its_repros_replay(tmp_path):
    # A small fixed-seed budget without shrinking (shrinking is tested on LangGraph and the
    # reference runtime). The kill mid-node that is never recovered (liveness) is the
    # battery's finding (test_profile_all) and the hand-written runs' above.
    out = tmp_path / "out.json"
    fuzz = subprocess.run(
        [
            sys.executable,
            "-m",
            "pymc_resume",
            "fuzz",
            SPEC,
            "--examples",
            "8",
            "--steps",
            "8",
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
        timeout=1200,
    )
    result = json.loads(out.read_text())
    assert result["adapter_version"].startswith("pydantic-graph 1.")
    verdicts = {cid: v["verdict"] for cid, v in result["clauses"].items()}
    # all observable: a clause is skipped only where no example exercised it (fuzzing's evidence)
    skipped = [v["reason"] for v in result["clauses"].values() if v["verdict"] == "skipped"]
    assert all(reason.startswith("not checked") for reason in skipped), skipped
    not_applicable = {cid for cid, verdict in verdicts.items() if verdict == "not-applicable"}
    assert not_applicable == {"fork-determinism", "fork-intent"}  # pydantic-graph 1.x has no fork API
    violated = [v for v in result["clauses"].values() if v["verdict"] == "violated"]
    unconfirmed = [v for v in result["clauses"].values() if v["verdict"] == "unconfirmed"]
    # The budget finds something; a finding no replay showed again (a race) is unconfirmed,
    # keeps its repro, and does not make the run exit 1.
    assert violated or unconfirmed, fuzz.stdout
    assert fuzz.returncode == (1 if violated else 0), fuzz.stdout + fuzz.stderr
    assert all(v["repro"] for v in unconfirmed)
    for verdict in violated:
        assert reproduces_again(load_repro(verdict["repro"])), verdict["reason"]
