"""The bridge adapter for LlamaIndex Workflows (`llama-index-workflows`): a real `Workflow` of
plain steps whose paused run is persisted the way its docs persist one: the run's `Context`
serialized with its `JsonSerializer` (`ctx.to_dict(serializer=...)`) to a durable JSON file, one
per thread in the example's workdir, and restored with `Context.from_dict` in a fresh process.

The fuzzing workflow becomes a chain of steps, one per node of the model (`n0`, `n1`, ...): step
`n0` takes the `StartEvent`, step `n{i}` the event `ReachNode{i}` that step `n{i-1}` returns, and
the last step returns the `StopEvent`. The state is the model's tuple in the context's state
store (`ctx.store`, key "app"): a step reads it, runs its stages' node code and writes it back.
Node kinds:

- step, effect: the stage's node code, then the next event;
- interrupt, gated: `await ctx.wait_for_event(NodeResponse, waiter_event=InputRequiredEvent(...),
  waiter_id=...)`, the framework writing the waiter event to the stream; the stage's node code
  runs with the response;
- effect-then-interrupt: the effect stage's node code, then the same wait, in one step (the
  effect-before-wait pattern). The framework pauses a waiting step by raising inside it and, when
  the event arrives, runs the whole step again (its docs say so), so the effect runs again.

`NodeResponse` is a `HumanResponseEvent` (which the docs say to use directly or subclass) whose
`response` is an int `>= 0`: the event's own Pydantic validation is the framework's chance to
refuse the schema's forbidden value (-1).

The client drives a run through `handler.stream_events(expose_internal=True)` until the
framework reports `WorkflowIdleEvent` (every step waits on external input) or the run stops,
then serializes the context to the thread's file (written atomically: the durable point, the
after-commit crash point of every stage the saved context has passed) and, when idle, cancels
the run (`handler.cancel_run()`), as the docs' human-in-the-loop persistence does. The framework
keeps no checkpoint history: the model's chain is read from the versions of the saved context,
in the order the adapter read them after each operation (each operation writes the file at most
once), each version further on committing the stages in between.

How the contract's operations map (docs/llama-index.md says more):

- start: `workflow.run()`, driven as above;
- resume(v): `Context.from_dict(workflow, saved, serializer)`, `workflow.run(ctx=restored)`,
  `handler.ctx.send_event(NodeResponse(response=v))`, driven as above;
- recover: `Context.from_dict` and `workflow.run(ctx=restored)` (the initial run again when no
  context was saved);
- update(note): `Context.from_dict`, `await restored.store.set("app", ...)`, the context
  serialized back to the file;
- fork: not expressible (see `unsupported`).

Crash points are real SIGKILLs of the child process: before or after a stage's node code (in
the step), or right after the saved context was written. The framework hands steps no stable
identity that survives a restore, and its docs name no idempotency key, so effects carry no key.
"""

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated

from pydantic import Field, create_model

from pymc_resume.bridge.adapter import (
    CLIENT,
    FRAMEWORK,
    NOT_EXPRESSIBLE,
    OK,
    REFUSED,
    Observation,
    Outcome,
    ThreadView,
    Variant,
)
from pymc_resume.bridge.kit import ChildProcessAdapter, NoOp, Refusal
from pymc_resume.bridge.kit.preload import preloading
from pymc_resume.model.state import INITIAL, UPDATE, Checkpoint
from pymc_resume.model.workflow import UNSET, NodeKind, StageKind, Workflow

try:
    from workflows import Context, step
    from workflows import Workflow as LlamaWorkflow
    from workflows.context.serializers import JsonSerializer
    from workflows.events import (
        Event,
        HumanResponseEvent,
        InputRequiredEvent,
        StartEvent,
        StopEvent,
        UnhandledEvent,
        WorkflowIdleEvent,
    )
except ImportError as error:  # the registry reports it in one line, with the extra to install
    raise ImportError(
        f"llama-index-workflows is not installed ({error}); pip install 'pymc-resume[llama-index]'"
    ) from None

STATE_KEY = "app"
MAX_NODES = 16  # the event classes below: one per node a workflow can reach

FORK_UNSUPPORTED = (
    "LlamaIndex Workflows keeps no checkpoint history (it was removed upstream): a run is its one "
    "current Context, serialized by the client, so there is no earlier point to fork from and no "
    "recorded input to replay or replace; a fork of the head alone would be the client copying its "
    "own file, which says nothing about the framework"
)

