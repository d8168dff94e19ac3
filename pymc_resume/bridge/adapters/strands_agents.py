"""The bridge adapter for Strands Agents (`strands-agents`): a real `Agent` whose tools are the
workflow's stages, driven by a scripted `Model` (no network, no LLM), paused for a human with an
interrupt and persisted by the `FileSessionManager` (one directory per thread, the store).

The fuzzing workflow becomes one tool per stage of the model (`s0`, `s1`, ...; an
effect-then-interrupt node is two tools, the effect then the wait), and `ScriptedModel` plays
back one tool call per model turn: the first stage with no successful tool result in the
conversation the agent hands it, under a fresh `toolUseId` (a real model's ids are new in every
response); a final message once every stage has one. The model's state lives in the agent's
state (`agent.state`, "key-value storage" that the session persists with the conversation):
every tool reads `app` from `tool_context.agent.state`, runs its stage's node code, writes it
back and returns `{"stage": s, "app": [...]}`, so the conversation records the state after every
stage. The interrupt, in each configuration (`interrupt=`):

- `hook`: a `BeforeToolCallEvent` callback calls `event.interrupt(f"s{stage}", reason=...)` for a
  consuming stage, as the docs' `ApprovalHook` does; the response it returns on the resumed call
  is the stage's value, handed to the tool as its input (`event.tool_use`, which a
  `BeforeToolCallEvent` callback may replace: "The tool parameters that will be passed to
  selected_tool");
- `tool`: the tool itself calls `tool_context.interrupt(f"s{stage}", reason=...)`, as the docs'
  "Tools" section does, and gets the response on the resumed call.

The docs (https://strandsagents.com/docs/user-guide/concepts/interrupts/): "When an interrupt is
raised, the agent stops its loop and returns control to the user. The user in turn provides a
response to the agent. The agent then continues its execution starting from the point of
interruption. Users can raise interrupts from either hook callbacks or tool definitions."; and in
`strands.types.interrupt`: "User resumes by invoking agent with interrupt responses ... Interrupts
are session managed in-between return and user response."

Where the model's checkpoints are (the store the observation reads, read-only): the
`FileSessionManager(session_id=f"t{thread}", storage_dir=<workdir>/sessions)` writes each message
as the agent adds it (`message_<n>.json`), then the agent record (`agent.json`: `agent.state`
and the interrupt state). A tool result message commits its stage (the after-commit crash point
is right after that message's file is written, before the agent record is: two writes, and a
process can die between them). The note the client updates is read from `agent.json`'s state.

How the contract's operations map (`variants`; docs/strands.md says more):

- start: `Agent(..., session_manager=FileSessionManager(...))("Run the workflow.")`; when it
  stops with `stop_reason == "interrupt"`, the client keeps `result.interrupts` (their ids) in a
  file of its own, as the docs' example keeps them to build the responses;
- resume(v): a new process builds the agent on the same session and calls it with
  `[{"interruptResponse": {"interruptId": id, "response": v}}]` for each interrupt it kept; the
  session restores the interrupt state, so this works from another process;
- recover: the agent built on the session, called with a new prompt ("Continue."): a session
  whose last message is a tool use with no result gets one ("Agents latest message is toolUse,
  appending a toolResult message to have valid conversation", the SDK's fix for strands
  issue 1111) and the model goes on; a session parked at an interrupt refuses a prompt (TypeError:
  "must resume from interrupt with list of interruptResponse's"), which leaves nothing to recover;
- update(note): the agent built on the session, `agent.state.set("app", ...)`, then
  `session_manager.sync_agent(agent)` (the session manager's public "Serialize and update the
  agent into the session repository");
- fork: not expressible (see `unsupported`).

Effects are unkeyed: Strands documents no idempotency key; a tool use's `toolUseId` is the id the
model gave the call (a call the model makes again after a restart gets a new one).
"""

import asyncio
import json
import logging
import os
import uuid
from pathlib import Path

from pymc_resume.bridge.adapter import CLIENT, OK, REFUSED, Observation, Outcome, ThreadView, Variant
from pymc_resume.bridge.kit import ChildProcessAdapter, NoOp, Refusal
from pymc_resume.bridge.kit.chains import stage_chain
from pymc_resume.bridge.kit.preload import preloading
from pymc_resume.model.state import Checkpoint

