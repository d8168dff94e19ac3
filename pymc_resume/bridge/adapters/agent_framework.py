"""The bridge adapter for Microsoft Agent Framework workflows (`agent-framework-core`): a real
`Workflow` of plain executors, checkpointed by a real `FileCheckpointStorage` (one JSON file per
checkpoint in the example's workdir), the only durable checkpoint storage the package ships.

The fuzzing workflow becomes a chain of executors, one per node of the model (`n0`, `n1`, ...),
built with `WorkflowBuilder(start_executor=..., checkpoint_storage=...).add_chain(...)`. The
message between executors is a `FuzzState` dataclass (the model's state tuple), and every
executor also stores it in the workflow's shared state (`ctx.set_state`), so that each
checkpoint carries the state after its superstep. Node kinds:

- step, effect: a `@handler` that runs the stage's node code and sends the state on;
- interrupt, gated: a `@handler` that calls `ctx.request_info(state, int)`; the run parks
  (`IDLE_WITH_PENDING_REQUESTS`), and the executor's `@response_handler` runs the stage's node
  code with the response;
- effect-then-interrupt: one `@handler` that runs the effect stage and then calls
  `ctx.request_info`; its `@response_handler` runs the second stage.

Agent Framework checkpoints at superstep boundaries: an entry checkpoint when a run starts, one
after every superstep, and a response-entry checkpoint when responses are delivered (before the
superstep that consumes them). Each checkpoint names its parent (`previous_checkpoint_id`). The
model's chain is the head's ancestry: a checkpoint whose position is past its parent's commits
the stages in between; a response-entry checkpoint (same position, the response in flight as a
RESPONSE message) is the durable record of a delivered value, i.e. the claim, not a checkpoint.

The framework has no thread: checkpoints belong to a workflow name. Each bridge thread runs
under its own name (`fuzz-t0`, `fuzz-t1`, ...); its head is `storage.get_latest(workflow_name=)`,
the framework's own "latest checkpoint" (or, for a fork not yet run, its fork point).

How the contract's operations map (docs/agent-framework.md says more):

- start: `workflow.run(FuzzState(...))` on a fresh workflow in a fresh process;
- resume(v), two variants (`VARIANTS`), each `workflow.run(checkpoint_id=c, responses={request_id:
  v})` on a fresh workflow in a fresh process: `respond-at-latest` addresses the thread's head,
  `storage.get_latest(workflow_name=...)`, with the request the head is parked on (or, when the
  head has none pending, the last request the thread asked: the framework decides);
  `respond-at-pause` addresses the checkpoint and request the client holds from the park, the
  id `workflow.resolve_pause_checkpoint_id(request_ids)` returned when the run parked (the
  client keeps it in a file of its own, `held/<thread>.json` in the example's workdir). Where
  the framework stored nothing to address (`get_latest` found no checkpoint, or the park's
  `resolve_pause_checkpoint_id` returned None) the client has no documented call to make and
  refuses itself (`Refusal`: no evidence for a verdict);
- recover: `workflow.run(checkpoint_id=head)` on a fresh workflow in a fresh process (or the
  initial message again when no checkpoint was stored);
- fork: a new workflow instance (a new name) restores an earlier checkpoint,
  `workflow.run(checkpoint_id=c)`, when the fork is started; a replay fork at an interrupt
  restores the parent's response-entry checkpoint (the framework re-delivers the recorded
  response); an edit fork at an interrupt is the documented restore-and-respond call itself, on
  the new instance: `workflow.run(checkpoint_id=c, responses={request_id: v})` (the sample's
  resume from a checkpoint "awaiting human response" with a new answer; `Workflow.run`'s
  `responses` "can be combined with `checkpoint_id` to restore a checkpoint and send responses
  in a single call"), which runs on until the fork parks or completes, in a child process with
  no crash point (the bridge's fork takes none), as CrewAI's fork does. Every position the
  model allows is expressible (a parked head, a completed head, an older checkpoint) but a
  stage committed inside a checkpoint that records several (refused as `NOT_EXPRESSIBLE`: the
  framework has no checkpoint there);
- update: not expressible (see `unsupported`).

Crash points are real SIGKILLs of the child process: before or after a stage's node code (in
the executor), or right after `FileCheckpointStorage.save` returned for the checkpoint that
records the stage (a subclass of the storage).

Effects are unkeyed. Agent Framework documents no idempotency key (its checkpoints and
human-in-the-loop pages name none): an executor that ran after the checkpoint a run is restored
from runs again, and nothing documented tells the second run from the first.
`ctx.request_id` in a response handler is documented as the id that pairs a response with its
`request_info` request (the human-in-the-loop pages), not as an idempotency key; until issue 41
the adapter keyed the response handlers' effects by it.

`allowed_types` (True by default, so that `race agent-framework` races a durable store; the
profile's first configuration, "file", sets it False: the storage as it comes) registers
`FuzzState` in the storage's `allowed_checkpoint_types`, which the framework documents as needed
for an application type in a checkpoint: without it `FileCheckpointStorage.save` refuses every
checkpoint of this workflow, and the framework logs a warning and runs on without a durable
record.
"""

