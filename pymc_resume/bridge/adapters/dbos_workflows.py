"""The bridge adapter for DBOS Transact (`dbos`): a real `@DBOS.workflow` of `@DBOS.step`s on a
real DBOS system database, SQLite (a file in the example's workdir) or PostgreSQL (a schema of
the example's own on the server at `PYMC_RESUME_POSTGRES_URL`, created by DBOS's own migrations
and dropped when the example ends), with human input through `DBOS.recv` / `DBOS.send`.

The fuzzing workflow is one DBOS workflow, `fuzz-workflow`, per bridge thread (workflow id
`t0`, and `t1`, `t2`, ... for forks). It runs the model's stages in order, each one
`@DBOS.step` call, `fuzz-stage(stage, state, value)`, whose output (`{"stage": s, "state":
[...]}`) is the model's state after the stage; a consuming stage first waits for its value with
`DBOS.recv(topic="s<stage>")` (one topic per interrupt, so a value sent to one interrupt is never
read by another). DBOS records every step's output and every `recv`'s consumed message in the
system database, so the model's checkpoint chain is the recorded `fuzz-stage` outputs in step
order, and the recorded inputs are the recorded `recv` outputs.

DBOS is a library with process-global state (one `DBOS` instance per process, launched), and a
DBOS application is a long-running server: a workflow waiting in `recv` waits inside a live
process, and when that process dies, its PENDING workflows are recovered when an executor with
its executor id launches again (`DBOS.launch()`), from the last recorded step. Every client
operation that runs node code is such an application process: the kit's child process forks it
(so a crash point kills the process that runs the workflow, with a real SIGKILL), it constructs
`DBOS(config=...)`, registers the workflow, launches, does the operation, and runs until the store
shows the workflow complete or waiting for input (its next stage consumes a value and no message
for it was delivered or consumed); then the child SIGKILLs it, the way a DBOS server ends: the
parked workflow stays PENDING, to be recovered by the next launch. The adapter's own process never
launches DBOS: it forks with a `DBOSClient` and reads the store read-only.

Every process uses DBOS's default executor id ("local": a single server whose every restart
recovers all its PENDING workflows), and each bridge thread runs on a DBOS queue of its own
(`fuzz-t0`, ...; `DBOS.listen_queues([...])` before launch): a workflow is started with
`DBOS.enqueue_workflow`, forked onto its own queue, and recovery re-enqueues a workflow on its
queue, so a process serving one thread never runs another thread's workflow.

How the contract's operations map (docs/dbos.md says more):

- start: `DBOS.enqueue_workflow("fuzz-t<n>", fuzz_workflow)` under `SetWorkflowID("t<n>")` in a
  fresh application process (a fork, enqueued when it was made, is run by launching one);
- resume(v): `DBOS.send("t<n>", v, topic="s<stage>")` from a fresh application process, whose
  launch recovers the parked workflow (variant `send`), or `DBOSClient.send(...)` before the
  process launches (variant `client-send`); the stage is the interrupt the thread's head waits at
  (or will wait at next; the last one when complete): DBOS decides what a send to it does;
- recover: `DBOS.launch()` in a fresh application process, which recovers the PENDING workflow
  (variant `launch`), or `DBOSClient.resume_workflow("t<n>", queue_name=...)` then a launch
  (variant `resume-workflow`);
- fork: `DBOSClient.fork_workflow("t<n>", start_step, queue_name=...)` under `SetWorkflowID`;
  a replay fork at an interrupt the parent consumed starts after its `recv` (the recorded value
  is copied), an edit fork starts at the `recv` and gets its new value with
  `DBOSClient.send(fork, v, topic=...)`;
- update: not expressible (see `unsupported`).

Crash points are real SIGKILLs of the application process: before or after a stage's node code
(inside the step), or right after the step call returned in the workflow body (DBOS records a
step's output before the call returns: the after-commit point). Effects are keyed by
`DBOS.workflow_id` and `DBOS.step_id`, the identity DBOS documents for a step ("a unique
identifier of the current step within the workflow"), which a recovered execution of the same
step has again. DBOS's docs make the workflow id the idempotency key ("You can set an
idempotency key for a workflow to guarantee it executes only once", python/tutorials/
idempotency-tutorial) and give each step within it its id (`DBOS.step_id`, reference/contexts):
the pair is the documented identity of one step's execution.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import signal
import sqlite3
import time
from pathlib import Path

from pymc_resume.bridge.adapter import (
    CLIENT,
    FRAMEWORK,
    OK,
    REFUSED,
    Observation,
    Outcome,
    ThreadView,
    Variant,
)
from pymc_resume.bridge.kit import ChildProcessAdapter, Refusal
from pymc_resume.bridge.kit.child_process_adapter import RECOVERY
from pymc_resume.bridge.kit.postgres import (
    connect,
    drop_schema,
    postgres_url,
    schema_of,
    sqlalchemy_url,
    sweep_schemas,
)
from pymc_resume.bridge.kit.preload import preloading
from pymc_resume.bridge.kit.process import die_with_parent
from pymc_resume.model.state import INITIAL, Checkpoint

try:
    import dbos
    from dbos import DBOS, DBOSClient, SetWorkflowID
except ImportError as error:  # the registry reports it in one line, with the extra to install
    raise ImportError(f"dbos is not installed ({error}); pip install 'pymc-resume[dbos]'") from None

APP = "pymc-fuzz"  # the DBOS application's name (its config and its clients')
WORKFLOW = "fuzz-workflow"
STAGE_STEP = "fuzz-stage"
RECV = "DBOS.recv"
STORES = ("sqlite", "postgres")
SCHEMA_TAG = "dbos"  # a PostgreSQL example's schema: `kit.postgres.schema_of(workdir, SCHEMA_TAG)`
# A human may take long: a recv waits a day (DBOS records the deadline, so a recovered wait
# keeps it). No run here waits that long.
RECV_TIMEOUT = 24 * 3600.0
# Latency knobs, not semantics: how often an application process polls SQLite for a delivered
# message and its queue for work (DBOS's defaults, 1 s each, would make every operation a
# second slower), and how often the application process reads the store to see it settle.
LISTENER_POLLING = 0.02
QUEUE_POLLING = 0.02
SETTLE_POLLING = 0.02
SETTLE_TIMEOUT = 120.0
# How long one of k concurrent deliveries waits after its launch before it takes the workflow
# to be another process's (its own recovery on launch runs in a background thread).
ELSEWHERE_GRACE = 0.3
COMPLETE, FAILED_STATUSES = "SUCCESS", ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")

UPDATE_UNSUPPORTED = (
    "DBOS has no client call that writes a workflow's state: a workflow's state is its recorded "
    "step outputs, written only by its own execution (events, streams and attributes are "
    "published beside it, never read back as its state)"
)

# How a process is killed (the operation table's crash row); every other call is a variant below.
FRAMEWORK_CALLS = {
    "crash": "SIGKILL of the application process running the workflow (around a step's node code, "
    "or right after the step call returned: its output is recorded)",
}

# Every documented call for each operation (a verdict holds only if it holds under all).
DOCS = "https://docs.dbos.dev/python"
RECOVERY_DOCS = "https://docs.dbos.dev/production/workflow-recovery (Recovery On A Single Server)"
SEND_DOCS = f"{DOCS}/tutorials/workflow-communication#send"
CLIENT_SEND_DOCS = f"{DOCS}/reference/client#send"
VARIANTS = (
    Variant(
        "start",
        "enqueue",
        "DBOS.enqueue_workflow(queue, fuzz_workflow) under SetWorkflowID(id)",
        f"{DOCS}/tutorials/queue-tutorial; {DOCS}/reference/contexts#setworkflowid",
    ),
    Variant(
        "resume",
        "send",
        "DBOS.send(id, v, topic) in an application process whose DBOS.launch() recovers the workflow",
        f"{SEND_DOCS}; {RECOVERY_DOCS}",
    ),
    Variant("resume", "client-send", "DBOSClient.send(id, v, topic), then DBOS.launch()", CLIENT_SEND_DOCS),
    Variant("resume-together", "send", "k processes, each DBOS.launch(); DBOS.send(id, v, topic)", SEND_DOCS),
    Variant(
        "resume-together",
        "client-send",
        "k processes, each DBOSClient.send(id, v, topic); DBOS.launch()",
        CLIENT_SEND_DOCS,
    ),
    Variant("recover", "launch", "DBOS.launch() (recovers the executor's PENDING workflows)", RECOVERY_DOCS),
    Variant(
        "recover",
        "resume-workflow",
        "DBOSClient.resume_workflow(id, queue_name=queue), then DBOS.launch()",
        f"{DOCS}/reference/client#resume_workflow; {DOCS}/reference/contexts#resume_workflow",
    ),
    Variant(
        "fork",
        "fork-workflow",
        "DBOSClient.fork_workflow(id, start_step, queue_name=queue) under SetWorkflowID(new id); "
        "an edit: then DBOSClient.send(new id, v, topic)",
        f"{DOCS}/tutorials/workflow-management#forking-workflows; {DOCS}/reference/client#fork_workflow",
    ),
)


class DBOSRefusal(Exception):
    """An error DBOS raised to its client in the application process (its type and message)."""


def _dbos_version() -> str:
    from importlib.metadata import version

    return version("dbos")


class DBOSAdapter(ChildProcessAdapter):
    name = "dbos"
    # Imported once in the host template (none starts a thread at import; DBOS's threads start
    # when a client process launches it).
    preload = preloading("dbos", "psycopg", "sqlalchemy")
    framework = "DBOS"
    # Recorded inputs: the recorded recv outputs, and delivered messages not yet consumed (the
    # claim); late inputs: messages delivered to an interrupt that already consumed one. Leases:
    # the workflow's status with what its records show outstanding (see `_run_state`).
    capabilities = frozenset({"recorded-inputs", "late-inputs", "leases", "executions"})
    refusals = (DBOSRefusal,)
    unsupported = {"update": UPDATE_UNSUPPORTED}
    variants = VARIANTS
    framework_calls = FRAMEWORK_CALLS  # the operation table's crash row
    effect_key = {
        "key": "f'{DBOS.workflow_id}:{DBOS.step_id}' in the step",
        "why": "DBOS documents DBOS.step_id as the unique identifier of the current step within its "
        "workflow: a recovered execution of a step that was not recorded runs with the same "
        "workflow id and step id; a fork is a new workflow id",
    }

    def __init__(self, store: str = "sqlite", idempotency_key: bool = False) -> None:
        super().__init__()
        if store not in STORES:
            raise ValueError(f"store must be one of {', '.join(STORES)}, not {store!r}")
        self.store = store
        # A send keyed per interrupt (`idempotency_key=f"{id}/s{stage}"`): DBOS records the
        # first delivery to an interrupt and ignores every later one (a configuration of ours).
        self.idempotency_key = bool(idempotency_key)
        self.version = f"dbos {_dbos_version()}"

    def options(self) -> dict:
        return {"store": self.store, "idempotency_key": self.idempotency_key}

    # -- the example's system database ---------------------------------------------------------

    def open(self, setup) -> None:
        super().open(setup)
        self.threads[0].update(workflow_id="t0")
        if self.store == "sqlite":
            self.url, self.schema = f"sqlite:///{setup.workdir / 'dbos.sqlite'}", None
        else:
            self.url = sqlalchemy_url(postgres_url())
            self.schema = schema_of(setup.workdir, SCHEMA_TAG)
            sweep_schemas(self.url, setup.workdir.parent)  # a killed bridge's examples closed nothing
        # The system database and the root thread's queue, before any operation: what `dbos
        # migrate` and a client's `register_queue` do (an application process then finds its
        # queue when it launches, instead of a second later). On PostgreSQL the migrations'
        # own session commits without waiting for the disk (an empty schema needs no crash
        # safety, and its 76 synchronous commits took 2.4 s an example); DBOS's sessions keep
        # the server's default.
        migrations = self.url if self.schema is None else self.url + "?options=-c%20synchronous_commit%3Doff"
        DBOS.migrate(migrations, schema=self.schema or "dbos")
        self._register_queue(0)

    def close(self) -> None:
        if self.store == "postgres" and self.setup is not None:
            drop_schema(self.url, self.schema)
        super().close()

    def _config(self) -> dict:
        config = {
            "name": APP,
            "system_database_url": self.url,
            "notification_listener_polling_interval_sec": LISTENER_POLLING,
            "log_level": "ERROR",
        }
        if self.schema is not None:
            config["dbos_system_schema"] = self.schema
        return config

    def _client(self) -> DBOSClient:
        kwargs = {"dbos_system_schema": self.schema} if self.schema is not None else {}
        return DBOSClient(system_database_url=self.url, application_name=APP, **kwargs)

    def _register_queue(self, thread: int) -> None:
        client = self._client()
        try:
            client.register_queue(self._queue(thread), polling_interval_sec=QUEUE_POLLING)
        finally:
            client.destroy()

    def _queue(self, thread: int) -> str:
        return f"fuzz-t{thread}"

    def _id(self, thread: int) -> str:
        return self.threads[thread]["workflow_id"]

    # -- the application process -------------------------------------------------------------

    def _application(self, thread: int, before_launch, after_launch) -> str:
        """Run one client operation in a DBOS application process of its own, forked from this
        child, and end it (SIGKILL) once the store shows the workflow settled: complete, or
        waiting for input. A crash point kills the application process; this child then dies by
        SIGKILL too, so the kit sees the operation's process killed."""
        read, write = os.pipe()
        child = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            die_with_parent(child)
            try:
                message = {"value": self._serve(thread, before_launch, after_launch)}
            except DBOSRefusal as refusal:
                message = {"refused": str(refusal)}
            except BaseException as error:  # reported to the child, which raises it
                message = {"error": f"{type(error).__name__}: {error}"}
            os.write(write, (json.dumps(message) + "\n").encode())
            os.kill(os.getpid(), signal.SIGKILL)  # a DBOS server ends so: its parked work stays PENDING
        os.close(write)
        data = b""
        while chunk := os.read(read, 65536):
            data += chunk
        os.close(read)
        os.waitpid(pid, 0)
        if not data.strip():  # killed at a crash point: the operation's process is killed
            os.kill(os.getpid(), signal.SIGKILL)
        message = json.loads(data)
        if "refused" in message:
            raise DBOSRefusal(message["refused"])
        if "error" in message:
            raise RuntimeError(f"the DBOS application process raised {message['error']}")
        return message["value"]

    def _serve(self, thread: int, before_launch, after_launch) -> str:
        """In the application process: what the operation does before launch, DBOS's launch
        (recovery of the executor's PENDING workflows), what it does after, then wait until the
        workflow settles."""
        self._register()
        _as_refusal(before_launch)
        DBOS(config=self._config())
        DBOS.listen_queues([self._queue(thread)])
        DBOS.launch()
        _as_refusal(after_launch)
        return self._settle(thread)

    def _settle(self, thread: int) -> str:
        """Wait until the store shows the workflow settled. One of k deliveries at once whose
        process runs no execution of the workflow while another process owns it (DBOS's queue
        hands a workflow to one process at a time) passes its race window then, so that it
        does not hold the owner at an after-execute barrier it will never reach itself."""
        launched = time.monotonic()
        deadline = launched + SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            record = self._read(self._id(thread))
            if record is not None:
                settled = self._settled(record)
                if settled is not None:
                    return settled
                owned = record["status"] == "PENDING" and record["owner"] is not None
                window = self.control.window if self.control is not None else None
                if window and owned and not self.running and time.monotonic() - launched > ELSEWHERE_GRACE:
                    self.control.at(window, -1)  # once: a no-op after this process waited there
            time.sleep(SETTLE_POLLING)
        raise TimeoutError(f"the workflow of t{thread} did not settle within {SETTLE_TIMEOUT}s")

    def _settled(self, record: dict) -> str | None:
        """'completed' or 'parked at stage s' once the store shows nothing left to run without
        new input; None while the workflow has work outstanding."""
        if record["status"] == COMPLETE:
            return "completed"
        if record["status"] in FAILED_STATUSES:
            return f"ended {record['status']}"
        position = self._position(record)
        if position < self.workflow.end and self.workflow.consumes[position]:
            if position not in record["consumed"] and not record["pending"].get(position):
                return f"parked at stage {position}"
        return None

    def _register(self) -> None:
        """Register the workflow and its step with DBOS (in the application process, before
        `DBOS(config=...)`): one workflow for every thread, so every process has the same
        application version and can recover any of them."""
        adapter, workflow = self, self.workflow
        self.running = 0
        self.continuing: set[int] = set()  # consuming stages whose recv an earlier process recorded

        @DBOS.step(name=STAGE_STEP)
        def fuzz_stage(stage: int, state: list, value):
            key = f"{DBOS.workflow_id}:{DBOS.step_id}"
            if stage not in adapter.continuing:
                return {"stage": stage, "state": list(adapter.execute(stage, tuple(state), value, key))}
            # The value was consumed by an earlier process (its recv is recorded): whatever this
            # operation is, this execution continues that consumption, as a recovery does.
            role, adapter.control.role = adapter.control.role, RECOVERY
            try:
                return {"stage": stage, "state": list(adapter.execute(stage, tuple(state), value, key))}
            finally:
                adapter.control.role = role

        @DBOS.workflow(name=WORKFLOW)
        def fuzz_workflow():
            adapter.running += 1  # an execution of a workflow in this process (not its outcome)
            try:
                state = list(workflow.initial_state())
                for stage in range(len(workflow.stages)):
                    value = None
                    if workflow.consumes[stage]:
                        record = adapter._read(DBOS.workflow_id)
                        if record is not None and stage in record["consumed"]:
                            adapter.continuing.add(stage)
                        value = DBOS.recv(_topic(stage), timeout_seconds=RECV_TIMEOUT)
                    state = fuzz_stage(stage, state, value)["state"]
                    adapter.committed(stage)  # the step call returned: its output is recorded
                return state
            finally:
                adapter.running -= 1

        self.fuzz_workflow = fuzz_workflow

    # -- the client hooks, in the child process --------------------------------------------

    def client_start(self, thread: int) -> str:
        if self._read(self._id(thread)) is not None:  # a fork, enqueued when it was made
            return self._application(thread, None, None)

        def enqueue():
            with SetWorkflowID(self._id(thread)):
                DBOS.enqueue_workflow(self._queue(thread), self.fuzz_workflow)

        return self._application(thread, None, enqueue)

    def client_resume(self, thread: int, value: int, variant: str = "send") -> str:
        record = self._read(self._id(thread))
        if record is None:
            raise Refusal("the thread has no workflow to send to (not started)")
        topic = _topic(self._answering(record))
        options = {"idempotency_key": f"{self._id(thread)}/{topic}"} if self.idempotency_key else {}

        def send():
            self.loaded()
            DBOS.send(self._id(thread), value, topic, **options)

        def client_send():
            self.loaded()
            client = self._client()
            try:
                client.send(self._id(thread), value, topic, **options)
            finally:
                client.destroy()

        if variant == "client-send":
            return self._application(thread, client_send, None)
        return self._application(thread, None, send)

    def client_recover(self, thread: int, variant: str = "launch") -> str:
        if self._read(self._id(thread)) is None:
            return self.client_start(thread)
        if variant == "resume-workflow":

            def resume_workflow():
                client = self._client()
                try:
                    client.resume_workflow(self._id(thread), queue_name=self._queue(thread))
                finally:
                    client.destroy()

            return self._application(thread, resume_workflow, None)
        return self._application(thread, None, None)

    def _answering(self, record: dict) -> int:
        """The interrupt a delivery answers: the one the head waits at or will wait at next,
        or, when none is left, the last one (DBOS decides what a late send does)."""
        consuming = self.workflow.consuming
        position = self._position(record)
        later = [s for s in consuming if s >= position]
        if later:
            return later[0]
        if not consuming:
            raise Refusal("the workflow has no interrupt to send to")
        return consuming[-1]

    # -- fork and update, in the adapter's process -----------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        record = self._read(self._id(thread))
        if record is None:
            return Outcome(REFUSED, "the thread has no workflow to fork (not started)", by=CLIENT)
        chain = self._chain(record)
        if not 0 <= checkpoint < len(chain):
            return Outcome(REFUSED, f"no checkpoint {checkpoint} to fork from", by=CLIENT)
        position = chain[checkpoint].pc
        consuming = position < self.workflow.end and self.workflow.consumes[position]
        start_step = self._start_step(record, position, replay=intent == "replay" or not consuming)
        new = self.add_thread(workflow_id=f"t{len(self.threads)}")
        client = self._client()
        try:
            client.register_queue(self._queue(new), polling_interval_sec=QUEUE_POLLING)
            with SetWorkflowID(self._id(new)):
                client.fork_workflow(self._id(thread), start_step, queue_name=self._queue(new))
            if intent == "edit" and consuming:
                client.send(self._id(new), value, _topic(position))
        except dbos.error.DBOSException as error:
            self.threads.pop()
            return Outcome(REFUSED, f"{type(error).__name__}: {error}", by=FRAMEWORK)
        finally:
            client.destroy()
        return Outcome(OK, f"forked as {self._id(new)} from step {start_step}", thread=new)

    def _start_step(self, record: dict, position: int, replay: bool) -> int:
        """The DBOS step a fork at the model's position `position` starts from: the first DBOS
        operation of that stage (its recv for an interrupt), or, for a replay at an interrupt
        whose recv is recorded, the step after it (the recorded value is copied)."""
        ops = record["ops"]
        before = [fid for fid, name, output in ops if name == STAGE_STEP and output["stage"] < position]
        first = (max(before) + 1) if before else 1
        if position >= self.workflow.end:
            return max((fid for fid, _, _ in ops), default=0) + 1
        if replay and self.workflow.consumes[position] and position in record["consumed"]:
            return record["consumed_at"][position] + 2  # after the recv and its durable timeout
        return first

    def update(self, thread: int, note: int) -> Outcome:
        """Not expressible (`unsupported`); refused in case a bridge still asks."""
        return Outcome(REFUSED, UPDATE_UNSUPPORTED)

    # -- reading the store (read-only) -------------------------------------------------------------

    def _read(self, workflow_id: str) -> dict | None:
        """One workflow's status, operations and messages, read-only; None when it has no row."""
        if self.store == "sqlite":
            rows = _read_sqlite(Path(self.url.removeprefix("sqlite:///")), workflow_id)
        else:
            rows = _read_postgres(self.url, self.schema, workflow_id)
        if rows is None:
            return None
        (status, owner), ops, messages = rows
        record = {"status": status, "owner": owner, "ops": [], "consumed": {}, "consumed_at": {}}
        record.update(pending={}, late=[])
        next_stage = 0
        for fid, name, output in ops:
            if name == STAGE_STEP:
                value = _decode(output)
                record["ops"].append((fid, name, value))
                next_stage = value["stage"] + 1
            elif name == RECV:
                stage = next(s for s in self.workflow.consuming if s >= next_stage)
                record["consumed"][stage] = _decode(output)
                record["consumed_at"][stage] = fid
                record["ops"].append((fid, name, None))
            else:
                record["ops"].append((fid, name, None))
        for topic, message, consumed in messages:
            stage = _stage_of(topic)
            if consumed or stage is None:
                continue
            value = _decode(message)
            if stage in record["consumed"] or stage in record["pending"]:
                record["late"].append((stage, value))
            else:
                record["pending"][stage] = value
        return record

    def _position(self, record: dict) -> int:
        stages = [value["stage"] for _, name, value in record["ops"] if name == STAGE_STEP]
        return max(stages) + 1 if stages else 0

    def _chain(self, record: dict) -> list[Checkpoint]:
        chain = [Checkpoint(0, self.workflow.initial_state(), INITIAL)]
        for _, name, value in record["ops"]:
            if name == STAGE_STEP:
                chain.append(Checkpoint(value["stage"] + 1, tuple(value["state"]), value["stage"]))
        return chain

    def _run_state(self, thread: int, record: dict | None) -> str:
        """`new` before the bridge ran the thread; `free` when complete or waiting for input
        with nothing delivered; `dead` when the workflow has work outstanding (a stage started
        and not recorded, or a delivered message not yet consumed): what DBOS's recovery on the
        next launch takes over, since no live process holds a workflow between operations."""
        memory = self.threads[thread]["run"]
        if record is None or memory == "new":
            return "new"
        if record["status"] in FAILED_STATUSES:
            return "failed"
        return "free" if self._settled(record) is not None else "dead"

    def observe(self) -> Observation:
        views = []
        for t in range(len(self.threads)):
            record = self._read(self._id(t))
            if record is None:
                chain, inputs, late = [Checkpoint(0, self.workflow.initial_state(), INITIAL)], {}, ()
            else:
                chain = self._chain(record)
                inputs = {**record["pending"], **record["consumed"]}
                late = tuple(record["late"])
            views.append(ThreadView(tuple(chain), self._run_state(t, record), inputs, late))
        return Observation(tuple(views))


