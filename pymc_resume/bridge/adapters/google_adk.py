"""The bridge adapter for Google ADK (`google-adk` 2.x): a resumable `App`
(`ResumabilityConfig(is_resumable=True)`) whose root `LlmAgent` calls one `FunctionTool` per
stage of the model, its sessions in ADK's `DatabaseSessionService` (SQLite through aiosqlite in
the example's workdir, or PostgreSQL through psycopg), human input through tool confirmation.

The agent's model is `ScriptedModel`, a `BaseLlm` that plays back tool calls with no network
and no LLM: on every turn it calls the first stage tool (`s0`, `s1`, ...) whose result is not in
the conversation yet, and answers "done" when every stage tool has answered. It decides from
the request alone, so a fresh process that resumes the invocation gets the same calls. The tool
call ids are ADK's own (`adk-<uuid>`, given when the model's call has none).

Every stage of the model is one tool, `s{stage}`, whose function runs the stage's node code on
the session state and writes the fields that changed through `tool_context.state` (so the tool's
function-response event carries them as its `state_delta`). A consuming stage (interrupt, gated,
the second stage of an effect-then-interrupt node) is a `FunctionTool(..., require_confirmation=
True)`: ADK answers the model's call with a confirmation request (an `adk_request_confirmation`
function call, a long-running call that pauses the invocation) and runs the function only when
the client confirms; the resume value travels as the confirmation's payload
(`{"confirmed": true, "payload": v}`) and the tool reads it from `tool_context.tool_confirmation`.

The session's event log is the durable store; the model's chain is read from it: the initial
checkpoint is the session as created, each stage tool's function-response event commits that
stage (with the state after it), and a client's state-delta event is an update. A consuming
stage's recorded input is the payload of the first confirmation response the session holds for
its tool call (a claim, until the tool's result is stored); every later response for it is a
late input (ADK appends each to the session, and a recovered invocation runs an uncommitted tool
with the last one). A thread is parked only while its head's tool has a confirmation request
with no response: a resume answers it. One that stopped short of the end with none (an
invocation a second confirmation ended before the next tool was called) is shown `dead`, work
no process is doing; the drain's recovery (`run_async(invocation_id=...)`) then shows whether
ADK can finish it (`stuck-runs`).

How the contract's operations map (docs/google-adk.md says more):

- start: `session_service.create_session(..., state=initial)`, then
  `runner.run_async(user_id, session_id, new_message=Content("run"))` in a fresh process;
- resume(v): `runner.run_async(user_id, session_id, invocation_id=inv, new_message=Content(parts=
  [FunctionResponse(id=confirmation_call_id, name="adk_request_confirmation", response={"confirmed":
  True, "payload": v})]))` in a fresh process, answering the confirmation the thread's head waits
  on (or, when it waits on none, the last one the thread asked: ADK decides);
- recover: `runner.run_async(user_id, session_id, invocation_id=inv)` in a fresh process;
- update(note): `session_service.append_event(session, Event(author="user", actions=
  EventActions(state_delta={"note": v})))`, the way ADK's state page updates state from outside;
- fork: not expressible (see `unsupported`).

Crash points are real SIGKILLs of the child process: before or after a stage's node code (in the
tool), or right after `DatabaseSessionService.append_event` stored the tool's function-response
event (a wrapper around that method).

Effects are unkeyed. ADK documents no idempotency key: its resume page says "the Resume feature
ensures that the Tools in an agent are run *at least once*, and may run more than once when
resuming a workflow. If your agent uses Tools where duplicate runs would have a negative impact,
such as purchases, you should modify the Tool to check for and prevent duplicate runs"
(adk-docs runtime/resume.md, "Caution: Tool execution behavior"), and names no identity to check
with. `tool_context.function_call_id` survives a resume, but ADK does not document it as one.
"""

import asyncio
import logging
import os
import uuid
import warnings
from collections.abc import AsyncGenerator
from typing import NamedTuple