import asyncio
import dataclasses
import json
import logging
import os
from pathlib import Path

from pymc_resume.bridge.adapter import (
    NOT_EXPRESSIBLE,
    OK,
    REFUSED,
    Observation,
    Outcome,
    ThreadView,
    Variant,
)
from pymc_resume.bridge.kit import ChildProcessAdapter, Refusal
from pymc_resume.bridge.kit.preload import preloading
from pymc_resume.model.state import INITIAL, Checkpoint
from pymc_resume.model.workflow import UNSET, NodeKind, StageKind, Workflow

WORKFLOW_PREFIX = "fuzz-"
STATE_KEY = "app"
STATE_TYPE = f"{__name__}:FuzzState"

UPDATE_UNSUPPORTED = (
    "Agent Framework has no client call that writes a workflow's state: shared state changes only "
    "inside executors (ctx.set_state), and checkpoints are written only by a running workflow"
)

# Where Agent Framework documents the calls (the Python pivot of its checkpoints page, the
# human-in-the-loop checkpoint sample, and the docstrings of the public methods).
CHECKPOINTS_DOCS = (
    "https://learn.microsoft.com/agent-framework/workflows/checkpoints?pivots=programming-language-python"
)
HITL_SAMPLE = (
    "https://github.com/microsoft/agent-framework/blob/main/python/samples/03-workflows/checkpoint/"
    "checkpoint_with_human_in_the_loop.py"
)
RUN_DOCS = (
    "agent_framework.Workflow.run docstring (responses 'can be combined with checkpoint_id to restore a "
    "checkpoint and send responses in a single call')"
)
LATEST_DOCS = "agent_framework.CheckpointStorage.get_latest docstring"
RESTORE_DOCS = f"{CHECKPOINTS_DOCS}; {HITL_SAMPLE}"
PAUSE_DOCS = (
    "agent_framework.Workflow.resolve_pause_checkpoint_id docstring ('a checkpoint id suitable for "
    "durable resume')"
)