def _as_refusal(call) -> None:
    """Run a client call; an error DBOS raises to its client is a refusal."""
    if call is None:
        return
    try:
        call()
    except dbos.error.DBOSException as error:
        raise DBOSRefusal(f"{type(error).__name__}: {error}") from None


def _topic(stage: int) -> str:
    return f"s{stage}"


def _stage_of(topic: str) -> int | None:
    return int(topic[1:]) if re.fullmatch(r"s\d+", topic or "") else None


def _decode(text: str | None):
    """A value DBOS serialized (its default serializer: base64 of a pickle)."""
    if text is None:
        return None
    return pickle.loads(base64.b64decode(text))


MESSAGES_ORDER = "ORDER BY created_at_epoch_ms, message_uuid"
# A workflow's status, operations and messages are read in one read transaction (one snapshot
# of the store). DBOS's recv consumes its message and records its output in one transaction
# (`recv_consume`), but statements each in a snapshot of its own can straddle that commit: the
# operations read before it (no recv recorded), the messages after (the message consumed), a
# record whose value is neither pending nor consumed, which `_settled` took for a workflow
# parked at that recv, and the application process was killed before the stage ran (a started
# edit fork seen at pc 2, under load).


def _read_sqlite(path: Path, workflow_id: str):
    if not path.exists():
        return None
    # Read only, on a connection that may write: the first connection after the processes that
    # wrote the file were killed recovers its hot rollback journal, which a `mode=ro` one cannot.
    connection = sqlite3.connect(path, timeout=30)
    try:
        connection.execute("BEGIN")  # one snapshot: its shared lock is held until the close
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "workflow_status" not in tables:
            return None
        status = connection.execute(
            "SELECT status, owner_xid FROM workflow_status WHERE workflow_uuid = ?", (workflow_id,)
        ).fetchone()
        if status is None:
            return None
        ops = connection.execute(
            "SELECT function_id, function_name, output FROM operation_outputs "
            "WHERE workflow_uuid = ? ORDER BY function_id",
            (workflow_id,),
        ).fetchall()
        messages = connection.execute(
            f"SELECT topic, message, consumed FROM notifications WHERE destination_uuid = ? {MESSAGES_ORDER}",
            (workflow_id,),
        ).fetchall()
    finally:
        connection.close()
    return status, ops, messages


def _read_postgres(url: str, schema: str, workflow_id: str):
    import psycopg

    with connect(url) as connection:
        connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # one snapshot
        connection.read_only = True
        with connection.transaction():
            found = connection.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                (schema, "workflow_status"),
            ).fetchone()
            if found is None:
                return None
            status = connection.execute(
                f'SELECT status, owner_xid FROM "{schema}".workflow_status WHERE workflow_uuid = %s',
                (workflow_id,),
            ).fetchone()
            if status is None:
                return None
            ops = connection.execute(
                f'SELECT function_id, function_name, output FROM "{schema}".operation_outputs '
                "WHERE workflow_uuid = %s ORDER BY function_id",
                (workflow_id,),
            ).fetchall()
            messages = connection.execute(
                f'SELECT topic, message, consumed FROM "{schema}".notifications WHERE destination_uuid = %s '
                + MESSAGES_ORDER,
                (workflow_id,),
            ).fetchall()
    return status, ops, messages
