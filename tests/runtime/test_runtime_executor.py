"""The reference runtime on its own: real SQLite files, real child processes, real SIGKILLs."""

import sqlite3

import pytest

from pymc_resume.bridge.adapter import CrashPoint
from pymc_resume.bridge.adapter.nodes import FuzzNodes
from pymc_resume.bridge.adapter.sink import Sink
from pymc_resume.bridge.kit.process import KILLED, ControlledPoints, run_in_children
from pymc_resume.model.state import UPDATE
from pymc_resume.model.workflow import INVALID, Workflow
from pymc_resume.runtime import Refused, Runtime, RuntimeWorkflow, faults_for
from pymc_resume.runtime.executor import COMPLETED, PARKED
from pymc_resume.runtime.holders import holder_alive, holder_token
from pymc_resume.runtime.store import Store

# step (0), effect (1), effect-then-interrupt (2: effect, 3: wait), gated (4), step (5)
NODES = ["step", "effect", "effect-then-interrupt", "gated", "step"]


@pytest.fixture
def setup(tmp_path):
    shape = Workflow.of(NODES)
    sink = Sink.create(tmp_path / "sink.db")
    workflow = RuntimeWorkflow(
        shape, FuzzNodes(shape, sink), lambda app: INVALID not in app, lambda value: value != INVALID
    )

    def make(fault=None):
        return Runtime.create(tmp_path / f"store-{fault}.db", workflow, faults=faults_for(fault))

    return make, sink


def in_child(runtime, operation, crash=None, window=None, synchronized=False):
    def task(gate):
        probed = runtime.with_probe(ControlledPoints(crash, window, gate))
        try:
            return ["ok", operation(probed)]
        except Refused as error:
            return ["refused", str(error)]

    return task


def thread(runtime, t=0):
    return next(th for th in runtime.describe() if th["thread"] == t)


def test_runs_to_the_first_interrupt_and_parks_without_a_lease(setup):
    make, sink = setup
    runtime = make()
    assert runtime.start(0) == PARKED
    view = thread(runtime)
    assert [stage for _, _, stage in view["chain"]][1:] == [0, 1, 2]
    assert view["run"] == "free" and view["inputs"] == {}
    assert [e.kind for e in sink.events()].count("fire") == 2


def test_a_resume_is_claimed_once_under_a_real_race(setup):
    make, _ = setup
    runtime = make()
    runtime.start(0)
    tasks = [in_child(runtime, lambda r, v=v: r.resume(0, v), window="after-load") for v in (1, 2)]
    results = run_in_children(tasks, synchronized=True)
    statuses = sorted(r.value[0] for r in results)
    assert statuses == ["ok", "refused"]
    assert len(thread(runtime)["inputs"]) == 1  # one claim row: the unique key held


def test_commit_is_compare_and_set_on_the_head(tmp_path):
    store = Store.create(tmp_path / "s.db", (0, 0))
    with store.transaction() as db:
        assert store.append_checkpoint(db, 0, 0, 1, 0, (1, 0), None)
    with store.transaction() as db:  # a second commit from the same loaded head is refused
        assert not store.append_checkpoint(db, 0, 0, 1, 0, (2, 0), None)
    with store.snapshot() as db:
        assert [c.app for c in store.chain(db, 0)] == [(0, 0), (1, 0)]


def test_claim_recovered_after_a_real_sigkill(setup):
    make, _ = setup
    runtime = make()
    runtime.start(0)
    crash = CrashPoint(3, "before-execute")  # claimed, lease taken, killed before executing
    [result] = run_in_children([in_child(runtime, lambda r: r.resume(0, 2), crash)])
    assert result.status == KILLED
    view = thread(runtime)
    assert view["run"] == "dead" and view["inputs"] == {3: 2}
    with pytest.raises(Refused, match="already consumed"):
        runtime.resume(0, 1)  # the claim is a delivered input: refused
    assert runtime.recover(0) == PARKED  # continues with the claimed value up to the gate
    view = thread(runtime)
    assert view["chain"][-1][1][2] == 2 and view["run"] == "free"


