"""The bridge adapter for the OpenAI Agents SDK (`openai-agents`): a real `Agent` whose tools are
the workflow's stages, driven by a scripted `Model` (no network, no LLM), paused for a human with
`needs_approval` and resumed from its `RunState`, serialized with `to_string()` to a file per
thread (and, in the `sqlite-session` configuration, with the conversation in a `SQLiteSession`).

The fuzzing workflow becomes one function tool per stage of the model (`s0`, `s1`, ...; an
effect-then-interrupt node is two tools, the effect then the wait), and `ScriptedModel` plays
back one tool call per model turn: the first stage whose tool has no output in the input the
runner hands it, with a fresh call id, as a real model's; a final message once every stage has
one. The model's state is the run's local context, a mapping (`{"app": [...]}`, which `RunState`
serializes as it is); every tool reads it, runs its stage's node code, writes it back and returns
`{"stage": s, "app": [...]}` as its output, so the conversation records the state after every
stage. Stage kinds:

- step, effect: a plain tool;
- interrupt, gated: a tool with `needs_approval=True`. The run stops with `interruptions`; the
  human's value is the decision: v1 approves (`state.approve(item)`: the tool runs, with value 1),
  v2 rejects (`state.reject(item)`: the tool does not run; the runner writes the rejection as the
  call's output through `RunConfig.tool_error_formatter`, the SDK's documented hook for it, which
  runs the stage's node code with value 2). Approve and reject carry no other value: a
  schema-invalid value (-1) is not expressible.

Where the model's checkpoints are (the store the observation reads, read-only):

- `state-file`: the client saves `result.to_state().to_string()` to the thread's file whenever
  `Runner.run` returns (parked or finished), as the SDK's human-in-the-loop example does. Nothing
  is durable in between: one save commits every stage the run got through (the after-commit
  crash point of each). The chain is read from the saved state's generated items, each tool
  output committing its stage.
- `sqlite-session`: the same, with `session=SQLiteSession(f"t{thread}", db)` passed to every run;
  the runner writes each turn's tool call and output to the session as the turn ends (a subclass
  of `SQLiteSession` reports the after-commit crash point right after `add_items`), so the chain
  is read from the session's items.

How the contract's operations map (`variants`; docs/openai-agents.md says more):

- start: `Runner.run(agent, INPUT, context={"app": initial})`, then the state saved; or
  `Runner.run_streamed(...)` with its events consumed (the `run-streamed` variant, as for resume
  and recover);
- resume(v): `RunState.from_string(agent, saved)`, the decision on the interruption the run
  stopped with (restored from the saved state, as the docs' example decides `result.interruptions`
  on a reloaded state), `Runner.run(agent, state)`, then the state saved; or the decision on the
  restored state's own `get_interruptions()` (the `pending` variant), which a finished run does
  not have (not expressible there);
- recover: `state-file`: a run that saved no state is run again from the start (nothing else is
  durable); a saved state is at a pause (parked or finished), so there is nothing to continue.
  `sqlite-session`: `Runner.run(agent, [], context=..., session=session)` continues the stored
  conversation when the session is ahead of the saved state (a run died between its turns), the
  context rebuilt from the last tool output in the session;
- update(note): `RunState.from_string(agent, saved, context_override={"app": ...})`, saved back;
- fork: not expressible (see `unsupported`).

Effects are unkeyed. The SDK documents no idempotency key: `ToolContext.tool_call_id` (and the
error formatter's `call_id`) is documented as the id of the model's tool call, not as an
identity to deduplicate a tool's effects by; until issue 41 the adapter keyed effects by it (a
restored state runs a recorded call under the same id; a call the model makes again after a
restart has a new id).
"""

import asyncio
import json
import os
import sqlite3
import uuid
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
from pymc_resume.bridge.kit import ChildProcessAdapter, NoOp, NotExpressible, Refusal
from pymc_resume.bridge.kit.chains import stage_chain
from pymc_resume.bridge.kit.preload import preloading
from pymc_resume.model.state import Checkpoint
from pymc_resume.model.workflow import APPROVE

try:
    from agents import (
        Agent,
        RunConfig,
        Runner,
        RunState,
        SQLiteSession,
        ToolApprovalItem,
        function_tool,
        set_trace_provider,
    )
    from agents.exceptions import UserError
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.tool_context import ToolContext
    from agents.tracing.provider import DefaultTraceProvider
    from agents.usage import Usage
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseFunctionToolCall,
        ResponseOutputItemDoneEvent,
        ResponseOutputMessage,
        ResponseOutputText,
    )