RESPOND_AT_LATEST = "respond-at-latest"
RESPOND_AT_PAUSE = "respond-at-pause"
LATEST_CALL = (
    "workflow.run(checkpoint_id=(await storage.get_latest(workflow_name=name)).checkpoint_id, "
    "responses={request_id: v}) on a fresh workflow in a fresh process"
)
PAUSE_CALL = (
    "workflow.run(checkpoint_id=held, responses={request_id: v}) on a fresh workflow in a fresh process, "
    "held = await workflow.resolve_pause_checkpoint_id(request_ids) when the run parked"
)
START_CALL = (
    "WorkflowBuilder(start_executor=..., checkpoint_storage=FileCheckpointStorage(dir))"
    ".add_chain(...).build().run(FuzzState(...))"
)
RECOVER_CALL = (
    "workflow.run(checkpoint_id=(await storage.get_latest(workflow_name=name)).checkpoint_id) on a fresh "
    "workflow in a fresh process (workflow.run(FuzzState(...)) again when get_latest finds none)"
)
REPLAY_FORK_CALL = (
    "a new workflow instance (its own workflow name) restores the checkpoint when started: "
    "workflow.run(checkpoint_id=c) (at an interrupt, the parent's response-entry checkpoint)"
)
EDIT_FORK_CALL = (
    "a new workflow instance (its own workflow name) restores the checkpoint with the new response and "
    "runs on: workflow.run(checkpoint_id=c, responses={request_id: v}), in a fresh process"
)

# The crash, which is no call of the framework's (every other operation's calls are its variants).
FRAMEWORK_CALLS = {
    "crash": "SIGKILL of the child process running workflow.run (around an executor's node code, or "
    "right after FileCheckpointStorage.save returned)",
}

# Every documented way of performing each operation (`bridge/adapter/protocol.py`): a response
# addressed to the latest checkpoint, and one addressed to the checkpoint that parked.
VARIANTS = (
    Variant("start", "run-message", START_CALL, CHECKPOINTS_DOCS),
    Variant("resume", RESPOND_AT_LATEST, LATEST_CALL, f"{CHECKPOINTS_DOCS}; {RUN_DOCS}; {LATEST_DOCS}"),
    Variant("resume", RESPOND_AT_PAUSE, PAUSE_CALL, f"{HITL_SAMPLE}; {RUN_DOCS}; {PAUSE_DOCS}"),
    Variant("resume-together", RESPOND_AT_LATEST, f"k processes, each {LATEST_CALL}", RUN_DOCS),
    Variant("resume-together", RESPOND_AT_PAUSE, f"k processes, each {PAUSE_CALL}", PAUSE_DOCS),
    Variant("recover", "restore-latest", RECOVER_CALL, f"{CHECKPOINTS_DOCS}; {LATEST_DOCS}"),
    Variant("fork", "restore-checkpoint", REPLAY_FORK_CALL, RESTORE_DOCS, ("replay",)),
    Variant("fork", "respond-at-checkpoint", EDIT_FORK_CALL, f"{HITL_SAMPLE}; {RUN_DOCS}", ("edit",)),
)


@dataclasses.dataclass(frozen=True)
class FuzzState:
    """The message between executors and the shared state: the model's state tuple."""

    values: tuple[int, ...]


class AgentFrameworkRefusal(Exception):
    """An error Agent Framework raised to its client (classified by where it was raised)."""


def _agent_framework_version() -> str:
    from importlib.metadata import version

    return version("agent-framework-core")