def test_lease_of_a_live_holder_is_not_taken_over(tmp_path):
    store = Store.create(tmp_path / "s.db", (0,))
    with store.transaction() as db:
        store.set_lease(db, 0, holder_token())
        db.execute("UPDATE threads SET status = 'started' WHERE id = 0")
    assert holder_alive(holder_token())
    shape = Workflow.of(["step"])
    runtime = Runtime(tmp_path / "s.db", RuntimeWorkflow(shape, None, lambda a: True, lambda v: True))
    with pytest.raises(Refused, match="running"):
        runtime.recover(0)
    with pytest.raises(Refused, match="running"):
        runtime.update(0, 1)


def test_effect_refired_after_a_crash_is_deduplicated_by_key(setup):
    make, sink = setup
    runtime = make()
    crash = CrashPoint(1, "after-execute")  # the effect fired, its commit never happened
    [result] = run_in_children([in_child(runtime, lambda r: r.start(0), crash)])
    assert result.status == KILLED
    assert runtime.recover(0) == PARKED
    fires = [e for e in sink.events() if e.kind == "fire" and e.node == 1]
    assert len(fires) == 2 and [e.applied for e in fires] == [True, False]
    assert fires[0].key == fires[1].key is not None


def test_sink_dedupes_keyed_fires_and_applies_unkeyed_ones(tmp_path):
    sink = Sink.create(tmp_path / "sink.db")

    class Call:
        thread, stage, node, op, role = 0, 1, 1, "s0", "run"

        def __init__(self, key):
            self.idempotency_key = key

    assert sink.fire(Call("k"), (0,)) and not sink.fire(Call("k"), (0,))
    assert sink.fire(Call(None), (0,)) and sink.fire(Call(None), (0,))


def test_fork_copies_and_never_touches_the_parent(setup):
    make, _ = setup
    runtime = make()
    runtime.start(0)
    runtime.resume(0, 1)
    runtime.resume(0, 1)
    before = thread(runtime)
    fork = runtime.fork(0, 4, "edit", 2)  # checkpoint 4 waits at the gate, stage 4 (consumed v1)
    assert thread(runtime, fork)["chain"] == before["chain"][:5]
    assert thread(runtime, fork)["inputs"] == {3: 1, 4: 2}
    assert runtime.start(fork) == COMPLETED
    assert thread(runtime) == before
    with pytest.raises(Refused, match="intent"):
        runtime.fork(0, 1, "sideways")


def test_invalid_inputs_are_refused_before_anything_is_persisted(setup):
    make, _ = setup
    runtime = make()
    runtime.start(0)
    before = thread(runtime)
    with pytest.raises(Refused, match="schema"):
        runtime.resume(0, INVALID)
    with pytest.raises(Refused, match="schema"):
        runtime.update(0, INVALID)
    assert thread(runtime) == before
    runtime.update(0, 2)
    assert thread(runtime)["chain"][-1][2] == UPDATE


def test_the_correct_runtime_completes_and_records_each_input_once(setup):
    make, _ = setup
    runtime = make()
    assert runtime.start(0) == PARKED
    assert runtime.resume(0, 2) == PARKED
    assert runtime.resume(0, 1) == COMPLETED
    view = thread(runtime)
    assert view["inputs"] == {3: 2, 4: 1}
    stages = [stage for _, _, stage in view["chain"] if stage >= 0]
    assert stages == list(range(6))


def test_fault_switches_use_the_model_mutant_names():
    assert faults_for(None) == frozenset() == faults_for("none")
    assert faults_for("no-claim") == {"no-claim"}
    assert faults_for("rerun-effects-on-restart") == {"restart-from-first-stage", "unkeyed-effects"}
    with pytest.raises(KeyError):
        faults_for("no-such-fault")