FRAMEWORK_CALLS = {
    "start": "workflow.run(), streamed (expose_internal=True) to WorkflowIdleEvent or the StopEvent; "
    "ctx.to_dict(serializer=JsonSerializer()) to the thread's file; handler.cancel_run() when idle",
    "resume": "Context.from_dict(workflow, saved, serializer=JsonSerializer()); workflow.run(ctx=restored); "
    "handler.ctx.send_event(NodeResponse(response=v)); streamed and saved as start",
    "resume-together": "k processes, each Context.from_dict + workflow.run(ctx=restored) + "
    "handler.ctx.send_event(NodeResponse(response=v))",
    "crash": "SIGKILL of the child process running the workflow (around a step's node code, or right "
    "after the serialized context was written)",
    "recover": "Context.from_dict(workflow, saved, serializer=JsonSerializer()); workflow.run(ctx=restored)",
    "update": "Context.from_dict(workflow, saved); await restored.store.set('app', ...); "
    "restored.to_dict(serializer=JsonSerializer()) to the thread's file",
}

# Where LlamaIndex Workflows documents the calls.
DOCS = "https://developers.llamaindex.ai/python/llamaagents/workflows"
HUMAN_IN_THE_LOOP = (
    f"{DOCS}/human_in_the_loop (Stopping/Resuming Between Human Responses; Using wait_for_event)"
)
DURABLE = f"{DOCS}/durable_workflows (Storing data in the context object)"
STATE = f"{DOCS}/managing_state (Maintaining Context Across Runs)"

# One documented client call per operation: the framework documents one way to pause and resume
# a run across processes (serialize the Context, restore it, run it, send the event); a targeted
# `send_event(ev, step=...)` is refused for a step that waits (`wait_for_event`) rather than
# takes the event, so it is no second way to deliver a response here.
VARIANTS = (
    Variant("start", "run-streamed", FRAMEWORK_CALLS["start"], HUMAN_IN_THE_LOOP),
    Variant("resume", "send-event-to-restored", FRAMEWORK_CALLS["resume"], HUMAN_IN_THE_LOOP),
    Variant(
        "resume-together", "send-event-to-restored", FRAMEWORK_CALLS["resume-together"], HUMAN_IN_THE_LOOP
    ),
    Variant("recover", "run-restored", FRAMEWORK_CALLS["recover"], DURABLE),
    Variant("update", "store-set-on-restored", FRAMEWORK_CALLS["update"], f"{STATE}; {DURABLE}"),
)


class NodeResponse(HumanResponseEvent):
    """A human's response to a waiting node: an int the schema allows (>= 0)."""

    response: Annotated[int, Field(ge=0)]


def _reach_event(node: int) -> type:
    """The event that starts step `n{node}` (a module-level class: the JSON serializer
    rebuilds events by their qualified name)."""
    return create_model(f"ReachNode{node}", __base__=Event, __module__=__name__)


for _node in range(1, MAX_NODES):
    globals()[f"ReachNode{_node}"] = _reach_event(_node)
REACH_EVENTS = {node: globals()[f"ReachNode{node}"] for node in range(1, MAX_NODES)}
del _node


class LlamaIndexRefusal(Exception):
    """An error LlamaIndex Workflows raised to its client (classified by where it was raised)."""


def _llama_index_version() -> str:
    from importlib.metadata import version

    return version("llama-index-workflows")