try:
    from strands import Agent, tool
    from strands.hooks import BeforeToolCallEvent, HookProvider, HookRegistry
    from strands.models import Model
    from strands.session.file_session_manager import FileSessionManager
    from strands.types.tools import ToolContext
except ImportError as error:  # the registry reports it in one line, with the extra to install
    raise ImportError(
        f"strands-agents is not installed ({error}); pip install 'pymc-resume[strands]'"
    ) from None

# The variants' names: the agent called (`agent(prompt)`), or its events streamed
# (`agent.stream_async(prompt)`, consumed to the end).
CALL = "call"
STREAM = "stream-async"

HOOK = "hook"
TOOL = "tool"
INTERRUPTS = (HOOK, TOOL)

APP = "app"  # the agent-state key the model's state lives under
INPUT = "Run the workflow: call each stage's tool in order."
CONTINUE = "Continue."
AGENT_ID = "default"  # Strands' default agent id, the folder of the agent's files in a session

# The errors Strands raises to a client whose call it refuses: a response to an agent that is not
# in an interrupt state (ValueError), to an interrupt it does not hold (KeyError), or a prompt
# to an agent that waits for responses (TypeError).
REFUSAL_ERRORS = (ValueError, KeyError, TypeError)

FORK_UNSUPPORTED = (
    "Strands has no fork: the FileSessionManager keeps one agent record and one message log per "
    "session, written in place, with no earlier states to start from and no documented call that "
    "copies a session (Agent.take_snapshot / load_snapshot copy the in-memory agent at its head, "
    "and the immutable snapshots of SnapshotSessionManager belong to another store)"
)

DOCS = "https://strandsagents.com/docs/user-guide/concepts/"
INTERRUPT_DOCS = f"{DOCS}interrupts/"
SESSION_DOCS = f"{DOCS}agents/session-management/"
FRAMEWORK_CALLS = {
    "crash": "SIGKILL of the child process running the agent (around a tool's node code, or right after "
    "the FileSessionManager wrote a tool result message's file)",
}