except ImportError as error:  # the registry reports it in one line, with the extra to install
    raise ImportError(
        f"openai-agents is not installed ({error}); pip install 'pymc-resume[openai-agents]'"
    ) from None

# The variants' names: a run (`Runner.run`) or a streamed one (`Runner.run_streamed`); a decision
# on the interruption the run stopped with, or on the restored state's `get_interruptions()`.
RUN = "run"
STREAMED = "run-streamed"
INTERRUPTION = "interruption"
PENDING = "pending"
CONTEXT_OVERRIDE = "context-override"

STATE_FILE = "state-file"
SQLITE_SESSION = "sqlite-session"
STORES = (STATE_FILE, SQLITE_SESSION)

APP = "app"  # the context key the model's state lives under
REJECT = 2  # the value a rejection delivers (v1 approves: model.workflow.APPROVE)
INPUT = "Run the workflow: call each stage's tool in order."
# The SDK's default session tables (SQLiteSession(sessions_table=..., messages_table=...)).
MESSAGES_TABLE = "agent_messages"

FORK_UNSUPPORTED = (
    "the OpenAI Agents SDK has no fork: a RunState is one paused run, serialized by the client, and "
    "a run keeps no earlier states to go back to (a SQLiteSession keeps the conversation, not the "
    "run's state; AdvancedSQLiteSession branches only at a user message, and a run here has one); "
    "restoring one saved string twice is the client copying its own file, of the head only, which "
    "says nothing about the framework"
)
VALUE_NOT_EXPRESSIBLE = (
    "approve and reject carry no value (v1 approves, v2 rejects), so the SDK cannot be handed value {value}"
)

DOCS = "https://openai.github.io/openai-agents-python/"
HITL_DOCS = f"{DOCS}human_in_the_loop/"
STREAMING_DOCS = f"{DOCS}streaming/"
# How a process is killed (`framework_calls`' crash row; the operations are `variants`).
FRAMEWORK_CALLS = {
    "crash": "SIGKILL of the child process running the agent (around a tool's node code, or right after "
    "the state file was written, or, with a session, right after SQLiteSession.add_items returned)",
}


class ScriptedModel(Model):
    """A `Model` that plays back the workflow's tool calls, deterministically and offline (the
    SDK's own tests drive the runner with such a `Model` subclass, `tests/fake_model.py`).

    Each turn it calls the tool of the first stage that has no output in its input yet, under a
    fresh call id (a real model's ids are new in every response), and answers with a final
    message once every stage has one. It reads only the input the runner hands it, so a run
    restored in another process, or continued from a session, is played back from what the
    framework kept."""

    def __init__(self, stages: int) -> None:
        self.stages = stages

    def _output(self, input) -> list:
        items = [_as_dict(item) for item in (input if isinstance(input, list) else [])]
        answered = {item["call_id"] for item in items if item.get("type") == "function_call_output"}
        done = {
            _stage_of(item["name"])
            for item in items
            if item.get("type") == "function_call" and item["call_id"] in answered
        }
        stage = next((s for s in range(self.stages) if s not in done), None)
        if stage is None:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            return [
                ResponseOutputMessage(
                    id=f"msg_{uuid.uuid4().hex}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[text],
                )
            ]
        call = uuid.uuid4().hex
        return [
            ResponseFunctionToolCall(
                type="function_call",
                name=f"s{stage}",
                call_id=f"call_{call}",
                arguments="{}",
                id=f"fc_{call}",
            )
        ]

    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        *,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    ):
        return ModelResponse(output=self._output(input), usage=Usage(), response_id=None)

    async def stream_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        *,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    ):
        output = self._output(input)
        for index, item in enumerate(output):
            yield ResponseOutputItemDoneEvent(
                type="response.output_item.done", item=item, output_index=index, sequence_number=index
            )
        response = Response(
            id=f"resp_{uuid.uuid4().hex}",
            created_at=0,
            model="scripted",
            object="response",
            output=output,
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=False,
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=len(output)
        )


def _as_dict(item) -> dict:
    return item if isinstance(item, dict) else item.model_dump()


def _stage_of(tool_name: str) -> int:
    return int(tool_name[1:])