from pymc_resume.bridge.adapter import (
    FRAMEWORK,
    NOT_EXPRESSIBLE,
    OK,
    REFUSED,
    Observation,
    Outcome,
    ThreadView,
    Variant,
)
from pymc_resume.bridge.kit import ChildProcessAdapter, Refusal
from pymc_resume.bridge.kit.postgres import (
    create_schema,
    drop_schema,
    postgres_url,
    schema_of,
    sqlalchemy_url,
    sweep_schemas,
)
from pymc_resume.bridge.kit.preload import preloading
from pymc_resume.model.state import INITIAL, UPDATE, Checkpoint

try:
    from google.adk.agents import LlmAgent
    from google.adk.apps import App, ResumabilityConfig
    from google.adk.events import Event, EventActions
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.adk.sessions import DatabaseSessionService
    from google.adk.tools import FunctionTool, ToolContext
    from google.genai import types
except ImportError as error:  # the registry reports it in one line, with the extra to install
    raise ImportError(
        f"google-adk (with its db extra) is not installed ({error}); pip install 'pymc-resume[google-adk]'"
    ) from None

APP_NAME = "fuzz"
START_MESSAGE = "run"
CONFIRMATION = "adk_request_confirmation"  # the function call ADK asks a confirmation with
STORES = ("sqlite", "postgres")
SCHEMA_TAG = "adk"  # a PostgreSQL example's schema: `kit.postgres.schema_of(workdir, SCHEMA_TAG)`
NOTE = "note"

FORK_UNSUPPORTED = (
    "ADK's only call that takes a session back is Runner.rewind_async(rewind_before_invocation_id=...), "
    "which undoes whole invocations in place: the session goes on from before the rewound invocation "
    "and the rewound events are kept but ignored, so it makes no thread beside its parent, the parent "
    "cannot be continued, and a second rewind of the same point undoes the first; and the workflow is "
    "one invocation (every confirmation resumes it), so the only point rewind reaches is the thread's "
    "start, before any input to replay or replace"
)

FRAMEWORK_CALLS = {
    "start": "App(root_agent=LlmAgent(model=ScriptedModel(), tools=[FunctionTool(s0), ...]), "
    "resumability_config=ResumabilityConfig(is_resumable=True)); "
    "session_service.create_session(app_name, user_id, session_id, state=initial); "
    "Runner(app=app, session_service=DatabaseSessionService(db_url)).run_async(user_id, session_id, "
    "new_message=Content('run'))",
    "resume": "runner.run_async(user_id, session_id, invocation_id=inv, new_message=Content(parts=["
    "FunctionResponse(id=confirmation_call_id, name='adk_request_confirmation', "
    "response={'confirmed': True, 'payload': v})])) on a fresh runner in a fresh process",
    "resume-together": "k processes, each runner.run_async(..., invocation_id=inv, "
    "new_message=<the confirmation's FunctionResponse>)",
    "crash": "SIGKILL of the child process running runner.run_async (around a tool's node code, or right "
    "after DatabaseSessionService.append_event stored the tool's function response)",
    "recover": "runner.run_async(user_id, session_id, invocation_id=inv) on a fresh runner in a fresh "
    "process",
    "update": "session_service.append_event(session, Event(author='user', invocation_id=new_id, "
    "actions=EventActions(state_delta={'note': v})))",
}

# Where each call is documented (adk-docs), for docs/google-adk.md and the operation variants.
FRAMEWORK_DOCS = {
    "start": "adk-docs runtime/resume.md (Add resumable configuration); sessions/session/index.md "
    "(DatabaseSessionService)",
    "resume": "adk-docs tools-custom/confirmation.md (Remote confirmation with REST API, the note "
    "'Confirmation with Resume feature'); runtime/resume.md (Resume a stopped workflow)",
    "resume-together": "as resume",
    "recover": "adk-docs runtime/resume.md (Resume a stopped workflow: run_async with invocation_id)",
    "update": "adk-docs sessions/state.md (The Standard Way: EventActions.state_delta, append_event)",
}