class ScriptedModel(Model):
    """A `Model` that plays back the workflow's tool calls, deterministically and offline (the
    SDK's own tests drive an agent with such a `Model` subclass, `tests/fixtures/mocked_model_provider.py`).

    Each turn it calls the tool of the first stage that has no successful tool result in the
    conversation yet, under a fresh `toolUseId`, and answers with a final message once every stage
    has one. It reads only the messages the agent hands it, so a run restored from the session in
    another process is played back from what the framework kept."""

    def __init__(self, stages: int) -> None:
        self.stages = stages
        self.turns = 0

    def update_config(self, **model_config) -> None:
        """Nothing to configure."""

    def get_config(self) -> dict:
        return {}

    async def structured_output(self, output_model, prompt, system_prompt=None, **kwargs):
        raise NotImplementedError("the scripted model has no structured output")
        yield  # an async generator, as the interface requires

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
        # A bound on turns: a tool that keeps failing would otherwise be called forever.
        self.turns += 1
        if self.turns > 4 * (self.stages + 1):
            raise RuntimeError("the scripted model made more turns than the workflow has stages")
        done = {stage for stage, _ in _results(messages)}
        stage = next((s for s in range(self.stages) if s not in done), None)
        yield {"messageStart": {"role": "assistant"}}
        if stage is None:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": "done"}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        start = {"toolUse": {"name": f"s{stage}", "toolUseId": f"tooluse_{uuid.uuid4().hex}"}}
        yield {"contentBlockStart": {"start": start}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": "{}"}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


def _results(messages) -> list[tuple[int, tuple[int, ...]]]:
    """(stage, state after it) of every successful tool result among `messages`, in order."""
    found = []
    for message in messages:
        for content in message.get("content", []):
            result = content.get("toolResult")
            if result is None or result.get("status") != "success":
                continue
            output = json.loads(result["content"][0]["text"])
            found.append((output["stage"], tuple(output[APP])))
    return found


def _strands_version() -> str:
    from importlib.metadata import version

    return version("strands-agents")


class StrandsRefusal(Exception):
    """An error Strands raised to its client (see `REFUSAL_ERRORS`)."""


class StrandsAdapter(ChildProcessAdapter):
    name = "strands"
    # Imported once in the host template (none starts a thread at import).
    preload = preloading("strands", "strands.agent", "strands.session.file_session_manager")
    framework = "Strands Agents"
    # No lease (liveness is skipped); recorded inputs are the values the tool results record, and
    # a response the session's interrupt state holds for a stage not yet committed (a claim).
    capabilities = frozenset({"recorded-inputs", "executions"})
    refusals = (StrandsRefusal,)
    unsupported = {"fork": FORK_UNSUPPORTED}
    framework_calls = FRAMEWORK_CALLS
    effect_key = {
        "key": "none",
        "why": "Strands documents no idempotency key: a tool use's toolUseId is the id the model gave the "
        "call, not documented as an identity to deduplicate effects by",
    }

    def __init__(self, interrupt: str = HOOK) -> None:
        super().__init__()
        if interrupt not in INTERRUPTS:
            raise ValueError(f"interrupt must be one of {', '.join(INTERRUPTS)}, not {interrupt!r}")
        self.interrupt = interrupt
        self.version = f"strands-agents {_strands_version()}"
        # Strands logs a warning when it rebuilds a restored conversation whose tool uses and
        # results do not pair up (after a kill between them); the profile's output is the
        # bridge's, so only its errors get through. What it rebuilt is in memory only: the
        # observation reads the session's files.
        logging.getLogger("strands").setLevel(logging.ERROR)

    def options(self) -> dict:
        return {"interrupt": self.interrupt}

    @property
    def variants(self) -> tuple[Variant, ...]:
        """Every documented call, per operation."""
        agent = "Agent(model, tools, hooks, session_manager=FileSessionManager(session_id, storage_dir))"
        raised = (
            "event.interrupt(name, reason=...) in a BeforeToolCallEvent callback"
            if self.interrupt == HOOK
            else "tool_context.interrupt(name, reason=...) in the tool"
        )
        respond = 'agent([{"interruptResponse": {"interruptId": interrupt.id, "response": value}}])'
        stream = "agent.stream_async(...) consumed to its result event"
        streaming_docs = f"{DOCS}streaming/async-iterators/"
        recover = (
            f'{agent}("{CONTINUE}") when the session is not finished; a trailing toolUse gets an '
            "error toolResult"
        )
        return (
            Variant(
                "start",
                CALL,
                f"{agent}(prompt); {raised}; result.interrupts kept by the client",
                f"{INTERRUPT_DOCS} (Hooks; Tools); {SESSION_DOCS} (Basic Usage)",
            ),
            Variant("start", STREAM, f"as {CALL}, with {stream}", streaming_docs),
            Variant(
                "resume",
                CALL,
                f"{agent} in a new process; {respond} for each interrupt kept",
                f"{INTERRUPT_DOCS} (Hooks: the responses loop); strands.types.interrupt "
                "('Interrupts are session managed in-between return and user response')",
            ),
            Variant("resume", STREAM, f"as {CALL}, with {stream}", streaming_docs),
            Variant(
                "resume-together",
                CALL,
                f"k processes, each {agent}; {respond}",
                INTERRUPT_DOCS,
            ),
            Variant(
                "recover",
                CALL,
                recover,
                f"{SESSION_DOCS} (continue conversations where they left off); strands issue 1111",
            ),
            Variant("recover", STREAM, f"as {CALL}, with {stream}", streaming_docs),
            Variant(
                "update",
                "state-set",
                f"{agent}; agent.state.set('app', ...); session_manager.sync_agent(agent)",
                f"{DOCS}agents/state/ (Agent State); {SESSION_DOCS}",
            ),
        )

    def open(self, setup) -> None:
        super().open(setup)
        self.tools = [self._tool(s) for s in range(len(self.workflow.stages))]

    # -- the agent: its tools (the stages' node code), its hook, its session ------------------

    def _tool(self, stage: int):
        adapter, consumes = self, self.workflow.consumes[stage]
        by_tool = consumes and self.interrupt == TOOL

        def run(tool_context: ToolContext, value: int | None = None) -> str:
            if by_tool:
                value = tool_context.interrupt(f"s{stage}", reason={"stage": stage})
            state = tool_context.agent.state
            app = adapter.execute(stage, tuple(state.get(APP)), value if consumes else None, None)
            state.set(APP, list(app))
            return json.dumps({"stage": stage, APP: list(app)})

        kind = self.workflow.stages[stage].kind.name.lower()
        description = f"stage {stage} of the workflow ({kind})"
        return tool(name=f"s{stage}", description=description, context=True)(run)

    def _hooks(self) -> list:
        if self.interrupt != HOOK:
            return []
        consumes = self.workflow.consumes

        class ApprovalHook(HookProvider):
            """The docs' hook: an interrupt before the tool of every consuming stage."""

            def register_hooks(self, registry: HookRegistry, **kwargs) -> None:
                registry.add_callback(BeforeToolCallEvent, self.ask)

            def ask(self, event: BeforeToolCallEvent) -> None:
                stage = int(event.tool_use["name"][1:])
                if consumes[stage]:
                    value = event.interrupt(f"s{stage}", reason={"stage": stage})
                    event.tool_use = {**event.tool_use, "input": {"value": value}}

        return [ApprovalHook()]

    def _agent(self, thread: int):
        """The thread's agent, built on its session (the session restores what it holds)."""
        adapter = self

        class CommitReportingSession(FileSessionManager):
            """FileSessionManager, with the after-commit crash point right after a tool result
            message's file is written (before the agent record)."""

            def append_message(self, message, agent, **kwargs) -> None:
                super().append_message(message, agent, **kwargs)
                adapter.committed(*(stage for stage, _ in _results([message])))

        session = CommitReportingSession(session_id=f"t{thread}", storage_dir=str(self._sessions()))
        agent = Agent(
            model=ScriptedModel(len(self.workflow.stages)),
            tools=self.tools,
            hooks=self._hooks(),
            session_manager=session,
            callback_handler=None,
            state={APP: list(self.workflow.initial_state())},
        )
        return agent, session

    # -- the client hooks, in the child process --------------------------------------------

    def client_start(self, thread: int, variant: str | None = None) -> str:
        if self._agent_record(thread) is not None:
            return self.client_recover(thread, variant)
        agent, _ = self._agent(thread)
        return self._call(thread, agent, INPUT, variant)

    def client_resume(self, thread: int, value: int, variant: str | None = None) -> str:
        kept = self._kept_interrupts(thread)
        if not kept:
            raise Refusal("the client kept no interrupts for the thread (no call of it stopped for one)")
        agent, _ = self._agent(thread)
        self.loaded()
        responses = [{"interruptResponse": {"interruptId": i["id"], "response": value}} for i in kept]
        return self._call(thread, agent, responses, variant)

    def client_recover(self, thread: int, variant: str | None = None) -> str:
        if self._finished(self._messages(thread)):
            raise NoOp("the session ends with the agent's final message: nothing to continue")
        agent, _ = self._agent(thread)
        try:
            return self._call(thread, agent, CONTINUE, variant)
        except StrandsRefusal as refusal:
            if "interruptResponse" in str(refusal):
                raise NoOp(f"the session is parked at an interrupt ({refusal})") from None
            raise

    def _call(self, thread: int, agent, prompt, variant: str | None) -> str:
        """One call of the agent; the client keeps the interrupts it stops with, until the next
        call that stops with others (a response sent late is sent to the last ones it was shown,
        so that Strands, not the client, decides what a late response does)."""
        try:
            result = asyncio.run(_streamed(agent, prompt)) if variant == STREAM else agent(prompt)
        except REFUSAL_ERRORS as error:
            raise StrandsRefusal(f"{type(error).__name__}: {error}") from None
        interrupts = [{"id": i.id, "name": i.name} for i in (result.interrupts or [])]
        if interrupts:
            _write_atomically(self._kept_path(thread), json.dumps(interrupts))
        if result.stop_reason == "interrupt":
            return f"stopped for {', '.join(i['name'] for i in interrupts)}"
        return f"finished: {result.stop_reason}"

    # -- update, in the adapter's process ---------------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        """Not expressible (`unsupported`); refused in case a bridge still asks."""
        return Outcome(REFUSED, FORK_UNSUPPORTED, by=CLIENT)

    def update(self, thread: int, note: int) -> Outcome:
        if self._agent_record(thread) is None:
            return Outcome(REFUSED, "the thread has no session to update", by=CLIENT)
        agent, session = self._agent(thread)
        app = list(agent.state.get(APP))
        app[self.workflow.note] = note
        agent.state.set(APP, app)
        session.sync_agent(agent)
        return Outcome(OK, "updated")

    # -- reading the store (read-only) -------------------------------------------------------

    def _sessions(self) -> Path:
        return self.setup.workdir / "sessions"

    def _agent_dir(self, thread: int) -> Path:
        return self._sessions() / f"session_t{thread}" / "agents" / f"agent_{AGENT_ID}"

    def _kept_path(self, thread: int) -> Path:
        return self.setup.workdir / f"t{thread}.interrupts.json"

    def _kept_interrupts(self, thread: int) -> list[dict]:
        try:
            return json.loads(self._kept_path(thread).read_text())
        except FileNotFoundError:
            return []

    def _agent_record(self, thread: int) -> dict | None:
        try:
            return json.loads((self._agent_dir(thread) / "agent.json").read_text())
        except FileNotFoundError:
            return None

    def _messages(self, thread: int) -> list[dict]:
        """The session's messages, in order."""
        folder = self._agent_dir(thread) / "messages"
        if not folder.is_dir():
            return []
        files = sorted(folder.glob("message_*.json"), key=lambda path: int(path.stem.split("_")[1]))
        return [json.loads(path.read_text())["message"] for path in files]

    @staticmethod
    def _finished(messages: list[dict]) -> bool:
        if not messages or messages[-1]["role"] != "assistant":
            return False
        return not any("toolUse" in content for content in messages[-1]["content"])

    def _claims(self, record: dict | None, committed: set[int]) -> dict[int, int]:
        """Responses the session's interrupt state holds for consuming stages not yet committed."""
        interrupt_state = ((record or {}).get("_internal_state") or {}).get("interrupt_state") or {}
        if not interrupt_state.get("activated"):
            return {}
        claims = {}
        for interrupt in (interrupt_state.get("interrupts") or {}).values():
            stage = int(interrupt["name"][1:])
            if interrupt.get("response") is not None and stage not in committed:
                claims[stage] = interrupt["response"]
        return claims

    def _chain(self, results: list[tuple[int, tuple[int, ...]]], note: int | None) -> list[Checkpoint]:
        """The model's chain: a checkpoint per tool result (committing its stage), and a client
        update where the note changed (the agent record, which only updates write, holds the last)."""
        return stage_chain(self.workflow, results, note)

    def observe(self) -> Observation:
        views = []
        workflow = self.workflow
        for t, memory in enumerate(self.threads):
            record = self._agent_record(t)
            note = None
            if record is not None:
                note = (record.get("state") or {}).get(APP, workflow.initial_state())[workflow.note]
            chain = self._chain(_results(self._messages(t)), note)
            inputs = {
                c.stage: c.app[workflow.stages[c.stage].node]
                for c in chain
                if c.stage >= 0 and workflow.consumes[c.stage]
            }
            committed = {c.stage for c in chain if c.stage >= 0}
            inputs = {**self._claims(record, committed), **inputs}
            views.append(ThreadView(tuple(chain), memory["run"], inputs))
        return Observation(tuple(views))


async def _streamed(agent, prompt):
    """`agent.stream_async(prompt)` consumed to the end: its last event carries the result."""
    result = None
    async for event in agent.stream_async(prompt):
        result = event.get("result", result)
    return result


def _write_atomically(path: Path, text: str) -> None:
    """The client's own record (the interrupts it was handed): a temporary file of this
    process's own, synced, renamed over the thread's file (k concurrent deliveries each write one)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