class AgentFrameworkAdapter(ChildProcessAdapter):
    name = "agent-framework"
    # Imported once in the host template (none starts a thread at import); agent_framework
    # loads its names lazily, so the modules behind the names the adapter uses are named here.
    preload = preloading("agent_framework", "agent_framework._workflows")
    framework = "Agent Framework"
    # No lease in the store (liveness is skipped); recorded inputs are the committed responses
    # and the response-entry checkpoint's in-flight response (the claim).
    capabilities = frozenset({"recorded-inputs", "executions"})
    refusals = (AgentFrameworkRefusal,)
    unsupported = {"update": UPDATE_UNSUPPORTED}
    framework_calls = FRAMEWORK_CALLS
    variants = VARIANTS
    effect_key = {
        "key": "none",
        "why": "Agent Framework documents no idempotency key: ctx.request_id pairs a response with its "
        "request_info request (the human-in-the-loop pages), and nothing is documented as an execution's "
        "identity across a restore",
    }

    def __init__(self, allowed_types: bool = True) -> None:
        super().__init__()
        try:
            import agent_framework  # noqa: F401
        except ImportError as error:
            raise RuntimeError(
                f"agent-framework-core is not installed ({error}); pip install 'pymc-resume[agent-framework]'"
            ) from None
        self.allowed_types = bool(allowed_types)
        self.version = f"agent-framework-core {_agent_framework_version()}"
        # A refused save is observed in the store, not printed.
        logging.getLogger("agent_framework").setLevel(logging.ERROR)

    def options(self) -> dict:
        return {"allowed_types": self.allowed_types}

    def open(self, setup) -> None:
        super().open(setup)
        self.store = setup.workdir / "checkpoints"
        self.held = setup.workdir / "held"  # the client's own record of each thread's pause address
        self.threads[0].update(name="t0", fork_point=None)

    # -- the workflow (built in each child process) ------------------------------------------

    def _storage(self, reading: bool = False):
        """The framework's file storage; observing reads with the state type allowed (read-only).
        In a client operation's child process, saves pass the after-commit crash point."""
        from agent_framework import FileCheckpointStorage

        allowed = [STATE_TYPE] if self.allowed_types or reading else None
        if reading or self.control is None:
            return FileCheckpointStorage(self.store, allowed_checkpoint_types=allowed)
        adapter = self

        class CommitHookedStorage(FileCheckpointStorage):
            """The file storage, with the after-commit crash point right after each save."""

            async def save(self, checkpoint):
                saved = await super().save(checkpoint)
                adapter.committed(*range(adapter._position(checkpoint)))
                return saved

        return CommitHookedStorage(self.store, allowed_checkpoint_types=allowed)

    def _workflow(self, thread: int):
        from agent_framework import WorkflowBuilder

        executors = [_executor(self, node) for node in range(len(self.workflow.nodes))]
        builder = WorkflowBuilder(
            name=WORKFLOW_PREFIX + self.threads[thread]["name"],
            start_executor=executors[0],
            checkpoint_storage=self._storage(),
        )
        return builder.add_chain(executors).build()

    # -- the client hooks, in the child process --------------------------------------------

    def client_start(self, thread: int) -> str:
        edit = self.threads[thread].get("edit")
        if edit is not None:  # an edit fork: restore its fork point and respond, in one call
            return self._run(
                thread, checkpoint_id=edit["checkpoint_id"], responses={edit["request_id"]: edit["value"]}
            )
        head = self._head(thread)
        if head is not None:
            return self._run(thread, checkpoint_id=head.checkpoint_id)
        return self._run(thread, message=FuzzState(self.workflow.initial_state()))

    def client_resume(self, thread: int, value: int, variant: str = RESPOND_AT_LATEST) -> str:
        """The response, addressed as `variant` says: to the latest checkpoint, or to the
        checkpoint the client holds from the park."""
        if variant == RESPOND_AT_PAUSE:
            checkpoint_id, request_id = self._held_pause(thread)
        else:
            checkpoint_id, request_id = self._latest_address(thread)
        self.loaded()
        return self._run(thread, checkpoint_id=checkpoint_id, responses={request_id: value})

    def client_recover(self, thread: int) -> str:
        return self.client_start(thread)

    def _latest_address(self, thread: int) -> tuple[str, str]:
        """`respond-at-latest`: the head `storage.get_latest` names, and the request it is parked
        on (or the last one the thread asked)."""
        head = self._head(thread)
        if head is None:
            raise Refusal(
                "storage.get_latest found no checkpoint of this workflow: the framework stored none, so "
                "there is nothing to restore and respond to"
            )
        request_id = self._request_id(thread, head)
        if request_id is None:
            raise Refusal("the thread never asked for input (no request_info on its chain)")
        return head.checkpoint_id, request_id

    def _held_pause(self, thread: int) -> tuple[str, str]:
        """`respond-at-pause`: the checkpoint and request the client holds from the thread's last
        park (what `resolve_pause_checkpoint_id` returned then)."""
        try:
            held = json.loads(self._held_path(thread).read_text())
        except FileNotFoundError:
            raise Refusal("the client holds no pause address: no run of this thread parked") from None
        if held["checkpoint_id"] is None:
            raise Refusal(
                f"the client holds no pause checkpoint for request {held['request_id']}: when the run "
                "parked, workflow.resolve_pause_checkpoint_id returned None (the framework saved none)"
            )
        return held["checkpoint_id"], held["request_id"]

    def _held_path(self, thread: int) -> Path:
        return self.held / f"{self.threads[thread]['name']}.json"

    def _run(self, thread: int, **arguments) -> str:
        """One `workflow.run` on a fresh workflow; an error Agent Framework raised is a refusal.
        A run that parks hands its client the pause address, which the client keeps."""

        async def run():
            workflow = self._workflow(thread)
            result = await workflow.run(**arguments)
            request_ids = [event.request_id for event in result.get_request_info_events()]
            if request_ids:
                pause = await workflow.resolve_pause_checkpoint_id(request_ids)
                held = {"checkpoint_id": pause, "request_id": request_ids[0]}
                _write_atomically(self._held_path(thread), held)
            return result

        try:
            result = asyncio.run(run())
        except Exception as error:
            if _from_agent_framework(error):
                raise AgentFrameworkRefusal(f"{type(error).__name__}: {error}") from None
            raise
        return str(result.get_final_state())

    # -- fork and update, in the adapter's process -----------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        lineage = self._lineage(self._checkpoints(), self._head_id(thread))
        chain, sources = self._view(lineage)
        if not 0 <= checkpoint < len(chain):
            return Outcome(REFUSED, f"no checkpoint {checkpoint} to fork from", by=NOT_EXPRESSIBLE)
        source = sources[checkpoint]
        if source is None:
            return Outcome(
                REFUSED,
                f"checkpoint {checkpoint} is a stage committed inside an Agent Framework checkpoint that "
                "records several: the framework has no checkpoint there to restore",
                by=NOT_EXPRESSIBLE,
            )
        pc, point = chain[checkpoint].pc, lineage[source]
        consuming = pc < self.workflow.end and self.workflow.consumes[pc]
        if consuming and intent == "replay":
            # The parent's response-entry checkpoint: restoring it re-delivers the recorded response.
            delivered = [cp for cp in lineage[source + 1 :] if self._position(cp) == pc]
            point = delivered[0] if delivered else point
        new = self.add_thread(name=f"t{len(self.threads)}", fork_point=point.checkpoint_id)
        if intent == "edit" and consuming:
            return self._edit_fork(new, checkpoint, point, value)
        return Outcome(OK, f"forked as thread {new} from checkpoint {point.checkpoint_id}", thread=new)

    def _edit_fork(self, new: int, checkpoint: int, point, value: int | None) -> Outcome:
        """An edit fork as Agent Framework's human-in-the-loop sample writes it: a new workflow
        instance restores the checkpoint that awaits the response and sends the new one in the
        same call (`run(checkpoint_id=c, responses={request_id: v})`), running on until it parks
        or completes; the kit's `start` runs that call in a fresh process (`client_start` reads
        the edit from the thread's memory), with no crash point."""
        if not point.pending_request_info_events:
            self.threads.pop()
            return Outcome(
                REFUSED, f"checkpoint {checkpoint} has no pending request to answer", by=NOT_EXPRESSIBLE
            )
        request_id = next(iter(point.pending_request_info_events))
        self.threads[new]["edit"] = {
            "checkpoint_id": point.checkpoint_id,
            "request_id": request_id,
            "value": value,
        }
        outcome = self.start(new, None, f"fork.t{new}")
        del self.threads[new]["edit"]
        if outcome.status == REFUSED and self._latest(new) is None:  # the framework stored nothing
            self.threads.pop()
            return outcome
        detail = f"forked as thread {new} from checkpoint {point.checkpoint_id}, then {outcome.detail}"
        return Outcome(OK, detail, thread=new)

    def update(self, thread: int, note: int) -> Outcome:
        """Not expressible (`unsupported`); refused in case a bridge still asks."""
        return Outcome(REFUSED, UPDATE_UNSUPPORTED, by=NOT_EXPRESSIBLE)

    # -- reading the store (read-only) -------------------------------------------------------------

    def _checkpoints(self) -> dict:
        """Every stored checkpoint by id, read through the storage's own `list_checkpoints`."""
        storage = self._storage(reading=True)

        async def read():
            found = {}
            for memory in self.threads:
                for cp in await storage.list_checkpoints(workflow_name=WORKFLOW_PREFIX + memory["name"]):
                    found[cp.checkpoint_id] = cp
            return found

        return asyncio.run(read())

    def _latest(self, thread: int):
        storage = self._storage(reading=True)
        return asyncio.run(storage.get_latest(workflow_name=WORKFLOW_PREFIX + self.threads[thread]["name"]))

    def _head_id(self, thread: int) -> str | None:
        latest = self._latest(thread)
        return latest.checkpoint_id if latest is not None else self.threads[thread]["fork_point"]

    def _head(self, thread: int):
        head = self._head_id(thread)
        return self._checkpoints().get(head) if head is not None else None

    def _request_id(self, thread: int, head) -> str | None:
        """The request the head is parked on, else the last one the thread's chain asked."""
        for cp in reversed(self._lineage(self._checkpoints(), head.checkpoint_id)):
            if cp.pending_request_info_events:
                return next(iter(cp.pending_request_info_events))
        return None

    @staticmethod
    def _lineage(checkpoints: dict, head: str | None) -> list:
        """The head's ancestry through `previous_checkpoint_id`, oldest first."""
        chain = []
        while head is not None and head in checkpoints:
            chain.append(checkpoints[head])
            head = checkpoints[head].previous_checkpoint_id
        return chain[::-1]

    def _node_of(self, executor_id: str) -> int:
        return int(executor_id.removeprefix("internal:")[1:])

    def _first_stage(self, node: int) -> int:
        return next(s for s, stage in enumerate(self.workflow.stages) if stage.node == node)

    def _position(self, cp) -> int:
        """The stage a checkpoint runs next: a pending request's waiting stage, else the first
        stage of the executor its in-flight message goes to, else the end."""
        stages = self.workflow.stages
        for event in cp.pending_request_info_events.values():
            node = self._node_of(event.source_executor_id)
            return max(s for s, stage in enumerate(stages) if stage.node == node)
        for source, messages in cp.messages.items():
            for message in messages:
                node = self._node_of(message.target_id or source)
                if message.target_id is None and not source.startswith("internal:"):
                    node += 1  # an edge message from executor n goes to n + 1
                if message.type.value == "response":
                    return max(s for s, stage in enumerate(stages) if stage.node == node)
                return self._first_stage(node) if node < len(self.workflow.nodes) else self.workflow.end
        return self.workflow.end

    def _view(self, lineage: list) -> tuple[list[Checkpoint], list[int | None]]:
        """The model's chain for a lineage, and the lineage index each checkpoint is (None: a
        stage committed inside a checkpoint that records several)."""
        workflow = self.workflow
        chain = [Checkpoint(0, workflow.initial_state(), INITIAL)]
        sources: list[int | None] = [0 if lineage else None]
        for index, cp in enumerate(lineage):
            pc = self._position(cp)
            stored = cp.state.get(STATE_KEY)
            app = tuple(stored.values) if stored is not None else workflow.initial_state()
            for stage in range(chain[-1].pc, pc):
                last = stage == pc - 1
                state = app if last else _before_later(workflow, app, stage)
                chain.append(Checkpoint(stage + 1, state, stage))
                sources.append(index if last else None)
        return chain, sources

    def _inputs(self, lineage: list, chain: list[Checkpoint]) -> dict[int, int]:
        """Committed responses, and the head's in-flight response (a claim not yet consumed)."""
        workflow = self.workflow
        inputs = {
            c.stage: c.app[workflow.stages[c.stage].node]
            for c in chain
            if c.stage >= 0 and workflow.consumes[c.stage]
        }
        if lineage:
            for messages in lineage[-1].messages.values():
                for message in messages:
                    if message.type.value == "response" and isinstance(message.data, int):
                        inputs.setdefault(chain[-1].pc, message.data)
        return inputs

    def observe(self) -> Observation:
        checkpoints = self._checkpoints()
        views = []
        for memory in self.threads:
            name = WORKFLOW_PREFIX + memory["name"]
            latest = [cp for cp in checkpoints.values() if cp.workflow_name == name]
            head = max(latest, key=lambda cp: cp.timestamp).checkpoint_id if latest else memory["fork_point"]
            lineage = self._lineage(checkpoints, head)
            chain, _ = self._view(lineage)
            views.append(ThreadView(tuple(chain), memory["run"], self._inputs(lineage, chain)))
        return Observation(tuple(views))