VARIANT_NAMES = {
    "start": "run-async",
    "resume": "confirm-with-invocation-id",
    "resume-together": "confirm-with-invocation-id",
    "recover": "run-async-with-invocation-id",
    "update": "append-state-delta",
}


def _quiet() -> None:
    """ADK warns that ResumabilityConfig is experimental and logs every model call that reports
    no token usage (the scripted model reports none): neither is news here."""
    warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")
    logging.getLogger("google_adk").setLevel(logging.ERROR)


class AdkRefusal(Exception):
    """An error Google ADK raised to its client (classified by where it was raised)."""


def _adk_version() -> str:
    from importlib.metadata import version

    return version("google-adk")


class ScriptedModel(BaseLlm):
    """A model with no network and no LLM: it calls the first stage tool whose result the
    conversation lacks, or answers "done" (see the module docstring)."""

    model: str = "scripted"
    tools: tuple[str, ...] = ()

    async def generate_content_async(self, llm_request, stream: bool = False) -> AsyncGenerator:
        answered = {
            part.function_response.name
            for content in llm_request.contents
            for part in content.parts or []
            if part.function_response is not None and _is_result(part.function_response.response)
        }
        for name in self.tools:
            if name not in answered:
                call = types.FunctionCall(name=name, args={})
                yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
                return
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="done")]))


def _is_result(response) -> bool:
    """Whether a stage tool's function response is its result (not ADK's confirmation notice)."""
    return isinstance(response, dict) and "stage" in response


class SessionReading(NamedTuple):
    """One session's events in the model's words (see `GoogleAdkAdapter._read`)."""

    chain: list[Checkpoint]
    inputs: dict[int, int]  # stage -> the payload of the first confirmation response for it
    late: tuple[tuple[int, int], ...]  # (stage, payload) of every later response for it
    waiting: bool  # the head's tool has a confirmation request with no response yet