def _output(stage: int, app: tuple[int, ...]) -> str:
    """A tool's output: its stage and the state after it (what the conversation records)."""
    return json.dumps({"stage": stage, APP: list(app)})


def _openai_agents_version() -> str:
    from importlib.metadata import version

    return version("openai-agents")


class OpenAIAgentsRefusal(Exception):
    """An error the OpenAI Agents SDK raised to its client (its `UserError`)."""


class OpenAIAgentsAdapter(ChildProcessAdapter):
    name = "openai-agents"
    # Imported once in the host template (none starts a thread at import).
    preload = preloading("agents", "agents.run", "openai")
    framework = "the OpenAI Agents SDK"
    # No lease (liveness is skipped); recorded inputs are the decisions the tool outputs record,
    # late inputs a later decision the saved state's approvals record for a call already answered.
    capabilities = frozenset({"recorded-inputs", "executions", "late-inputs"})
    refusals = (OpenAIAgentsRefusal,)
    unsupported = {"fork": FORK_UNSUPPORTED}
    framework_calls = FRAMEWORK_CALLS
    effect_key = {
        "key": "none",
        "why": "the SDK documents no idempotency key: ToolContext.tool_call_id is the id of the model's "
        "tool call, not documented as an identity to deduplicate effects by",
    }

    def __init__(self, store: str = STATE_FILE) -> None:
        super().__init__()
        if store not in STORES:
            raise ValueError(f"store must be one of {', '.join(STORES)}, not {store!r}")
        self.store = store
        self.version = f"openai-agents {_openai_agents_version()}"
        # Tracing off, as the SDK's own tests set it up (tests/conftest.py there): a provider with
        # no processor, disabled. The default one would export traces to OpenAI (the network),
        # and building its exporter costs a fifth of a second in every process. Traces record
        # nothing durable.
        provider = DefaultTraceProvider()
        provider.set_disabled(True)
        set_trace_provider(provider)

    def options(self) -> dict:
        return {"store": self.store}

    @property
    def variants(self) -> tuple[Variant, ...]:
        """Every documented call, per operation (the session argument where there is one)."""
        session = ", session=session" if self.store == SQLITE_SESSION else ""
        saved = "result.to_state().to_string() saved to the thread's file"
        decide = "state.approve(item) (v1) or state.reject(item) (v2)"
        interruption = (
            f"RunState.from_string(agent, saved); {decide} on the interruption the run stopped with"
        )
        if self.store == STATE_FILE:
            recover = f"Runner.run(agent, input, context=...) again when the run saved no state; {saved}"
            recover_docs = f"{HITL_DOCS} (Long-running approvals: RunState is the durable boundary)"
        else:
            recover = (
                "Runner.run(agent, [], context=..., session=session) when the session holds turns the "
                f"saved state does not; {saved}"
            )
            recover_docs = f"{DOCS}sessions/ (Core session behavior)"
        return (
            Variant(
                "start",
                RUN,
                f"Runner.run(agent, input, context={{'app': ...}}{session}); {saved}",
                f"{HITL_DOCS} (Example: pause, approve, resume)",
            ),
            Variant(
                "start",
                STREAMED,
                f"Runner.run_streamed(agent, input, context=...{session}), stream_events() consumed; {saved}",
                f"{STREAMING_DOCS} (approvals)",
            ),
            Variant(
                "resume",
                INTERRUPTION,
                f"{interruption}; Runner.run(agent, state{session}); {saved}",
                f"{HITL_DOCS} (How the approval flow works; Example)",
            ),
            Variant(
                "resume",
                PENDING,
                f"RunState.from_string(agent, saved); {decide} for each item of "
                f"state.get_interruptions(); Runner.run(agent, state{session}); {saved}",
                f"{DOCS}ref/run_state/ (RunState.get_interruptions)",
            ),
            Variant(
                "resume",
                STREAMED,
                f"{interruption}; Runner.run_streamed(agent, state{session}), "
                f"stream_events() consumed; {saved}",
                f"{STREAMING_DOCS} (approvals); {DOCS}results/",
            ),
            Variant(
                "resume-together",
                INTERRUPTION,
                f"k processes, each {interruption}; Runner.run(agent, state{session})",
                f"{HITL_DOCS} (How the approval flow works)",
            ),
            Variant("recover", RUN, recover, recover_docs),
            Variant(
                "recover", STREAMED, recover.replace("Runner.run(", "Runner.run_streamed(", 1), STREAMING_DOCS
            ),
            Variant(
                "update",
                CONTEXT_OVERRIDE,
                "RunState.from_string(agent, saved, context_override={'app': ...}); state.to_string() saved",
                f"{HITL_DOCS} (Long-running approvals)",
            ),
        )

    def open(self, setup) -> None:
        super().open(setup)
        stages = self.workflow.stages
        self.agent = Agent(
            name="fuzz",
            instructions="Run the workflow's stages in order.",
            tools=[self._tool(s) for s in range(len(stages))],
            model=ScriptedModel(len(stages)),
        )
        self.run_config = RunConfig(tracing_disabled=True, tool_error_formatter=self._rejected)
        # A bound on model turns (the SDK's default is 10 per run); it stops no run of these workflows.
        self.max_turns = 8 * (len(stages) + 1)

    # -- the agent's tools: the stages' node code ---------------------------------------------

    def _tool(self, stage: int):
        adapter, consumes = self, self.workflow.consumes[stage]

        async def invoke(ctx: ToolContext) -> str:
            # Unkeyed: the SDK documents no idempotency key (the module docstring).
            app = adapter.execute(stage, tuple(ctx.context[APP]), APPROVE if consumes else None, None)
            ctx.context[APP] = list(app)
            return _output(stage, app)

        kind = self.workflow.stages[stage].kind.name.lower()
        return function_tool(
            invoke,
            name_override=f"s{stage}",
            description_override=f"stage {stage} of the workflow ({kind})",
            needs_approval=consumes,
            failure_error_function=None,  # an exception in node code is the adapter's bug: raise it
        )

    def _rejected(self, args) -> str | None:
        """`RunConfig.tool_error_formatter`: the runner calls it to write a rejected call's output;
        the stage's node code runs here with the rejecting value."""
        if args.kind != "approval_rejected":
            return None
        stage = _stage_of(args.tool_name)
        context = args.run_context.context
        app = self.execute(stage, tuple(context[APP]), REJECT, None)  # unkeyed, as in `_tool`
        context[APP] = list(app)
        return _output(stage, app)

    # -- the client hooks, in the child process --------------------------------------------

    def client_start(self, thread: int, variant: str | None = None) -> str:
        if self._saved_text(thread) is not None or self._session_items(thread):
            return self.client_recover(thread, variant)
        initial = {APP: list(self.workflow.initial_state())}
        return self._run(thread, INPUT, context=initial, streamed=variant == STREAMED)

    def client_resume(self, thread: int, value: int, variant: str | None = None) -> str:
        saved = self._saved_text(thread)
        if saved is None:
            raise Refusal("the thread has no saved RunState to resume (it never stopped for approval)")
        if value not in (APPROVE, REJECT):
            raise NotExpressible(VALUE_NOT_EXPRESSIBLE.format(value=value))
        shown = self._interruption(json.loads(saved))
        if shown is None:
            raise Refusal("the saved RunState records no interruption to decide")

        async def decided(state):
            """The restored state with the human's decision on its interruption(s)."""
            items = state.get_interruptions() if variant == PENDING else [shown]
            if not items:
                raise NotExpressible(
                    "the saved RunState stops at no interruption (state.get_interruptions() is empty: "
                    "the run finished), so there is nothing to decide"
                )
            self.loaded()
            for item in items:
                if value == APPROVE:
                    state.approve(item)
                else:
                    state.reject(item)
            return state

        return self._run(thread, saved, decide=decided, streamed=variant == STREAMED)

    def client_recover(self, thread: int, variant: str | None = None) -> str:
        saved = self._saved_text(thread)
        streamed = variant == STREAMED
        if self.store == STATE_FILE:
            if saved is not None:
                raise NoOp("the saved RunState is at a pause (parked or finished): nothing to continue")
            return self._run(
                thread, INPUT, context={APP: list(self.workflow.initial_state())}, streamed=streamed
            )
        items = self._session_items(thread)
        if saved is not None and not self._session_ahead(json.loads(saved), items):
            raise NoOp("the session and the saved RunState agree (parked or finished): nothing to continue")
        context = {APP: list(self._context_from(items, saved))}
        return self._run(thread, [] if items else INPUT, context=context, streamed=streamed)

    def _run(self, thread: int, input, *, context=None, decide=None, streamed: bool = False) -> str:
        """One run of the agent (`Runner.run`, or `Runner.run_streamed` with its events consumed)
        from `input`, or from the saved state `input` restored with `RunState.from_string` and
        `decide`d; then its state saved. An error the SDK raised to its client is a refusal."""

        async def run():
            session = self._session(thread) if self.store == SQLITE_SESSION else None
            extra = {"session": session} if session is not None else {}
            if context is not None:
                extra["context"] = context
            try:
                begin = (
                    input if decide is None else await decide(await RunState.from_string(self.agent, input))
                )
                if not streamed:
                    result = await Runner.run(
                        self.agent, begin, run_config=self.run_config, max_turns=self.max_turns, **extra
                    )
                else:
                    result = Runner.run_streamed(
                        self.agent, begin, run_config=self.run_config, max_turns=self.max_turns, **extra
                    )
                    async for _event in result.stream_events():
                        pass
            finally:
                if session is not None:
                    session.close()
            return result.to_state().to_string(), result

        try:
            saved, result = asyncio.run(run())
        except UserError as error:
            raise OpenAIAgentsRefusal(f"UserError: {error}") from None
        self._save(thread, saved)
        if result.interruptions:
            names = ", ".join(item.tool_name or "?" for item in result.interruptions)
            return f"stopped for approval of {names}"
        return f"finished: {result.final_output}"

    def _save(self, thread: int, saved: str) -> None:
        """The client's durable write of the serialized state; in the state-file configuration it
        is the commit of every stage the run got through (the after-commit crash point)."""
        _write_atomically(self._path(thread), saved)
        if self.store == STATE_FILE:
            self.committed(*(stage for stage, _ in self._outputs(self._state_items(json.loads(saved)))))

    def _session(self, thread: int):
        """The thread's SQLiteSession; in a client's child process, each write reports the
        after-commit crash point of the stages whose outputs it stored."""
        adapter = self

        class CommitHookedSession(SQLiteSession):
            """SQLiteSession, with the after-commit crash point right after each write."""

            async def add_items(self, items) -> None:
                await super().add_items(items)
                adapter.committed(*(stage for stage, _ in adapter._outputs(items)))

        return CommitHookedSession(f"t{thread}", self._db())

    def _interruption(self, saved: dict):
        """The interruption the run stopped with last, as the client showed it to the human:
        rebuilt from the saved state's record of it (a `ToolApprovalItem` of the recorded call)."""
        shown = [item for item in saved.get("session_items", []) if item.get("type") == "tool_approval_item"]
        if not shown:
            return None
        return ToolApprovalItem(agent=self.agent, raw_item=ResponseFunctionToolCall(**shown[-1]["raw_item"]))

    def _session_ahead(self, saved: dict, items: list[dict]) -> bool:
        """Whether the session holds work the saved state does not (a run died between turns): it
        does not end with the interruption the state is parked on, or with the final message of a
        finished state."""
        if not items:
            return False
        last = items[-1]
        pending = (saved.get("current_step") or {}).get("data", {}).get("interruptions", [])
        if pending:
            calls = {item["raw_item"].get("call_id") for item in pending}
            return not (last.get("type") == "function_call" and last.get("call_id") in calls)
        finished = saved.get("current_step") is None
        return not (finished and last.get("type", "message") == "message" and last.get("role") == "assistant")

    def _context_from(self, items: list[dict], saved: str | None) -> tuple[int, ...]:
        """The context a run continued from the session starts with: the state after the last
        tool output there, with the note of the saved state (updates write only that)."""
        outputs = self._outputs(items)
        app = list(outputs[-1][1] if outputs else self.workflow.initial_state())
        if saved is not None:
            app[self.workflow.note] = self._context_app(json.loads(saved))[self.workflow.note]
        return tuple(app)

    # -- update, in the adapter's process ---------------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        """Not expressible (`unsupported`); refused in case a bridge still asks."""
        return Outcome(REFUSED, FORK_UNSUPPORTED, by=CLIENT)

    def update(self, thread: int, note: int) -> Outcome:
        saved = self._saved_text(thread)
        if saved is None:
            return Outcome(REFUSED, "the thread has no saved RunState to update", by=CLIENT)
        app = list(self._context_app(json.loads(saved)))
        app[self.workflow.note] = note

        async def update():
            state = await RunState.from_string(self.agent, saved, context_override={APP: app})
            return state.to_string()

        try:
            updated = asyncio.run(update())
        except UserError as error:
            return Outcome(REFUSED, f"UserError: {error}", by=FRAMEWORK)
        _write_atomically(self._path(thread), updated)
        return Outcome(OK, "updated")

    # -- reading the stores (read-only) ------------------------------------------------------

    def _path(self, thread: int) -> Path:
        return self.setup.workdir / f"t{thread}.json"

    def _db(self) -> Path:
        return self.setup.workdir / "sessions.db"

    def _saved_text(self, thread: int) -> str | None:
        try:
            return self._path(thread).read_text()
        except FileNotFoundError:
            return None

    def _session_items(self, thread: int) -> list[dict]:
        """The session's stored items, oldest first (none without a session)."""
        if self.store != SQLITE_SESSION or not self._db().exists():
            return []
        with sqlite3.connect(f"file:{self._db()}?mode=ro", uri=True) as db:
            try:
                rows = db.execute(
                    f"SELECT message_data FROM {MESSAGES_TABLE} WHERE session_id = ? ORDER BY id",
                    (f"t{thread}",),
                ).fetchall()
            except sqlite3.OperationalError:  # no table yet
                return []
        return [json.loads(data) for (data,) in rows]

    @staticmethod
    def _state_items(saved: dict) -> list[dict]:
        """The raw items of a saved state's generated items: the run's history."""
        return [item["raw_item"] for item in saved.get("generated_items", [])]

    def _context_app(self, saved: dict) -> tuple[int, ...]:
        stored = (saved.get("context") or {}).get("context") or {}
        return tuple(stored.get(APP, self.workflow.initial_state()))

    @staticmethod
    def _outputs(items) -> list[tuple[int, tuple[int, ...]]]:
        """(stage, state after it) of every tool output among `items`, in order."""
        return [(stage, app) for stage, app, _ in OpenAIAgentsAdapter._answers(items)]

    @staticmethod
    def _answers(items) -> list[tuple[int, tuple[int, ...], str]]:
        """(stage, state after it, call id) of every tool output among `items`, in order."""
        found = []
        for item in items:
            data = _as_dict(item)
            if data.get("type") == "function_call_output":
                output = json.loads(data["output"])
                found.append((output["stage"], tuple(output[APP]), data["call_id"]))
        return found

    def _late_inputs(self, items, saved: dict | None) -> tuple[tuple[int, int], ...]:
        """Decisions the saved state's approvals record for a call that was already answered
        otherwise (`state.approve` or `state.reject` on an interruption consumed before): (stage,
        the value the recorded decision means). The approvals keep one decision per call, so a
        second decision like the first leaves nothing to see."""
        if saved is None:
            return ()
        approvals = (saved.get("context") or {}).get("approvals") or {}
        late = []
        for stage, app, call in self._answers(items):
            if not self.workflow.consumes[stage]:
                continue
            record = approvals.get(f"s{stage}") or {}
            decided = {APPROVE: record.get("approved"), REJECT: record.get("rejected")}
            consumed = app[self.workflow.stages[stage].node]
            for value, calls in decided.items():
                if value != consumed and isinstance(calls, list) and call in calls:
                    late.append((stage, value))
        return tuple(late)

    def _chain(self, outputs: list[tuple[int, tuple[int, ...]]], note: int | None) -> list[Checkpoint]:
        """The model's chain: a checkpoint per tool output (committing its stage), and a client
        update where the note changed (the context, which only updates write, holds the last)."""
        return stage_chain(self.workflow, outputs, note)

    def observe(self) -> Observation:
        views = []
        workflow = self.workflow
        for t, memory in enumerate(self.threads):
            text = self._saved_text(t)
            saved = json.loads(text) if text is not None else None
            items = self._session_items(t) if self.store == SQLITE_SESSION else self._state_items(saved or {})
            note = self._context_app(saved)[workflow.note] if saved is not None else None
            chain = self._chain(self._outputs(items), note)
            inputs = {
                c.stage: c.app[workflow.stages[c.stage].node]
                for c in chain
                if c.stage >= 0 and workflow.consumes[c.stage]
            }
            late = self._late_inputs(items, saved)
            views.append(ThreadView(tuple(chain), memory["run"], inputs, late))
        return Observation(tuple(views))


def _write_atomically(path: Path, text: str) -> None:
    """The client's durable write: a temporary file of this process's own, synced, renamed over
    the thread's file (k concurrent deliveries each write one)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
