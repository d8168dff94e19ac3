"""The bridge adapter for Restate (`restate`, restate-sdk): a Restate Workflow whose `run`
handler journals each stage as a `ctx.run_typed` step, served by the Python SDK's endpoint in a
real service process, on a real restate-server (`restate_server.py`: started per example on
loopback ports, its data directory in the example's workdir, stopped when the example ends),
registered through the admin API and invoked through the ingress.

Restate's model, in its docs' words: "Restate uses an execution log to replay operations after
failures and suspensions" and, for `ctx.run`, "have Restate store its result in the execution
log ... Restate replays the result instead of re-executing the block on retries"
(docs.restate.dev/develop/python/durable-steps). Human input is an awakeable: "Awakeables pause
an invocation while waiting for another process to complete a task ... resolve it via the HTTP
API: `POST /restate/awakeables/<id>/resolve`" (docs.restate.dev/develop/python/external-events).

The fuzzing workflow is the Restate Workflow `PymcFuzz`, one workflow key per bridge thread
(`t0`, ...). Its `run` handler walks the model's stages in order: stage `s` is
`ctx.run_typed("s<s>", ...)`, whose journaled result (`{"stage": s, "state": [...]}`) is the
model's state after the stage; a consuming stage first creates an awakeable
(`ctx.awakeable(type_hint=int)`), publishes its id in the workflow's state (`ctx.set("a<s>",
id)`) and awaits it. A client reads the id from the workflow's state through the admin API's
SQL introspection (the `state` table): the docs hand the id to "another process" that resolves
it, by any means.

How the contract's operations map (docs/restate.md says more):

- start: `POST /PymcFuzz/t<n>/run/send` through the ingress (Restate's documented way to submit
  a workflow: the workflow key is its id, run once), with a service process serving the
  endpoint until the invocation settles;
- resume(v): the id of the interrupt the head waits at (or the last one when none is left),
  read from the workflow's state (`SELECT value_utf8 FROM state ...` on the admin API), then
  `POST /restate/awakeables/<id>/resolve` with v through the ingress; a service process serves
  the invocation the server then runs;
- recover: a fresh service process at the registered deployment's address: the server retries
  the invocation against it and the SDK replays the journal (variant `retry`), or the same and
  the admin API's `PATCH /invocations/<id>/resume`, which retries a backing-off invocation now
  (variant `resume-invocation`);
- fork: Restate's restart-as-new, "Creates a new invocation from a completed invocation,
  optionally copying partial progress from the original invocation's journal ... Use the `from`
  parameter to specify how much of the original journal to preserve"
  (docs.restate.dev/admin-api/invocation/restart-invocation-as-new). restate-server 1.7.12
  refuses it for a workflow (422, see `unsupported`), so in the Workflow configurations fork is
  not expressible. The `object` configuration serves the same stages from a Virtual Object's
  shared `run` handler (`PymcFuzzObject/t<n>/run`), on which the server performs it: `PATCH
  /invocations/<id>/restart-as-new?from=<journal index>` keeping the journal through the fork
  point (a replay: before the stage's `s<s>` run; an edit: before its `a<s>` run, whose new
  awakeable the fork then resolves with the new value); the new invocation is a new bridge
  thread, remembered by its invocation id. A shared handler writes no state: it publishes each
  awakeable's id as the result of a `ctx.run` named `a<s>`, read from the journal;
- update: not expressible (see `unsupported`).

Crash points are real SIGKILLs of the service process: before or after a stage's node code
(inside the `ctx.run` action) and right after `await ctx.run_typed(...)` returned in the
handler (the run's result is in the journal then: the SDK completes the run only with the
server's acknowledgement). The effect key is `str(ctx.uuid())`, drawn in the handler right
before the stage's run: Restate documents it "to generate stable UUIDs for things like
idempotency keys ... seeded by the invocation ID — so they return the same result on retries".

The deployment is registered over HTTP/1.1 (`"use_http_11": true`, a documented registration
option), so the SDK serves it request-response: a handler that waits on an awakeable suspends
at once (Restate's own behaviour on such deployments), and a service process can end between
operations without failing an attempt. Between operations no service process runs: a parked
thread is a suspended invocation, a crashed one is an invocation the server is retrying.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import socket
import time
from pathlib import Path

import httpx

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
from pymc_resume.bridge.adapters.restate_server import RestateServer
from pymc_resume.bridge.kit import ChildProcessAdapter, Refusal
from pymc_resume.bridge.kit.child_process_adapter import RECOVERY
from pymc_resume.bridge.kit.process import die_with_parent
from pymc_resume.model.state import INITIAL, Checkpoint

try:
    import restate
except ImportError as error:  # the registry reports it in one line, with the extra to install
    raise ImportError(f"restate-sdk is not installed ({error}); pip install 'pymc-resume[restate]'") from None

SERVICE = "PymcFuzz"
OBJECT = "PymcFuzzObject"  # the `object` configuration's Virtual Object
HANDLERS = ("workflow", "object")
SETTLE_TIMEOUT = 120.0
SETTLE_POLLING = 0.02
CRASHES = ("service", "server")
ACCEPT_GRACE = 1.0  # how long a delivered value may take to show in the journal
HTTP_TIMEOUT = 30.0
# The invocation statuses of sys_invocation (docs.restate.dev/references/sql-introspection).
COMPLETED, SUSPENDED = "completed", "suspended"

UNSUPPORTED = {
    "update": "Restate has no client call that writes an invocation's journal: a workflow's "
    "progress is its journal of step results, written only by its own execution (the admin API's "
    "state calls write a workflow's key-value state, which the handler does not read back as its "
    "progress)",
    "fork": "Restate's one documented call that starts an invocation from another's journal, "
    "the admin API's PATCH /invocations/<id>/restart-as-new?from=<index>, refuses a workflow: "
    "restate-server 1.7.12 answers 422 'Restarting workflows is not supported' (checked against "
    "this adapter's completed run invocation)",
}

DOCS = "https://docs.restate.dev"
INVOKE_DOCS = f"{DOCS}/invoke/http (workflows: POST /<Workflow>/<key>/run/send)"
AWAKEABLE_DOCS = f"{DOCS}/develop/python/external-events (awakeables; HTTP resolve)"
RECOVERY_DOCS = f"{DOCS}/develop/python/durable-steps; {DOCS}/guides/error-handling (retries)"
RESUME_DOCS = f"{DOCS}/admin-api/invocation/resume-invocation"
RESTART_DOCS = f"{DOCS}/admin-api/invocation/restart-invocation-as-new"
FORK_VARIANT = Variant(
    "fork",
    "restart-as-new",
    "PATCH /invocations/<id>/restart-as-new?from=<journal index> (admin API); an edit fork then "
    "POST /restate/awakeables/<new id>/resolve",
    RESTART_DOCS,
)
VARIANTS = (
    Variant("start", "run-send", "POST /PymcFuzz/<key>/run/send (ingress)", INVOKE_DOCS),
    Variant(
        "resume",
        "resolve-awakeable",
        "the id from the workflow's state (admin SQL), then POST /restate/awakeables/<id>/resolve",
        AWAKEABLE_DOCS,
    ),
    Variant(
        "resume-together",
        "resolve-awakeable",
        "k clients, each POST /restate/awakeables/<id>/resolve",
        AWAKEABLE_DOCS,
    ),
    Variant(
        "recover", "retry", "a service process at the deployment's address: the server retries", RECOVERY_DOCS
    ),
    Variant(
        "recover",
        "resume-invocation",
        "a service process, then PATCH /invocations/<id>/resume (admin API)",
        RESUME_DOCS,
    ),
)
# The `object` configuration: the same calls on the Virtual Object, the awakeable's id read from
# the journal (its `a<s>` run's result), and restart-as-new for fork.
OBJECT_VARIANTS = (
    Variant("start", "run-send", "POST /PymcFuzzObject/<key>/run/send (ingress)", f"{DOCS}/invoke/http"),
    Variant(
        "resume",
        "resolve-awakeable",
        "the id from the journal's a<s> run (admin SQL), then POST /restate/awakeables/<id>/resolve",
        AWAKEABLE_DOCS,
    ),
    *VARIANTS[2:],
    FORK_VARIANT,
)
FRAMEWORK_CALLS = {
    "crash": "SIGKILL of the service process serving the handler (around a stage's ctx.run action, "
    "or right after `await ctx.run_typed` returned: its result is journaled)",
}


class RestateRefusal(Exception):
    """An error Restate's ingress or admin API answered a client call with (status and body)."""