def _executor(adapter: AgentFrameworkAdapter, node: int):
    """The executor `n{node}`: its stages' node code in a `@handler`, and for a consuming node a
    `request_info` and a `@response_handler` for the waiting stage."""
    from agent_framework import Executor, WorkflowContext, handler, response_handler

    workflow = adapter.workflow
    stages = [s for s, stage in enumerate(workflow.stages) if stage.node == node]
    waiting = stages[-1] if workflow.consumes[stages[-1]] else None
    running = [s for s in stages if s != waiting]
    last = node == len(workflow.nodes) - 1

    async def forward(values: tuple[int, ...], ctx) -> None:
        ctx.set_state(STATE_KEY, FuzzState(values))
        if last:
            await ctx.yield_output(FuzzState(values))
        else:
            await ctx.send_message(FuzzState(values))

    class NodeExecutor(Executor):
        @handler
        async def run(self, state: FuzzState, ctx: WorkflowContext[FuzzState, FuzzState]) -> None:
            values = tuple(state.values)
            for s in running:
                values = adapter.execute(s, values, None, None)
            if waiting is None:
                await forward(values, ctx)
                return
            ctx.set_state(STATE_KEY, FuzzState(values))
            await ctx.request_info(FuzzState(values), int)

        if waiting is not None:

            @response_handler
            async def answer(
                self, request: FuzzState, value: int, ctx: WorkflowContext[FuzzState, FuzzState]
            ) -> None:
                # Unkeyed: Agent Framework documents no idempotency key (the module docstring).
                values = adapter.execute(waiting, tuple(request.values), value, None)
                await forward(values, ctx)

    return NodeExecutor(id=f"n{node}")


def _write_atomically(path: Path, data: dict) -> None:
    """The client's own record, written whole: a temporary file of this process's own, renamed
    over the thread's file (k concurrent deliveries each write one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)


def _before_later(workflow: Workflow, app: tuple[int, ...], stage: int) -> tuple[int, ...]:
    """`app` (a later state of the same run) as it was right after `stage`: the fields that
    later stages write are not yet written."""
    out = list(app)
    for later in workflow.stages[stage + 1 :]:
        if later.kind is not StageKind.EFFECT or workflow.nodes[later.node] is NodeKind.EFFECT:
            out[later.node] = UNSET
    return tuple(out)


def _from_agent_framework(error: BaseException) -> bool:
    """Whether Agent Framework raised `error` to its client: the innermost frame of
    agent_framework or pymc_resume on its traceback is Agent Framework's."""
    innermost = None
    tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if "/agent_framework/" in filename:
            innermost = "agent_framework"
        elif "/pymc_resume/" in filename:
            innermost = "pymc_resume"
        tb = tb.tb_next
    return innermost == "agent_framework"