def test_no_claim_fault_lets_two_racers_execute_one_interrupt(setup):
    make, sink = setup
    runtime = make("no-claim")
    runtime.start(0)
    tasks = [
        in_child(runtime, lambda r, i=i: r.resume(0, 1, op=f"d{i}"), window="after-execute") for i in range(2)
    ]
    run_in_children(tasks, synchronized=True)
    executed = {e.op for e in sink.events() if e.kind == "execute" and e.stage == 3}
    assert executed == {"d0", "d1"}


def test_store_is_a_real_sqlite_file_in_wal_mode(setup, tmp_path):
    make, _ = setup
    runtime = make()
    db = sqlite3.connect(runtime.store.path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


# -- reach: forks from the head, schema-invalid node outputs, warm clients, ordered release --

OVERFLOW_NODES = ["step", "effect", "effect-then-interrupt", "gated", "overflow"]


@pytest.fixture
def overflow_setup(tmp_path):
    shape = Workflow.of(OVERFLOW_NODES)
    sink = Sink.create(tmp_path / "sink.db")
    workflow = RuntimeWorkflow(
        shape, FuzzNodes(shape, sink), lambda app: INVALID not in app, lambda value: value != INVALID
    )

    def make(fault=None):
        return Runtime.create(tmp_path / f"store-{fault}.db", workflow, faults=faults_for(fault))

    return make


def test_a_fork_may_start_from_the_head(setup):
    make, _ = setup
    runtime = make()
    runtime.start(0)
    head = len(thread(runtime)["chain"]) - 1
    fork = runtime.fork(0, head, "replay")
    assert thread(runtime, fork)["chain"] == thread(runtime)["chain"]
    with pytest.raises(Refused, match="no checkpoint"):
        runtime.fork(0, head + 1, "replay")


def test_a_schema_invalid_node_output_fails_the_thread_and_persists_nothing(overflow_setup):
    runtime = overflow_setup()
    runtime.start(0)
    runtime.resume(0, 1)
    before = thread(runtime)
    with pytest.raises(Refused, match="node output"):
        runtime.resume(0, 2)  # inputs v1, v2: the overflow node's output leaves the schema
    after = thread(runtime)
    assert after["run"] == "failed" and after["chain"] == before["chain"] + [after["chain"][-1]]
    assert all(INVALID not in app for _, app, _ in after["chain"])
    with pytest.raises(Refused, match="failed"):
        runtime.resume(0, 1)


def test_persist_invalid_output_commits_the_out_of_bounds_output(overflow_setup):
    runtime = overflow_setup("persist-invalid-output")
    runtime.start(0)
    runtime.resume(0, 1)
    assert runtime.resume(0, 2) == COMPLETED
    assert INVALID in thread(runtime)["chain"][-1][1]


def test_a_warm_clients_fork_from_the_head_shares_its_state_only_under_the_fault(setup):
    make, _ = setup
    for fault, parent_changes in ((None, False), ("warm-fork-shares-state", True)):
        runtime = make(fault)
        assert runtime.start(0) == PARKED  # this object is the warm client: it parked t0
        before = thread(runtime)
        fork = runtime.fork(0, len(before["chain"]) - 1, "replay")
        assert runtime.start(fork) == PARKED
        runtime.resume(fork, 1)
        assert (thread(runtime)["chain"] != before["chain"]) is parent_changes
        fresh = runtime.with_probe(ControlledPoints(None))  # a fresh process: no memory
        assert fresh.parked_at == {}


@pytest.mark.parametrize("order", [[0, 1], [1, 0]])
def test_ordered_release_decides_which_racer_wins(setup, order):
    make, _ = setup
    runtime = make()
    runtime.start(0)
    tasks = [
        in_child(runtime, lambda r, v=v: r.resume(0, v, op=f"d{v}"), window="after-load") for v in (1, 2)
    ]
    results = run_in_children(tasks, synchronized=True, order=order)
    winner = order[0]
    assert [r.value[0] for r in results] == ["ok" if i == winner else "refused" for i in range(2)]
    assert thread(runtime)["inputs"][3] == winner + 1