class NotThisOperation(Exception):
    """An attempt of an invocation the service process does not serve (see `_admit`): Restate
    retries it later."""


def _quiet_admissions(record: logging.LogRecord) -> bool:
    """A logging filter for the SDK's `restate.server` logger: drop the traceback it logs for
    each attempt `_admit` failed (expected, one per attempt), keep every other."""
    return not (record.exc_info and isinstance(record.exc_info[1], NotThisOperation))


def _sdk_version() -> str:
    from importlib.metadata import version

    return version("restate-sdk")


class RestateAdapter(ChildProcessAdapter):
    name = "restate"
    framework = "Restate"
    # Recorded inputs: the awakeables' completions in the journal (a completion not yet consumed
    # by a step is the claim); late inputs: a completion journaled again for a completed one. No
    # leases: Restate shows no holder between operations; a thread with work outstanding (an
    # invocation not suspended at an open awakeable) is `dead`.
    capabilities = frozenset({"recorded-inputs", "late-inputs", "stuck-runs", "executions"})
    refusals = (RestateRefusal,)
    unsupported = UNSUPPORTED
    variants = VARIANTS
    framework_calls = FRAMEWORK_CALLS
    effect_key = {
        "key": "str(ctx.uuid()) drawn in the handler right before the stage's ctx.run",
        "why": "Restate documents ctx.uuid() as a stable UUID 'for things like idempotency keys', "
        "seeded by the invocation id, the same on retries and replays",
    }

    def __init__(self, crash: str = "service", handler: str = "workflow") -> None:
        super().__init__()
        if crash not in CRASHES:
            raise ValueError(f"crash must be one of {', '.join(CRASHES)}, not {crash!r}")
        if handler not in HANDLERS:
            raise ValueError(f"handler must be one of {', '.join(HANDLERS)}, not {handler!r}")
        # What serves the fuzzing workflow: the Workflow's `run` handler, or a Virtual Object's
        # shared `run` handler, one object key per started thread, on which restart-as-new (the
        # fork) is allowed.
        self.handler = handler
        if handler == "object":
            self.unsupported = {"update": UNSUPPORTED["update"]}
            self.variants = OBJECT_VARIANTS
        self.serving: str | None = None  # in a service process: the invocation it runs node code for
        # What a crash point kills: the service process serving the handler, or that and then
        # the restate-server itself (restarted on the same data directory before the next call).
        self.crash = crash
        if crash == "server":  # the operation table's crash row says what this configuration kills
            self.framework_calls = {"crash": FRAMEWORK_CALLS["crash"] + ", then of the restate-server"}
        self.version = f"restate-sdk {_sdk_version()}"
        self.server: RestateServer | None = None
        self.continuing: set[int] = set()  # consuming stages whose value an earlier operation delivered
        self.service: int | None = None  # the operation's service process, in its child process

    def options(self) -> dict:
        return {"crash": self.crash, **({"handler": self.handler} if self.handler != "workflow" else {})}

    # -- the example's server and deployment -----------------------------------------------

    def open(self, setup) -> None:
        super().open(setup)
        self.service_port = _service_port()
        self.server = RestateServer(Path(setup.workdir) / "restate-data")
        self.server.start()
        self._register()

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        super().close()

    def _server_up(self) -> None:
        """Restart the server on its data directory if a crash point killed it (the `server`
        configuration): what an operator's supervisor does; the next call then finds it up."""
        if self.crash == "server" and self.server is not None and not self.server.answers():
            self.server.stop()  # reap the killed process (its SIGKILL may still be on its way)
            self.server.start()

    def start(self, *args, **kwargs) -> Outcome:
        self._server_up()
        return super().start(*args, **kwargs)

    def resume(self, *args, **kwargs) -> Outcome:
        self._server_up()
        return super().resume(*args, **kwargs)

    def recover(self, *args, **kwargs) -> Outcome:
        self._server_up()
        return super().recover(*args, **kwargs)

    def resume_together(self, *args, **kwargs) -> list[Outcome]:
        self._server_up()
        return super().resume_together(*args, **kwargs)

    def _register(self) -> None:
        """Register the service process's endpoint with the admin API (`POST /deployments`),
        with a service process serving it while Restate discovers it."""
        listener = _listener(self.service_port)
        pid = self._serve(listener)
        try:
            with httpx.Client(timeout=HTTP_TIMEOUT) as client:
                body = {"uri": f"http://127.0.0.1:{self.service_port}", "use_http_11": True}
                answer = client.post(f"{self.server.admin_url}/deployments", json=body)
                if answer.status_code >= 300:
                    raise RuntimeError(
                        f"registering the deployment failed: {answer.status_code} {answer.text}"
                    )
        finally:
            _end(pid)

    # -- the service process -----------------------------------------------------------------

    def _app(self):
        """The SDK's ASGI endpoint serving the fuzzing workflow (built in the service process)."""
        if self.handler == "object":
            return restate.app([self._object()])
        adapter, workflow = self, self.workflow
        fuzz = restate.Workflow(SERVICE)

        @fuzz.main()
        async def run(ctx: restate.WorkflowContext) -> list:
            state = list(workflow.initial_state())
            for stage in range(len(workflow.stages)):
                value = None
                if workflow.consumes[stage]:
                    awakeable_id, answer = ctx.awakeable(type_hint=int)
                    ctx.set(f"a{stage}", awakeable_id)
                    value = await answer
                key = str(ctx.uuid())
                result = await ctx.run_typed(
                    f"s{stage}", adapter._step, stage=stage, state=state, value=value, key=key
                )
                adapter.committed(stage)  # the run's result is journaled
                state = result["state"]
            return state

        return restate.app([fuzz])

    def _object(self):
        """The `object` configuration's Virtual Object: the same stages in a shared `run`
        handler (no exclusive lock on the key, so a fork's invocation on its parent's key never
        waits for another). A shared handler cannot write state: it publishes each awakeable's
        id as the result of a `ctx.run` named `a<s>`, which a client reads from the journal."""
        adapter, workflow = self, self.workflow
        fuzz = restate.VirtualObject(OBJECT)
        logging.getLogger("restate.server").addFilter(_quiet_admissions)

        @fuzz.handler("run", kind="shared")
        async def run(ctx: restate.ObjectSharedContext) -> list:
            adapter._admit(ctx.request().id, ctx.key())
            state = list(workflow.initial_state())
            for stage in range(len(workflow.stages)):
                value = None
                if workflow.consumes[stage]:
                    awakeable_id, answer = ctx.awakeable(type_hint=int)
                    await ctx.run_typed(f"a{stage}", _publish, awakeable_id=awakeable_id, stage=stage)
                    value = await answer
                key = str(ctx.uuid())
                result = await ctx.run_typed(
                    f"s{stage}", adapter._step, stage=stage, state=state, value=value, key=key
                )
                if adapter.control is not None:  # an edit fork's replay in fork() runs no node code
                    adapter.committed(stage)
                state = result["state"]
            return state

        return fuzz

    def _admit(self, invocation_id: str, key: str) -> None:
        """Fail the attempt (Restate retries it later) of an invocation that is not the one
        this service process's operation is for: another thread's node code must not run under
        this operation (its sink records would name this thread)."""
        if self.serving is None or invocation_id == self.serving:
            return
        forks = {memory.get("invocation") for memory in self.threads}
        if self.serving.startswith("inv_") or key != self.serving or invocation_id in forks:
            raise NotThisOperation(f"invocation {invocation_id} is not this operation's ({self.serving})")

    def _serving_for(self, thread: int) -> str:
        """What `_admit` lets run in an operation on `thread`: a fork's invocation id, or a
        started thread's object key (its first invocation, the one no fork made)."""
        return self.threads[thread].get("invocation") or self._key(thread)

    def _step(self, stage: int, state: list, value: int | None, key: str) -> dict:
        """A stage's ctx.run action: the bridge's node code between the crash points. A value
        the journal held before this operation began was delivered by an earlier one: this
        execution continues that consumption, as a recovery does (Restate replays it)."""
        if stage not in self.continuing:
            return {"stage": stage, "state": list(self.execute(stage, tuple(state), value, key))}
        role, self.control.role = self.control.role, RECOVERY
        try:
            return {"stage": stage, "state": list(self.execute(stage, tuple(state), value, key))}
        finally:
            self.control.role = role

    def _serve(self, listener: socket.socket | None) -> int | None:
        """Fork a service process serving the SDK's endpoint on `listener` (None: another
        process of this operation serves it); its pid."""
        if listener is None:
            return None
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            die_with_parent(parent)
            if self.control is not None:  # the operation's process holds the race windows, not this one
                self.control.window = None
            try:
                _run_hypercorn(self._app(), listener)
            finally:
                os._exit(0)
        listener.close()
        return pid

    def _operation(self, thread: int, call, journaled=None) -> str:
        """One client operation with a service process of its own: serve, make `call` (a
        client call through the ingress or admin API), wait until the thread settles, end the
        service process. A crash point kills the service process; this process then dies by
        SIGKILL too, so the kit sees the operation's process killed."""
        before = self._read(thread)
        self.continuing = set(before["inputs"]) if before is not None else set()
        self.serving = self._serving_for(thread) if self.handler == "object" else None
        listener = _listener(self.service_port)
        if listener is None and (self.control is None or self.control.window is None):
            raise RuntimeError(f"the deployment's port {self.service_port} is taken")
        self.service = self._serve(listener)
        try:
            if call is not None:
                call()
            if journaled is not None:
                self._await_journal(thread, journaled)
            return self._settle(thread)
        finally:
            _end(self.service)

    def _await_journal(self, thread: int, journaled) -> None:
        """Wait until the journal shows what the call just delivered (`journaled(record)`):
        the ingress answers a resolve with 202 Accepted before the invocation's partition has
        journaled it, and the state read before then is the one the delivery changes. A resolve
        Restate drops (to a completed invocation) never shows: after `ACCEPT_GRACE` the state
        read is taken as it is."""
        deadline = time.monotonic() + ACCEPT_GRACE
        while time.monotonic() < deadline:
            record = self._read(thread)
            if record is not None and journaled(record):
                return
            time.sleep(SETTLE_POLLING)

    def _settle(self, thread: int) -> str:
        """Wait until the journal shows the thread settled. One of k deliveries at once that
        runs no service process of its own (another delivery's listens on the port) brings one
        up once that one has ended: its own resolve may reach the invocation after the other
        delivery saw it settled, and the server then runs it again to deliver the completion."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            if self.service is None:
                self.service = self._serve(_listener(self.service_port))
            elif os.waitpid(self.service, os.WNOHANG)[0] == self.service:
                self._crashed()
            record = self._read(thread)
            settled = self._settled(record)
            if settled is not None:
                return settled
            time.sleep(SETTLE_POLLING)
        raise TimeoutError(f"the invocation of t{thread} did not settle within {SETTLE_TIMEOUT}s")

    def _crashed(self) -> None:
        """The service process was killed at a crash point: in the `server` configuration kill
        the restate-server too, at once; then this operation's process dies by SIGKILL."""
        if self.crash == "server" and self.server is not None and self.server.process is not None:
            os.kill(self.server.process.pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    def _settled(self, record: dict | None) -> str | None:
        """'completed' or 'parked at stage s' once the server shows nothing left to run without
        new input; None while the invocation has work outstanding."""
        if record is None:
            return None
        if record["status"] == COMPLETED:
            return "completed" if record["failure"] is None else f"failed: {record['failure']}"
        position = len(record["chain"]) - 1
        waiting = position < self.workflow.end and self.workflow.consumes[position]
        if record["status"] == SUSPENDED and waiting and position not in record["inputs"]:
            return f"parked at stage {position}"
        return None

    # -- the client hooks, in the child process --------------------------------------------

    def client_start(self, thread: int) -> str:
        if self.threads[thread].get("invocation"):  # a fork: Restate runs it once served
            return self._operation(thread, None)
        service = OBJECT if self.handler == "object" else SERVICE

        def send() -> None:
            _post(f"{self.server.ingress_url}/{service}/{self._key(thread)}/run/send", None)

        return self._operation(thread, send)

    def client_resume(self, thread: int, value: int) -> str:
        record = self._read(thread)
        if record is None:
            raise Refusal("the thread has no invocation to resume (not started)")
        stage = self._answering(record)
        late = len(record["late"])

        def resolve() -> None:
            awakeable_id = self._published(thread, stage)
            if awakeable_id is None:
                raise Refusal(f"the workflow has published no awakeable for stage {stage} yet")
            self.loaded()
            _post(f"{self.server.ingress_url}/restate/awakeables/{awakeable_id}/resolve", value)
            self._control().at("after-execute", -1)  # the delivery's own window: its call returned

        def journaled(now: dict) -> bool:
            return stage in now["inputs"] and (stage not in record["inputs"] or len(now["late"]) > late)

        return self._operation(thread, resolve, journaled)

    def client_recover(self, thread: int, variant: str = "retry") -> str:
        record = self._read(thread)
        if record is None:
            return self.client_start(thread)
        if variant == "resume-invocation":

            def resume() -> None:
                _patch(f"{self.server.admin_url}/invocations/{record['id']}/resume")

            return self._operation(thread, resume)
        return self._operation(thread, None)

    def _published(self, thread: int, stage: int) -> str | None:
        """The awakeable id the workflow published for `stage` in its state (`ctx.set`), read
        through the admin API's SQL introspection (its `state` table): a client that needs no
        service process, so k deliveries at once never wait on one another's. In the `object`
        configuration: the result of the handler's `a<stage>` run in the thread's journal."""
        if self.handler == "object":
            record = self._read(thread)
            return None if record is None else record["published"].get(stage)
        rows = self._query(
            f"SELECT value_utf8 FROM state WHERE service_name = '{SERVICE}' "
            f"AND service_key = '{self._key(thread)}' AND key = 'a{stage}'"
        )
        return json.loads(rows[0]["value_utf8"]) if rows else None

    def _answering(self, record: dict) -> int:
        """The interrupt a delivery answers: the one the head waits at or will wait at next,
        or, when none is left, the last one (Restate decides what a late resolve does)."""
        consuming = self.workflow.consuming
        if not consuming:
            raise Refusal("the workflow has no interrupt to resolve")
        position = len(record["chain"]) - 1
        later = [s for s in consuming if s >= position]
        return later[0] if later else consuming[-1]

    def _key(self, thread: int) -> str:
        return f"t{thread}"

    # -- fork and update -------------------------------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        """Restart-as-new of the thread's invocation, keeping its journal through the fork
        point: a replay keeps every entry before the stage's `s<s>` run (a consumed awakeable's
        completion included), an edit every entry before the stage's `a<s>` run, and the new
        value then resolves the awakeable the new invocation creates. The new invocation is a
        new bridge thread; Restate runs its remaining stages once a service process serves it
        (the next operation on it). Workflows: not driven (`unsupported`)."""
        if self.handler != "object":
            return Outcome(REFUSED, UNSUPPORTED["fork"])
        self._server_up()
        record = self._read(thread)
        if record is None:
            return Outcome(REFUSED, "the thread has no invocation to fork (not started)", by=CLIENT)
        if not 0 <= checkpoint < len(record["chain"]):
            return Outcome(REFUSED, f"no checkpoint {checkpoint} to fork from", by=CLIENT)
        position = record["chain"][checkpoint].pc
        edit = intent == "edit" and position < self.workflow.end and self.workflow.consumes[position]
        last = self._kept(record, f"a{position}" if edit else f"s{position}")
        try:
            url = f"{self.server.admin_url}/invocations/{record['id']}/restart-as-new?from={last}"
            answer = _patch(url)
        except RestateRefusal as error:
            return Outcome(REFUSED, f"restart-as-new answered {error}", by=FRAMEWORK)
        invocation = answer["new_invocation_id"]
        new = self.add_thread(invocation=invocation)
        if edit:
            try:
                self._resolve_in_fork(new, position, value)
            except RestateRefusal as error:
                return Outcome(
                    OK, f"forked as t{new} ({invocation}); the resolve was refused: {error}", thread=new
                )
        return Outcome(OK, f"forked as t{new} ({invocation}), journal kept through entry {last}", thread=new)

    def _kept(self, record: dict, run_name: str) -> int:
        """The `from` index of a restart-as-new that keeps every journal entry before the run
        command `run_name` (restate-server 1.7.12 keeps entries 0..from, seen in its answers);
        at the end of the workflow, every entry before the handler's output."""
        commands = record["commands"]
        for index, _, name in commands:
            if name == run_name:
                return index - 1
        output = [index for index, kind, _ in commands if kind.endswith("Output")]
        return (output[0] if output else commands[-1][0] + 1) - 1

    def _resolve_in_fork(self, thread: int, stage: int, value: int | None) -> None:
        """An edit fork's new value: serve the new invocation until it publishes the awakeable
        of `stage` (replaying the kept prefix runs no node code), end the service process, then
        resolve the awakeable with `value`; the stage runs at the fork's next operation."""
        self.serving = self.threads[thread]["invocation"]
        pid = self._serve(_listener(self.service_port))
        try:
            with contextlib.suppress(RestateRefusal):  # retry it now, not at its backoff timer
                _patch(f"{self.server.admin_url}/invocations/{self.serving}/resume")
            deadline = time.monotonic() + SETTLE_TIMEOUT
            while time.monotonic() < deadline:
                record = self._read(thread)
                if record is not None and stage in record["published"] and record["status"] == SUSPENDED:
                    break
                time.sleep(SETTLE_POLLING)
            else:
                raise TimeoutError(
                    f"the fork t{thread} published no awakeable for stage {stage}: {self._read(thread)}"
                )
        finally:
            _end(pid)
            self.serving = None
        _post(f"{self.server.ingress_url}/restate/awakeables/{record['published'][stage]}/resolve", value)
        self._await_journal(thread, lambda now: stage in now["inputs"])

    def update(self, thread: int, note: int) -> Outcome:
        """Not expressible (`unsupported`); refused in case a bridge still asks."""
        return Outcome(REFUSED, UNSUPPORTED["update"])

    # -- reading the server's store (SQL introspection, read-only) ----------------------------

    def _read(self, thread: int) -> dict | None:
        """The thread's invocation: its id, status, failure, journaled stage results (the
        chain) and awakeable completions (the inputs); None before it was submitted."""
        rows = self._query(
            "SELECT id, status, last_failure, completion_failure FROM sys_invocation "
            f"WHERE {self._which(thread)}"
        )
        if not rows:
            return None
        invocation = rows[0]
        journal = self._query(
            "SELECT index, entry_type, name, entry_json FROM sys_journal "
            f"WHERE id = '{invocation['id']}' ORDER BY index"
        )
        chain, signals, published = self._journal(journal)
        inputs, late = self._inputs(signals)
        return {
            "published": published,
            "commands": [
                (r["index"], r["entry_type"], r["name"]) for r in journal if "Command" in r["entry_type"]
            ],
            "id": invocation["id"],
            "status": invocation["status"],
            "failure": invocation.get("completion_failure"),
            "last_failure": invocation.get("last_failure"),
            "chain": chain,
            "inputs": inputs,
            "late": late,
        }

    def _which(self, thread: int) -> str:
        """The SQL condition selecting the thread's invocation: a fork's by its id; a started
        thread's by its target (in the `object` configuration: the one no restart made)."""
        invocation = self.threads[thread].get("invocation") if thread < len(self.threads) else None
        if invocation:
            return f"id = '{invocation}'"
        if self.handler == "object":
            return f"target = '{OBJECT}/{self._key(thread)}/run' AND restarted_from IS NULL"
        return f"target = '{SERVICE}/{self._key(thread)}/run'"

    def _inputs(
        self, signals: list[tuple[int, object]]
    ) -> tuple[dict[int, object], list[tuple[int, object]]]:
        """The recorded input of each consuming stage, and the late ones. Each consuming stage
        creates one awakeable, in stage order, so the n-th distinct signal index in the journal
        is the n-th consuming stage's. A resolve of an awakeable that was completed already is
        journaled again under the same signal index (seen at restate-server 1.7.12): a late
        input, never read by the handler."""
        order: dict[int, int] = {}
        inputs: dict[int, object] = {}
        late: list[tuple[int, object]] = []
        for index, value in signals:
            if index not in order:
                if len(order) >= len(self.workflow.consuming):
                    continue
                order[index] = self.workflow.consuming[len(order)]
                inputs[order[index]] = value
            else:
                late.append((order[index], value))
        return inputs, late

    def _journal(self, rows: list[dict]) -> tuple[list[Checkpoint], list[tuple[int, int]], dict[int, str]]:
        """The model's chain from the journaled run results, the awakeable completions (signal
        index, value) in the journal, and the awakeable ids published by `a<s>` runs."""
        chain = [Checkpoint(0, self.workflow.initial_state(), INITIAL)]
        signals = []
        published = {}
        for row in rows:
            entry = json.loads(row["entry_json"] or "null") or {}
            notification = entry.get("Notification") or {}
            run = (notification.get("Completion") or {}).get("Run")
            if run is not None and "Success" in (run.get("result") or {}):
                result = json.loads(bytes(run["result"]["Success"]))
                if "awakeable" in result:
                    published[result["for"]] = result["awakeable"]
                    continue
                chain.append(Checkpoint(result["stage"] + 1, tuple(result["state"]), result["stage"]))
            signal_entry = notification.get("Signal")
            if signal_entry is not None and "Success" in (signal_entry.get("result") or {}):
                index = signal_entry["id"].get("Index", signal_entry["id"].get("SignalIndex", 0))
                signals.append((index, json.loads(bytes(signal_entry["result"]["Success"]))))
        return chain, signals, published

    def _query(self, sql: str) -> list[dict]:
        with httpx.Client(timeout=HTTP_TIMEOUT) as client:
            answer = client.post(
                f"{self.server.admin_url}/query", json={"query": sql}, headers={"accept": "application/json"}
            )
        answer.raise_for_status()
        return answer.json()["rows"]

    def _run_state(self, thread: int, record: dict | None) -> str:
        """`new` before the bridge ran the thread; `failed` when the invocation ended with a
        failure; `free` when complete or suspended at an open awakeable; `dead` otherwise: the
        invocation has work outstanding and no service process runs between operations, so
        what the server retries next is the recovery's to take over."""
        if record is None or self.threads[thread]["run"] == "new":
            return "new"
        if record["status"] == COMPLETED and record["failure"] is not None:
            return "failed"
        return "free" if self._settled(record) is not None else "dead"

    def observe(self) -> Observation:
        self._server_up()
        views = []
        for t in range(len(self.threads)):
            record = self._read(t)
            if record is None:
                chain, inputs, late = [Checkpoint(0, self.workflow.initial_state(), INITIAL)], {}, ()
            else:
                chain, inputs, late = record["chain"], record["inputs"], tuple(record["late"])
            views.append(ThreadView(tuple(chain), self._run_state(t, record), inputs, late))
        return Observation(tuple(views))