class LlamaIndexAdapter(ChildProcessAdapter):
    name = "llama-index"
    # Imported once in the host template (none starts a thread at import).
    preload = preloading("workflows", "workflows.context.serializers", "workflows.events")
    framework = "LlamaIndex Workflows"
    # No lease (liveness is skipped); recorded inputs are the consumed responses in the state.
    capabilities = frozenset({"recorded-inputs", "executions"})
    refusals = (LlamaIndexRefusal,)
    unsupported = {"fork": FORK_UNSUPPORTED}
    framework_calls = FRAMEWORK_CALLS
    variants = VARIANTS
    effect_key = {
        "key": "none",
        "why": "LlamaIndex Workflows hands a step no identity that survives a restore",
    }

    def __init__(self) -> None:
        super().__init__()
        self.version = f"llama-index-workflows {_llama_index_version()}"

    def open(self, setup) -> None:
        if len(setup.workflow.nodes) > MAX_NODES:
            raise ValueError(f"the llama-index adapter runs workflows of at most {MAX_NODES} nodes")
        super().open(setup)

    def _path(self, thread: int) -> Path:
        return self.setup.workdir / f"t{thread}.json"

    # -- the workflow --------------------------------------------------------------------------

    def _workflow(self):
        """A fresh `Workflow` subclass with one step per node."""
        flow = type("FuzzWorkflow", (LlamaWorkflow,), {"__module__": __name__})
        for node in range(len(self.workflow.nodes)):
            step(workflow=flow)(self._step(node))
        return flow(timeout=None)

    def _step(self, node: int):
        workflow, adapter = self.workflow, self
        stages = [s for s, stage in enumerate(workflow.stages) if stage.node == node]
        waiting = stages[-1] if workflow.consumes[stages[-1]] else None
        running = [s for s in stages if s != waiting]
        last = node == len(workflow.nodes) - 1

        async def run_node(ctx, ev):
            app = tuple(await ctx.store.get(STATE_KEY, default=list(workflow.initial_state())))
            for s in running:
                app = adapter.execute(s, app, None, None)
            await ctx.store.set(STATE_KEY, list(app))
            if waiting is not None:
                response = await ctx.wait_for_event(
                    NodeResponse, waiter_event=InputRequiredEvent(prefix=f"n{node}"), waiter_id=f"n{node}"
                )
                app = adapter.execute(waiting, app, response.response, None)
                await ctx.store.set(STATE_KEY, list(app))
            return StopEvent(result=list(app)) if last else REACH_EVENTS[node + 1]()

        run_node.__name__ = f"n{node}"
        run_node.__annotations__ = {
            "ctx": Context,
            "ev": StartEvent if node == 0 else REACH_EVENTS[node],
            "return": StopEvent if last else REACH_EVENTS[node + 1],
        }
        return run_node

    # -- the client hooks, in the child process --------------------------------------------

    def client_start(self, thread: int) -> str:
        if self._path(thread).exists():
            return self.client_recover(thread)
        return self._framework(lambda: self._drive(thread, lambda flow: flow.run()))

    def client_resume(self, thread: int, value: int) -> str:
        saved = self._saved(thread)
        if saved is None:
            raise Refusal("the thread has no saved context to restore and respond to")

        def resume(flow):
            response = NodeResponse(response=value)  # the event validates its value
            self.loaded()
            handler = flow.run(ctx=Context.from_dict(flow, saved, serializer=JsonSerializer()))
            handler.ctx.send_event(response)
            return handler

        return self._framework(lambda: self._drive(thread, resume))

    def client_recover(self, thread: int) -> str:
        """Run the saved context on when it has work in flight; a saved context that is stopped,
        or idle waiting for input, has nothing to recover (restoring an idle one runs nothing
        and reports no idle transition again)."""
        saved = self._saved(thread)
        if saved is None:
            return self._framework(lambda: self._drive(thread, lambda flow: flow.run()))
        if not saved.get("is_running"):
            raise NoOp("already stopped: nothing to recover")
        if not _in_flight(saved):
            raise NoOp("parked (idle, waiting for input): nothing to recover")
        return self._framework(
            lambda: self._drive(
                thread, lambda flow: flow.run(ctx=Context.from_dict(flow, saved, serializer=JsonSerializer()))
            )
        )

    def _drive(self, thread: int, begin) -> str:
        """Run until the framework reports the run idle (waiting for input) or stopped; save the
        context; cancel an idle run."""

        async def drive():
            flow = self._workflow()
            handler = begin(flow)
            async for event in handler.stream_events(expose_internal=True):
                if isinstance(event, WorkflowIdleEvent) or (isinstance(event, UnhandledEvent) and event.idle):
                    self._save(thread, handler.ctx.to_dict(serializer=JsonSerializer()))
                    await handler.cancel_run()
                    return "parked (idle, waiting for input)"
            result = await handler
            self._save(thread, handler.ctx.to_dict(serializer=JsonSerializer()))
            return f"completed: {result}"

        return asyncio.run(drive())

    def _framework(self, call) -> str:
        try:
            return call()
        except Exception as error:
            if _from_llama_index(error):
                raise LlamaIndexRefusal(f"{type(error).__name__}: {error}") from None
            raise

    def _save(self, thread: int, data: dict) -> None:
        """The client's durable write of the serialized context, then the after-commit crash
        point of every stage it has passed."""
        _write_atomically(self._path(thread), data)
        self.committed(*range(self._position(data)))

    def _saved(self, thread: int) -> dict | None:
        try:
            return json.loads(self._path(thread).read_text())
        except FileNotFoundError:
            return None

    # -- fork and update, in the adapter's process -----------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        """Not expressible (`unsupported`); refused in case a bridge still asks."""
        return Outcome(REFUSED, FORK_UNSUPPORTED, by=NOT_EXPRESSIBLE)

    def update(self, thread: int, note: int) -> Outcome:
        saved = self._saved(thread)
        if saved is None:
            return Outcome(REFUSED, "the thread has no saved context to update", by=CLIENT)

        async def update():
            flow = self._workflow()
            restored = Context.from_dict(flow, saved, serializer=JsonSerializer())
            app = list(await restored.store.get(STATE_KEY, default=list(self.workflow.initial_state())))
            app[self.workflow.note] = note
            await restored.store.set(STATE_KEY, app)
            return restored.to_dict(serializer=JsonSerializer())

        try:
            data = asyncio.run(update())
        except Exception as error:
            if _from_llama_index(error):
                return Outcome(REFUSED, f"{type(error).__name__}: {error}", by=FRAMEWORK)
            raise
        _write_atomically(self._path(thread), data)
        return Outcome(OK, "updated")

    # -- reading the saved contexts (read-only) ----------------------------------------------------

    def _app(self, data: dict) -> tuple[int, ...]:
        stored = data.get("state", {}).get("state_data", {}).get("_data", {}).get(STATE_KEY)
        if stored is None:
            return self.workflow.initial_state()
        return tuple(JsonSerializer().deserialize(stored))

    def _position(self, data: dict) -> int:
        """The stage the saved run runs next: a waiting step's waiting stage, else the first
        stage of a step with queued or running work, else the end (the run stopped)."""
        workflow = self.workflow
        if not data.get("is_running"):
            return workflow.end
        workers = data.get("workers", {})
        for node in range(len(workflow.nodes)):
            worker = workers.get(f"n{node}", {})
            stages = [s for s, stage in enumerate(workflow.stages) if stage.node == node]
            if worker.get("collected_waiters"):
                return stages[-1]
            if worker.get("queue") or worker.get("in_progress"):
                return stages[0]
        return workflow.end

    def observe(self) -> Observation:
        """Each thread's chain from every version of its saved context this adapter has read.

        The framework keeps no history, but every client operation writes the thread's file at
        most once (when the run goes idle or stops), and the bridge observes after every
        operation, so the versions read in order are the store's history (a version that k
        concurrent deliveries overwrote was never durable as the run's record)."""
        views = []
        for t, memory in enumerate(self.threads):
            saved = self._saved(t)
            records = memory.setdefault("records", [])
            if saved is not None:
                record = (self._position(saved), self._app(saved))
                if not records or records[-1] != record:
                    records.append(record)
            chain = self._chain(records)
            inputs = {
                c.stage: c.app[self.workflow.stages[c.stage].node]
                for c in chain
                if c.stage >= 0 and self.workflow.consumes[c.stage]
            }
            views.append(ThreadView(tuple(chain), memory["run"], inputs))
        return Observation(tuple(views))

    def _chain(self, records: list[tuple[int, tuple[int, ...]]]) -> list[Checkpoint]:
        """The model's chain for the saved versions in order: a version further on commits the
        stages in between (each with the state after it); one at the same position with another
        state is a client update; one further back (a stopped run that `run(ctx=...)` started
        again) commits its stages again."""
        workflow = self.workflow
        chain = [Checkpoint(0, workflow.initial_state(), INITIAL)]
        for pc, app in records:
            before = chain[-1].pc
            if pc == before:
                if app != chain[-1].app:
                    chain.append(Checkpoint(pc, app, UPDATE))
                continue
            for stage in range(before if pc > before else 0, pc):
                last = stage == pc - 1
                state = app if last else _before_later(workflow, app, stage)
                chain.append(Checkpoint(stage + 1, state, stage))
        return chain


