"""The consume-once gate on real LangGraph graphs and real stores: a SqliteSaver file, and the
PostgreSQL server (tests marked `postgres`, skipped only when the server does not answer).

Racers and crashed claimants are real processes: forked children released together from a
barrier, and a claimant killed with a real SIGKILL inside the node that consumes the value.

Across hosts: two network hosts and a PostgreSQL server on a private network the tests create
(`pymc_resume.bridge.race.hosts.Island`, root only); the claimant is a process on one host, the recovery
runs on the other, and only the claim's lease tells the second whether the first is alive.
"""

import multiprocessing
import os
import signal
import sqlite3
import time
import uuid

import pytest

pytestmark = pytest.mark.langgraph

pytest.importorskip(
    "langgraph.checkpoint.sqlite", reason="langgraph is not installed (pip install 'pymc-resume[langgraph]')"
)

from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from pymc_resume.bridge.kit.process import RETURNED, run_in_children
from pymc_resume.bridge.race.race import postgres_unreachable, postgres_url
from pymc_resume.gate import (
    ClaimStillHeld,
    ConsumeOnceGate,
    GateRefusal,
    InterruptAlreadyClaimed,
    InterruptAlreadyConsumed,
)


class Approval(TypedDict):
    prepared: bool
    answer: str


class Store:
    """A real checkpoint store and the files the test graph's node writes: `log` gets one line per
    execution of the approval node (`start v` / `done v`); `kill` makes it SIGKILL itself once."""

    def __init__(self, kind: str, tmp_path, url: str | None = None) -> None:
        self.kind = kind
        self.url = url or (postgres_url() if kind == "postgres" else None)
        self.path = tmp_path / "checkpoints.db"
        self.log = tmp_path / "executions.log"
        self.kill = tmp_path / "kill-once"
        self.hold = tmp_path / "hold"
        self.holding = tmp_path / "holding"  # the first execution that found `hold` waits on this
        self.thread_id = f"gate-test-{uuid.uuid4().hex}"
        self.config = {"configurable": {"thread_id": self.thread_id}}

    def saver(self):
        """A new connection, as each process opens its own."""
        if self.kind == "sqlite":
            saver = SqliteSaver(sqlite3.connect(self.path, check_same_thread=False, timeout=30))
        else:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg.rows import dict_row

            conn = psycopg.connect(self.url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
            saver = PostgresSaver(conn)
        saver.setup()
        return saver

    def graph(self, saver=None):
        saver = saver or self.saver()
        log, kill, hold, holding = self.log, self.kill, self.hold, self.holding

        def prepare(state):
            return {"prepared": True}

        def approve(state):
            answer = interrupt("approve?")
            with open(log, "a") as out:
                out.write(f"start {answer}\n")
            if kill.exists():
                kill.unlink()
                os.kill(os.getpid(), signal.SIGKILL)
            while hold.exists():  # a claimant that is still running
                time.sleep(0.01)
            if holding.exists():  # one that holds until `holding` goes; later executions pass
                holding.rename(holding.with_suffix(".taken"))
                while holding.with_suffix(".taken").exists():
                    time.sleep(0.01)
            with open(log, "a") as out:
                out.write(f"done {answer}\n")
            return {"answer": answer}

        builder = StateGraph(Approval)
        builder.add_node("prepare", prepare)
        builder.add_node("approve", approve)
        builder.add_edge(START, "prepare")
        builder.add_edge("prepare", "approve")
        builder.add_edge("approve", END)
        return builder.compile(checkpointer=saver)

    def executions(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def cleanup(self) -> None:
        if self.kind == "postgres":
            saver = self.saver()
            saver.delete_thread(self.thread_id)
            ConsumeOnceGate.for_checkpointer(saver).forget(self.thread_id)
            saver.conn.close()


def _postgres_or_skip():
    pytest.importorskip(
        "langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed"
    )
    why = postgres_unreachable(postgres_url())
    if why:
        pytest.skip(why)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    if request.param == "postgres":
        _postgres_or_skip()
    store = Store(request.param, tmp_path)
    yield store
    store.cleanup()


def parked(store: Store):
    """Start the thread: it parks at the approval interrupt. Returns (graph, gate)."""
    graph = store.graph()
    result = graph.invoke({"prepared": False, "answer": ""}, store.config)
    assert "__interrupt__" in result
    return graph, ConsumeOnceGate.for_checkpointer(graph.checkpointer)


def test_one_resume_is_served_and_a_later_one_is_refused(store):
    graph, gate = parked(store)
    seen = gate.parked(graph, store.config)
    assert gate.resume(graph, store.config, "yes")["answer"] == "yes"
    with pytest.raises(InterruptAlreadyConsumed, match=store.thread_id):
        gate.resume(graph, store.config, "no")  # the head moved past the interrupt
    with pytest.raises(InterruptAlreadyClaimed, match="'yes'") as refused:
        gate.resume(graph, store.config, "no", seen=seen)  # aimed at the interrupt it saw
    assert refused.value.claim.value == "yes" and refused.value.thread_id == store.thread_id
    assert store.executions() == ["start yes", "done yes"]
    assert graph.get_state(store.config).values["answer"] == "yes"
    assert gate.last_claim(store.config).status == "done"


def test_an_edit_fork_at_the_parked_head_leaves_the_parents_gated_resume_served_once(store):
    """A branch made at the parent's parked head (LangGraph's time travel in the same thread:
    update_state at that checkpoint as the interrupt's node) is the thread's newest checkpoint;
    the parent, addressed by its own head's checkpoint_id, is still parked there: its gated
    resume is served once, and a second one is refused."""
    graph, gate = parked(store)
    parent = graph.get_state(store.config).config  # thread id, namespace, the head's checkpoint id
    graph.update_state(parent, {"answer": "fork"}, as_node="approve")  # the fork's branch
    newest = graph.get_state(store.config).config["configurable"]["checkpoint_id"]
    assert newest != parent["configurable"]["checkpoint_id"]
    assert gate.resume(graph, parent, "yes")["answer"] == "yes"
    with pytest.raises(GateRefusal):
        gate.resume(graph, parent, "no")
    assert store.executions() == ["start yes", "done yes"]


def test_concurrent_resumes_serve_exactly_one_racer(store):
    parked(store)

    def racer(value):
        def task(barrier):
            graph = store.graph()
            gate = ConsumeOnceGate.for_checkpointer(graph.checkpointer)
            seen = gate.parked(graph, store.config)  # every racer read the parked head ...
            barrier.wait()  # ... before any of them claims
            try:
                gate.resume(graph, store.config, value, seen=seen)
            except InterruptAlreadyClaimed as refused:
                return {"refused": refused.claim.value}
            return {"served": value}

        return task

    values = [f"v{i}" for i in range(4)]
    results = run_in_children([racer(v) for v in values], synchronized=True)
    assert all(r.status == RETURNED for r in results), results
    served = [r.value["served"] for r in results if "served" in r.value]
    refused = [r.value["refused"] for r in results if "refused" in r.value]
    assert len(served) == 1 and refused == served * 3  # every refusal names the winner's value
    assert store.executions() == [f"start {served[0]}", f"done {served[0]}"]


def test_a_schema_check_before_the_claim_claims_nothing(store):
    graph, gate = parked(store)

    def validate(value):
        if value not in ("yes", "no"):
            raise ValueError(f"not an answer: {value!r}")

    with pytest.raises(ValueError):
        gate.resume(graph, store.config, "maybe", validate=validate)
    assert gate.last_claim(store.config) is None and store.executions() == []
    assert gate.resume(graph, store.config, "no", validate=validate)["answer"] == "no"


@pytest.mark.parametrize("durability", ["sync", "exit"])
def test_a_crashed_claimant_is_recovered_with_the_claimed_value(store, durability):
    graph, gate = parked(store)
    store.kill.touch()

    def claimant(barrier):
        child = store.graph()
        ConsumeOnceGate.for_checkpointer(child.checkpointer).resume(
            child, store.config, "yes", durability=durability
        )

    [result] = run_in_children([claimant])
    assert result.signal == signal.SIGKILL and store.executions() == ["start yes"]

    with pytest.raises(InterruptAlreadyClaimed, match="'yes'"):  # a fresh process's new value: refused
        gate.resume(graph, store.config, "no", durability=durability)
    assert gate.outstanding_claim(store.config).value == "yes"

    gate.recover(graph, store.config, durability=durability)  # continues with the claimed value
    assert store.executions() == ["start yes", "start yes", "done yes"]
    assert graph.get_state(store.config).values["answer"] == "yes"
    claim = gate.last_claim(store.config)
    assert (claim.status, claim.attempts) == ("done", 2)
    assert gate.recover(graph, store.config) is None  # nothing left to recover
    with pytest.raises(InterruptAlreadyConsumed):
        gate.resume(graph, store.config, "no")


def test_recover_leaves_a_live_claimant_alone_until_it_is_killed(store):
    graph, gate = parked(store)
    store.hold.touch()
    context = multiprocessing.get_context("fork")

    def claimant():
        child = store.graph()
        ConsumeOnceGate.for_checkpointer(child.checkpointer).resume(child, store.config, "yes")

    process = context.Process(target=claimant)
    process.start()
    try:
        while "start yes" not in store.executions():  # the claimant runs the node, and holds
            assert process.is_alive()
            time.sleep(0.01)
        with pytest.raises(ClaimStillHeld, match="live process"):
            gate.recover(graph, store.config)
        os.kill(process.pid, signal.SIGKILL)  # a real crash of the claimant
        process.join()
    finally:
        if process.is_alive():
            process.kill()
            process.join()
    store.hold.unlink()
    gate.recover(graph, store.config)
    assert graph.get_state(store.config).values["answer"] == "yes"
    assert store.executions() == ["start yes", "start yes", "done yes"]


def test_recover_without_a_claim_leaves_a_parked_thread_parked(store):
    graph, gate = parked(store)
    assert gate.recover(graph, store.config) is None
    assert gate.parked(graph, store.config).interrupts[0].value == "approve?"
    assert store.executions() == []


def test_refusals_share_one_base_class_and_an_in_memory_saver_is_no_shared_store():
    assert issubclass(InterruptAlreadyClaimed, GateRefusal) and issubclass(
        InterruptAlreadyConsumed, GateRefusal
    )
    from langgraph.checkpoint.memory import InMemorySaver

    with pytest.raises(TypeError, match="no shared store"):
        ConsumeOnceGate.for_checkpointer(InMemorySaver())


def test_for_sqlite_and_for_postgres_open_their_own_connections(tmp_path):
    store = Store("sqlite", tmp_path)
    graph, _ = parked(store)
    gate = ConsumeOnceGate.for_sqlite(store.path)
    assert gate.resume(graph, store.config, "yes")["answer"] == "yes"
    assert ConsumeOnceGate.for_sqlite(str(store.path)).last_claim(store.config).value == "yes"


@pytest.mark.postgres
def test_for_postgres_takes_a_url(tmp_path):
    _postgres_or_skip()
    store = Store("postgres", tmp_path)
    try:
        graph, _ = parked(store)
        gate = ConsumeOnceGate.for_postgres(postgres_url())
        assert gate.resume(graph, store.config, "yes")["answer"] == "yes"
        with pytest.raises(InterruptAlreadyConsumed):
            ConsumeOnceGate.for_postgres(postgres_url()).resume(graph, store.config, "no")
    finally:
        store.cleanup()


# -- across hosts: a lease, and a fence ----------------------------------------------------------

LEASE = 1.0  # seconds: short, so that a dead holder's claim lapses within the test


def _island_or_skip():
    from pymc_resume.bridge.race.hosts import running_as_root

    _postgres_or_skip()
    if not running_as_root():
        pytest.skip("network hosts need root (ip netns, veth pairs)")


@pytest.fixture(scope="module")
def island():
    """Two network hosts and a PostgreSQL server on the island, for this module's tests."""
    _island_or_skip()
    from pymc_resume.bridge.race.hosts import Island

    with Island(2) as made:
        yield made


@pytest.fixture
def two_hosts(island, tmp_path):
    """The test runs on host B (its thread in B's namespace); `on_host_a(task)` runs a task in
    a process forked onto host A. The thread is parked, through the gate, from host B."""
    from pymc_resume.bridge.race.hosts import entered

    store = Store("postgres", tmp_path, island.url)
    with entered(island.hosts[1]):
        graph, gate = parked(store)
        yield store, graph, ConsumeOnceGate.for_checkpointer(graph.checkpointer, lease=LEASE)
        graph.checkpointer.conn.close()


def on_host_a(island, task):
    """Run `task` in a process on host A; returns (process, a file holding its result)."""
    from pymc_resume.bridge.race.hosts import placing

    context = multiprocessing.get_context("fork")
    with placing([island.hosts[0]]):
        process = context.Process(target=task)
        process.start()
    return process


def claimant(store: Store, result_file):
    """Resume "yes" through a gate on this (the child's) host, writing how it ended."""

    def run():
        from pymc_resume.gate._holders import this_host

        graph = store.graph()
        gate = ConsumeOnceGate.for_checkpointer(graph.checkpointer, lease=LEASE)
        result_file.write_text(f"host {this_host()}\n")
        try:
            gate.resume(graph, store.config, "yes")
        except GateRefusal as refused:
            with open(result_file, "a") as out:
                out.write(f"{type(refused).__name__}: {refused}\n")
            return
        with open(result_file, "a") as out:
            out.write("served\n")

    return run


def wait_for(condition, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def freeze_between_writes(process, url: str) -> None:
    """SIGSTOP `process` at a moment it holds no lock on a claim row: not inside a fenced
    write, which LangGraph may still be saving in the background while the node runs (a
    holder frozen there is another case, see docs/gate.md). A lock seen once it is frozen
    stays: then it is let go on and frozen again a moment later."""
    import psycopg

    from pymc_resume.gate._claims import TABLE

    def locked() -> bool:
        with psycopg.connect(url) as conn:
            try:
                conn.execute(f"SELECT 1 FROM {TABLE} FOR UPDATE NOWAIT")
                return False
            except psycopg.errors.LockNotAvailable:
                return True
            finally:
                conn.rollback()

    def stopped() -> bool:
        with open(f"/proc/{process.pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "T"

    for _ in range(100):
        os.kill(process.pid, signal.SIGSTOP)
        wait_for(stopped, "the claimant to stop")
        if not locked():
            return
        os.kill(process.pid, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("the claimant held a claim row locked every time it was frozen")


def stop(process) -> None:
    if process.is_alive():
        os.kill(process.pid, signal.SIGKILL)
    process.join()


@pytest.mark.postgres
@pytest.mark.xdist_group("island")  # one island per test run, not one per worker
def test_a_claimant_killed_on_one_host_is_recovered_from_another_with_the_claimed_value(
    island, two_hosts, tmp_path
):
    store, graph, gate = two_hosts
    store.kill.touch()  # the claimant SIGKILLs itself inside the node, after its claim
    process = on_host_a(island, claimant(store, tmp_path / "claimant"))
    try:
        process.join(30)
    finally:
        stop(process)
    assert process.exitcode == -signal.SIGKILL and store.executions() == ["start yes"]
    dead = gate.outstanding_claim(store.config)
    assert dead.value == "yes" and dead.status == "running"
    from pymc_resume.gate._holders import this_host

    assert dead.host != this_host() and dead.host in (tmp_path / "claimant").read_text()

    with pytest.raises(InterruptAlreadyClaimed, match="'yes'"):  # host B's own answer: refused
        gate.resume(graph, store.config, "no")
    # Host B cannot see host A's processes: only the lapsed lease says the claimant is gone.
    gate.recover(graph, store.config, wait=10 * LEASE)
    assert store.executions() == ["start yes", "start yes", "done yes"]
    assert graph.get_state(store.config).values["answer"] == "yes"
    claim = gate.last_claim(store.config)
    assert (claim.status, claim.attempts, claim.host) == ("done", 2, this_host())


@pytest.mark.postgres
@pytest.mark.xdist_group("island")
def test_a_live_claimant_on_another_host_keeps_its_claim(island, two_hosts, tmp_path):
    store, graph, gate = two_hosts
    store.holding.touch()  # the claimant runs the node and holds, alive, renewing its lease
    result = tmp_path / "claimant"
    process = on_host_a(island, claimant(store, result))
    try:
        wait_for(lambda: store.executions() == ["start yes"], "the claimant to run the node")
        with pytest.raises(ClaimStillHeld, match="another host") as held:
            gate.recover(graph, store.config)
        assert 0 < held.value.retry_after <= LEASE
        with pytest.raises(ClaimStillHeld, match="another host"):  # three leases long: still renewed
            gate.recover(graph, store.config, wait=3 * LEASE)
        store.holding.with_suffix(".taken").unlink()  # the claimant finishes
        process.join(30)
    finally:
        stop(process)
    assert "served" in result.read_text()
    assert store.executions() == ["start yes", "done yes"]  # never run a second time
    assert gate.recover(graph, store.config) is None
    assert gate.last_claim(store.config).attempts == 1


@pytest.mark.postgres
@pytest.mark.xdist_group("island")
def test_a_holder_taken_for_dead_is_fenced_when_it_wakes(island, two_hosts, tmp_path):
    store, graph, gate = two_hosts
    store.holding.touch()
    result = tmp_path / "claimant"
    process = on_host_a(island, claimant(store, result))
    try:
        wait_for(
            lambda: store.executions() == ["start yes"] and store.holding.with_suffix(".taken").exists(),
            "the claimant to run the node and wait in it",
        )
        freeze_between_writes(process, store.url)  # it stops renewing, like a partitioned host
        gate.recover(graph, store.config, wait=10 * LEASE)  # taken over once the lease lapsed
        assert graph.get_state(store.config).values["answer"] == "yes"
        history = len(list(graph.get_state_history(store.config)))
        os.kill(process.pid, signal.SIGCONT)
        store.holding.with_suffix(".taken").unlink()  # the old holder finishes its node ...
        process.join(30)
    finally:
        stop(process)
    assert "ClaimLost" in result.read_text()  # ... and its checkpoint write is refused
    assert len(list(graph.get_state_history(store.config))) == history
    assert store.executions() == ["start yes", "start yes", "done yes", "done yes"]
    claim = gate.last_claim(store.config)
    assert (claim.status, claim.attempts) == ("done", 2)


@pytest.mark.postgres
def test_a_holder_whose_session_the_server_ended_cannot_write(tmp_path):
    # What a holder frozen inside one of its claim store's transactions wakes to: the server
    # ended the session (idle_in_transaction_session_timeout), and the claim cannot be confirmed.
    _postgres_or_skip()
    import psycopg

    from pymc_resume.gate import ClaimLost
    from pymc_resume.gate._claims import Claim, ClaimStore

    side = ClaimStore.postgres(postgres_url())
    claim = Claim("a-thread", "", "a-checkpoint", "an-interrupt", "yes", "host/1:2/n", "running", 1, 0.0)
    with psycopg.connect(postgres_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (side.conn.info.backend_pid,))
    for _ in range(2):  # refused each time, and the store's lock is let go of
        with pytest.raises(ClaimLost, match="server ended this holder's session"):
            side.fence_begin(claim)
        assert not side.lock.locked()
    side.close()


@pytest.mark.postgres
def test_a_holder_whose_session_the_server_ends_during_a_write_is_told_it_lost_the_claim():
    # Frozen inside a fenced write (LangGraph saves in the background while a node runs): the
    # row lock went with the session, so the claim was not held to the end of the write.
    _postgres_or_skip()
    import psycopg

    from pymc_resume.gate import ClaimLost
    from pymc_resume.gate._claims import TABLE, Claim, ClaimStore

    store = ClaimStore.postgres(postgres_url())
    store.setup()
    thread = f"session-ended-{uuid.uuid4().hex}"
    claim = Claim(thread, "", "a-checkpoint", "an-interrupt", "yes", "host/1:2/n", "running", 1, 0.0)
    row = (thread, "", "a-checkpoint", "an-interrupt", "str", b"yes", claim.holder, "running", 1, 0.0)
    side = store.side()
    try:
        assert store.insert(row, lease=10.0)
        side.fence_begin(claim)  # the claim is its own: the row is share-locked
        with psycopg.connect(postgres_url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (side.conn.info.backend_pid,))
        with pytest.raises(ClaimLost, match="while a write was under way"):
            side.fence_end(claim)
        assert not side.lock.locked()
        with psycopg.connect(postgres_url()) as probe:  # nothing holds the row any more
            probe.execute(f"SELECT 1 FROM {TABLE} WHERE thread_id = %s FOR UPDATE NOWAIT", (thread,))
            probe.rollback()
    finally:
        store.delete_thread(thread)
        side.close()
        store.close()


# -- async graphs and subgraphs ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_async_resumes_serve_exactly_one_racer_and_recover_after_a_crash(kind, tmp_path):
    import asyncio

    if kind == "postgres":
        _postgres_or_skip()
    store = Store(kind, tmp_path)
    parked(store)

    async def with_async_gate(work):
        if kind == "sqlite":
            import aiosqlite
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            async with aiosqlite.connect(str(store.path)) as conn:
                saver = AsyncSqliteSaver(conn)
                gate = ConsumeOnceGate.for_sqlite(store.path)
                try:
                    return await work(store.graph(saver), gate)  # plain-function nodes, an async saver
                finally:
                    gate.close()
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(store.url) as saver:
            gate = ConsumeOnceGate.for_checkpointer(saver)
            try:
                return await work(store.graph(saver), gate)  # plain-function nodes, an async saver
            finally:
                gate.close()

    def racer(value):
        def task(barrier):
            async def work(graph, gate):
                seen = await gate.aparked(graph, store.config)
                barrier.wait()
                try:
                    await gate.aresume(graph, store.config, value, seen=seen)
                except InterruptAlreadyClaimed as refused:
                    return {"refused": refused.claim.value}
                return {"served": value}

            return asyncio.run(with_async_gate(work))

        return task

    try:
        store.kill.touch()  # the winner is SIGKILLed inside the node, after its claim
        results = run_in_children([racer(f"v{i}") for i in range(3)], synchronized=True)
        killed = [r for r in results if r.status != RETURNED]
        refused = [r.value["refused"] for r in results if r.status == RETURNED]
        assert len(killed) == 1 and len(refused) == 2 and len(set(refused)) == 1, results
        winner = refused[0]
        assert store.executions() == [f"start {winner}"]

        async def recover(graph, gate):
            await gate.arecover(graph, store.config)
            return (await graph.aget_state(store.config)).values["answer"]

        assert asyncio.run(with_async_gate(recover)) == winner  # the claimed value, not a new one
        assert store.executions() == [f"start {winner}", f"start {winner}", f"done {winner}"]
    finally:
        store.cleanup()


def test_an_interrupt_inside_a_subgraph_is_refused_not_run_ungated(tmp_path):
    from pymc_resume.gate import NotCovered

    store = Store("sqlite", tmp_path)
    inner = StateGraph(Approval)
    inner.add_node("ask", lambda state: {"answer": interrupt("approve inside?")})
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    outer = StateGraph(Approval)
    outer.add_node("review", inner.compile())
    outer.add_edge(START, "review")
    outer.add_edge("review", END)
    graph = outer.compile(checkpointer=store.saver())
    assert "__interrupt__" in graph.invoke({"prepared": False, "answer": ""}, store.config)
    gate = ConsumeOnceGate.for_checkpointer(graph.checkpointer)
    with pytest.raises(NotCovered, match="subgraph review"):
        gate.parked(graph, store.config)
    with pytest.raises(NotCovered, match="nothing ran"):
        gate.resume(graph, store.config, "yes")
    assert gate.last_claim(store.config) is None  # nothing claimed
    assert graph.get_state(store.config).next == ("review",)  # still parked


def test_async_savers_without_a_shared_connection_are_named_in_the_error():
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    saver = AsyncSqliteSaver.__new__(AsyncSqliteSaver)
    with pytest.raises(TypeError, match="for_sqlite"):
        ConsumeOnceGate.for_checkpointer(saver)