class GoogleAdkAdapter(ChildProcessAdapter):
    name = "google-adk"
    # Imported once in the host template (none starts a thread at import).
    preload = preloading(
        "google.adk.runners", "google.adk.sessions", "sqlalchemy.pool", "aiosqlite", "psycopg"
    )
    framework = "Google ADK"
    # Recorded inputs are the first confirmation response per tool, late inputs every later one
    # (ADK appends each to the session); no lease, but a thread is shown parked only while its
    # head's tool has a confirmation request unanswered, which a resume answers (stuck-runs).
    capabilities = frozenset({"recorded-inputs", "executions", "late-inputs", "stuck-runs"})
    refusals = (AdkRefusal,)
    unsupported = {"fork": FORK_UNSUPPORTED}
    framework_calls = FRAMEWORK_CALLS
    # One documented call per operation (docs/google-adk.md says which others are not variants).
    variants = tuple(
        Variant(op, name, FRAMEWORK_CALLS[op], FRAMEWORK_DOCS[op]) for op, name in VARIANT_NAMES.items()
    )
    effect_key = {
        "key": "none",
        "why": "ADK documents no idempotency key: its resume page says tools run at least once and asks "
        "the tool to prevent duplicate runs itself (adk-docs runtime/resume.md)",
    }

    def __init__(self, store: str = "sqlite") -> None:
        super().__init__()
        if store not in STORES:
            raise ValueError(f"store must be one of {', '.join(STORES)}, not {store!r}")
        self.store = store
        self.version = f"google-adk {_adk_version()}"
        self._own_service = self._own_loop = None  # see `_own`
        self.schema: str | None = None
        self.server = ""  # PostgreSQL: the server's URL, as it was when the example opened

    def options(self) -> dict:
        return {"store": self.store}

    def open(self, setup) -> None:
        super().open(setup)
        # One user per example, so that examples on one PostgreSQL database never meet.
        self.user = f"u-{uuid.uuid4().hex[:12]}"
        if self.store == "sqlite":
            self.db_url = f"sqlite+aiosqlite:///{setup.workdir / 'sessions.db'}"
        else:
            # The example's own schema, as the only search path of the service's connections
            # (libpq's `options`, in the URL SQLAlchemy hands psycopg): ADK creates its tables
            # there (`prepare_tables`), and `close` drops them all with the schema.
            self.server = server = postgres_url()  # the one `close` drops the schema on
            sweep_schemas(server, setup.workdir.parent)  # a killed bridge's examples closed nothing
            self.schema = schema_of(setup.workdir, SCHEMA_TAG)
            create_schema(server, self.schema)
            self.db_url = sqlalchemy_url(server, self.schema)
        self._own(lambda service: service.prepare_tables())

    # -- the app (built in each child process) ---------------------------------------------

    def _service(self):
        """The framework's database session service, in a client operation's child process: the
        one this example's adapter prepared (`open`), inherited through the fork so that a child
        does not check the tables again (0.1 s on SQLite, 0.4 s on PostgreSQL per operation),
        with its `append_event` wrapped: right after a stage tool's function response is stored,
        the after-commit crash point of that stage."""
        service, adapter = self._own_service, self
        store = service.append_event

        async def append_event(session, event):
            stored = await store(session, event)
            for part in event.content.parts if event.content else []:
                response = part.function_response
                if response is not None and _is_result(response.response):
                    adapter.committed(int(response.response["stage"]))
            return stored

        service.append_event = append_event  # this child's copy of the service only
        return service

    def _app(self) -> App:
        stages = range(len(self.workflow.stages))
        tools = [
            FunctionTool(self._tool(stage), require_confirmation=self.workflow.consumes[stage])
            for stage in stages
        ]
        model = ScriptedModel(tools=tuple(f"s{stage}" for stage in stages))
        agent = LlmAgent(name="fuzz", model=model, instruction="Call the tools in order.", tools=tools)
        return App(name=APP_NAME, root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True))

    def _tool(self, stage: int):
        adapter, consumes = self, self.workflow.consumes[stage]

        def tool(tool_context: ToolContext) -> dict:
            before = adapter._app_state(tool_context.state.to_dict())
            confirmation = tool_context.tool_confirmation
            value = confirmation.payload if consumes and confirmation is not None else None
            after = adapter.execute(stage, before, value, None)  # unkeyed: see the module docstring
            for field, (old, new) in enumerate(zip(before, after)):
                if new != old:
                    tool_context.state[adapter._key(field)] = new
            return {"stage": stage}

        tool.__name__ = f"s{stage}"
        tool.__doc__ = f"Stage {stage} of the workflow."
        return tool

    def _key(self, field: int) -> str:
        return NOTE if field == self.workflow.note else f"n{field}"

    def _app_state(self, state: dict) -> tuple[int, ...]:
        initial = self.workflow.initial_state()
        return tuple(state.get(self._key(field), initial[field]) for field in range(len(initial)))

    def _initial(self) -> dict:
        return {self._key(field): value for field, value in enumerate(self.workflow.initial_state())}

    # -- the client hooks, in the child process --------------------------------------------

    def client_start(self, thread: int) -> str:
        async def start():
            service = self._service()
            session = await self._session(service, thread)
            if session is None:
                await service.create_session(
                    app_name=APP_NAME, user_id=self.user, session_id=self._sid(thread), state=self._initial()
                )
            elif _run_invocation(session) is not None:  # a start killed after its message was stored
                return await self._drive(service, thread, invocation_id=_run_invocation(session))
            message = types.Content(role="user", parts=[types.Part(text=START_MESSAGE)])
            return await self._drive(service, thread, new_message=message)

        return self._framework(start)

    def client_resume(self, thread: int, value: int) -> str:
        async def resume():
            service = self._service()
            session = await self._session(service, thread)
            if session is None or _run_invocation(session) is None:
                raise Refusal("the thread has no invocation to resume")
            request = _confirmation_to_answer(session, self._head(session))
            if request is None:
                raise Refusal("the thread never asked for a confirmation")
            invocation, call_id = request
            answer = types.FunctionResponse(
                id=call_id, name=CONFIRMATION, response={"confirmed": True, "payload": value}
            )
            self.loaded()  # run_async loads the session and appends the response in one call
            message = types.Content(role="user", parts=[types.Part(function_response=answer)])
            return await self._drive(service, thread, invocation_id=invocation, new_message=message)

        return self._framework(resume)

    def client_recover(self, thread: int) -> str:
        return self.client_start(thread)

    async def _drive(self, service, thread: int, **arguments) -> str:
        """One `runner.run_async` on a fresh runner, read to its end."""
        runner = Runner(app=self._app(), session_service=service)
        last = None
        async for event in runner.run_async(user_id=self.user, session_id=self._sid(thread), **arguments):
            last = event
        return f"ran to {last.id if last is not None else 'no event'}"

    def _framework(self, call) -> str:
        try:
            return asyncio.run(call())
        except Refusal:
            raise
        except Exception as error:
            if _from_adk(error):
                raise AdkRefusal(f"{type(error).__name__}: {error}") from None
            raise

    # -- update, in the adapter's process ---------------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        """Not expressible (`unsupported`); refused in case a bridge still asks."""
        return Outcome(REFUSED, FORK_UNSUPPORTED, by=NOT_EXPRESSIBLE)

    def update(self, thread: int, note: int) -> Outcome:
        async def update(service):
            session = await self._session(service, thread)
            if session is None:
                return Outcome(REFUSED, "the thread has no session to update")
            event = Event(
                author="user",
                invocation_id=f"e-{uuid.uuid4()}",
                actions=EventActions(state_delta={NOTE: note}),
            )
            await service.append_event(session, event)
            return Outcome(OK, "updated")

        try:
            return self._own(update)
        except Exception as error:
            if _from_adk(error):
                return Outcome(REFUSED, f"{type(error).__name__}: {error}", by=FRAMEWORK)
            raise

    # -- reading the sessions (read-only, through the service's get_session) -----------------

    def _sid(self, thread: int) -> str:
        return f"t{thread}"

    async def _session(self, service, thread: int):
        return await service.get_session(app_name=APP_NAME, user_id=self.user, session_id=self._sid(thread))

    def _head(self, session) -> int:
        return self._read(session).chain[-1].pc

    def _read(self, session) -> "SessionReading":
        """The model's chain, recorded inputs, late inputs and whether the head waits on a
        confirmation, for one session's events."""
        state = dict(self._initial())
        chain = [Checkpoint(0, self._app_state(state), INITIAL)]
        inputs: dict[int, int] = {}
        late: list[tuple[int, int]] = []
        requests: dict[str, int] = {}  # confirmation call id -> the stage it asks for
        answered: set[str] = set()
        for event in session.events:
            state.update(event.actions.state_delta or {})
            for part in event.content.parts if event.content else []:
                call, response = part.function_call, part.function_response
                if call is not None and call.name == CONFIRMATION:
                    original = (call.args or {}).get("originalFunctionCall") or {}
                    requests[call.id] = int(str(original.get("name", "s-1"))[1:])
                elif response is not None and response.name == CONFIRMATION and response.id in requests:
                    answered.add(response.id)
                    payload = (response.response or {}).get("payload")
                    if isinstance(payload, int):
                        stage = requests[response.id]
                        if stage in inputs:  # ADK appends every later response to the session
                            late.append((stage, payload))
                        else:
                            inputs[stage] = payload
                elif response is not None and _is_result(response.response):
                    stage = int(response.response["stage"])
                    chain.append(Checkpoint(stage + 1, self._app_state(state), stage))
            if event.author == "user" and event.content is None and NOTE in (event.actions.state_delta or {}):
                chain.append(Checkpoint(chain[-1].pc, self._app_state(state), UPDATE))
        head = chain[-1].pc
        waiting = any(stage == head and call not in answered for call, stage in requests.items())
        return SessionReading(chain, inputs, tuple(late), waiting)

    def _own(self, work):
        """Run `work(service)` in the adapter's own process, on one event loop and one session
        service kept for the example (its tables checked once). The service's engine keeps no
        connection between calls (`NullPool`), so the child processes forked for operations
        inherit none."""
        if self._own_service is None:
            from sqlalchemy.pool import NullPool

            self._own_loop = asyncio.new_event_loop()
            self._own_service = DatabaseSessionService(db_url=self.db_url, poolclass=NullPool)
        return self._own_loop.run_until_complete(work(self._own_service))

    def close(self) -> None:
        try:
            if self._own_service is not None:
                self._own_loop.run_until_complete(self._own_service.close())
                self._own_loop.close()
        finally:
            self._own_service = self._own_loop = None
            if self.schema is not None:  # the shared database keeps nothing of the example
                drop_schema(self.server, self.schema)
                self.schema = None
            super().close()

    def observe(self) -> Observation:
        async def read(service):
            return [await self._session(service, t) for t in range(len(self.threads))]

        views = []
        for memory, session in zip(self.threads, self._own(read)):
            if session is None:
                initial = Checkpoint(0, self.workflow.initial_state(), INITIAL)
                views.append(ThreadView((initial,), memory["run"], {}))
                continue
            reading = self._read(session)
            run = memory["run"]
            if run == "free" and reading.chain[-1].pc != self.workflow.end and not reading.waiting:
                # Stopped short of the end with no confirmation asked for the head's tool: the
                # invocation's work is left undone with no process doing it (stuck-runs).
                run = "dead"
            views.append(ThreadView(tuple(reading.chain), run, reading.inputs, reading.late))
        return Observation(tuple(views))