def _in_flight(data: dict) -> bool:
    """Whether a saved context has queued or running step work (not only waiters)."""
    workers = data.get("workers", {}).values()
    return any(worker.get("queue") or worker.get("in_progress") for worker in workers)


def _write_atomically(path: Path, data: dict) -> None:
    """The client's durable write: a temporary file of this process's own, synced, renamed over
    the thread's file (k concurrent deliveries each write one)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w") as file:
        json.dump(data, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _before_later(workflow: Workflow, app: tuple[int, ...], stage: int) -> tuple[int, ...]:
    """`app` (a later state of the same run) as it was right after `stage`: the fields that
    later stages write are not yet written (the note, which updates write, is kept)."""
    out = list(app)
    for later in workflow.stages[stage + 1 :]:
        if later.kind is not StageKind.EFFECT or workflow.nodes[later.node] is NodeKind.EFFECT:
            out[later.node] = UNSET
    return tuple(out)


def _from_llama_index(error: BaseException) -> bool:
    """Whether LlamaIndex Workflows raised `error` to its client: the innermost frame of
    workflows or pymc_resume on its traceback is the framework's (its events' Pydantic
    validation included)."""
    innermost = None
    tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if "/site-packages/workflows/" in filename:
            innermost = "workflows"
        elif "/pymc_resume/" in filename:
            innermost = "pymc_resume"
        tb = tb.tb_next
    return innermost == "workflows"