def _service_port() -> int:
    """A free loopback port for the deployment, below the kernel's ephemeral range: no service
    process listens there between operations, and a port the kernel hands out for outgoing
    connections (the server's own, to this very deployment) could take it meanwhile."""
    low, _ = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for port in random.sample(range(max(1024, low - 12000), low), 200):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port below the ephemeral range")


def _listener(port: int) -> socket.socket | None:
    """A listening socket on the deployment's port, or None when another process of the same
    operation (one of k concurrent deliveries) listens there already."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:  # two sockets with SO_REUSEADDR may both bind a port nobody listens on: listen decides
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
    except OSError:
        listener.close()
        return None
    return listener


def _run_hypercorn(app, listener: socket.socket) -> None:
    """Serve `app` with Hypercorn on the inherited listening socket, until killed."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"fd://{listener.fileno()}"]
    config.loglevel = "ERROR"
    config.accesslog = None
    asyncio.run(serve(app, config))


def _end(pid: int | None) -> None:
    """End a service process (SIGKILL: a service process keeps nothing the server needs) and
    reap it."""
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _post(url: str, body) -> object:
    """POST a JSON body through Restate's ingress; an error status is Restate's refusal."""
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:
        answer = client.post(url, json=body)
    if answer.status_code >= 400:
        raise RestateRefusal(f"{answer.status_code} {answer.text.strip()[:200]}")
    return answer.json() if answer.content else None


def _patch(url: str) -> object:
    """PATCH through Restate's admin API; an error status is Restate's refusal."""
    with httpx.Client(timeout=HTTP_TIMEOUT) as client:
        answer = client.patch(url)
    if answer.status_code >= 400:
        raise RestateRefusal(f"{answer.status_code} {answer.text.strip()[:200]}")
    return answer.json() if answer.content else None


def _commands(journal: list[dict]) -> list[tuple[int, str, str]]:
    """The journal's commands: (entry index, entry type, name)."""
    return [(r["index"], r["entry_type"], r["name"]) for r in journal if "Command" in r["entry_type"]]


def _publish(awakeable_id: str, stage: int) -> dict:
    """The `a<stage>` run's action: the awakeable's id, journaled for a client to read."""
    return {"awakeable": awakeable_id, "for": stage}