def _run_invocation(session) -> str | None:
    """The invocation the client's start message began (the thread's one run), if stored."""
    for event in session.events:
        if (
            event.author == "user"
            and event.content is not None
            and any(p.text for p in event.content.parts or [])
        ):
            return event.invocation_id
    return None


def _confirmation_to_answer(session, head: int) -> tuple[str, str] | None:
    """(invocation id, call id) of the confirmation the head waits on: the last one asked for
    the head's stage tool, else the last one the thread asked."""
    asked = []
    for event in session.events:
        for part in event.content.parts if event.content else []:
            call = part.function_call
            if call is not None and call.name == CONFIRMATION:
                original = (call.args or {}).get("originalFunctionCall") or {}
                asked.append((event.invocation_id, call.id, original.get("name")))
    waiting = [(invocation, call) for invocation, call, name in asked if name == f"s{head}"]
    if waiting:
        return waiting[-1]
    return (asked[-1][0], asked[-1][1]) if asked else None


def _from_adk(error: BaseException) -> bool:
    """Whether Google ADK raised `error` to its client: the innermost frame of google.adk or
    pymc_resume on its traceback is ADK's (its session service's store errors included)."""
    innermost = None
    tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if f"{os.sep}google{os.sep}adk{os.sep}" in filename:
            innermost = "adk"
        elif f"{os.sep}pymc_resume{os.sep}" in filename:
            innermost = "pymc_resume"
        tb = tb.tb_next
    return innermost == "adk"


def _warm_up() -> None:
    """Run one invocation of a tool-less agent in memory, once per process that imports this
    module: ADK imports some 550 modules lazily on its first run (0.8 s), and every client
    operation runs in a child process forked from here, which then finds them loaded."""
    from google.adk.sessions import InMemorySessionService

    async def run() -> None:
        service = InMemorySessionService()
        agent = LlmAgent(name="warm", model=ScriptedModel(), instruction="Answer.", tools=[])
        app = App(name="warm", root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True))
        await service.create_session(app_name="warm", user_id="u", session_id="s")
        message = types.Content(role="user", parts=[types.Part(text=START_MESSAGE)])
        async for _ in Runner(app=app, session_service=service).run_async(
            user_id="u", session_id="s", new_message=message
        ):
            pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        asyncio.run(run())


_quiet()
_warm_up()


class GoogleAdkPostgres(GoogleAdkAdapter):
    """`DatabaseSessionService` on the PostgreSQL server at `PYMC_RESUME_POSTGRES_URL`."""

    def __init__(self, store: str = "postgres") -> None:
        super().__init__(store)
