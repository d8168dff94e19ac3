"""The bridge adapter for CrewAI Flows: a real `Flow` whose state CrewAI's own `@persist`
writes to a real `SQLiteFlowPersistence` file in the example's working directory.

The fuzzing workflow becomes a linear Flow, one method per stage of the model, each
`@listen`-ing to the one before it (the first is the `@start`). A consuming stage is two
methods: `ask<s>`, decorated with CrewAI's `@human_feedback` and an async provider that pauses
the flow (`HumanFeedbackPending`, the documented way to wait for a human without an LLM), then
`s<s>`, which takes the value from `self.last_human_feedback` and runs the stage. Node code is
the bridge's `run_node`; an effect-then-interrupt node is its effect method, then the pair.
With `effect_then_interrupt="one-method"` (the `sqlite/persist+one-method` configuration) it is
CrewAI's own "produce, then ask a human" pattern instead: one method, `notify<e>`, decorated with
`@human_feedback`, whose body runs the effect stage e and returns what the human is asked about,
so that CrewAI pauses after the body ran; then `s<e+1>`, which takes the value. CrewAI keeps the
body's output in the pending feedback and does not run the body again on resume.

The state schema is a `FlowState` subclass with one `int` field per node (and `note`), each
declared `>= 0` with Pydantic's `Field(ge=0)`, the way a CrewAI user declares a structured state.
By default it is CrewAI's state as it comes: `FlowState` does not validate assignments, so what
CrewAI itself does with a schema-invalid value a method writes is what is observed.
`validate_assignment=True` (the `sqlite/persist+validated` configuration) switches Pydantic's
`validate_assignment` on: that validation is the adapter's, not CrewAI's, and every refusal it
causes says so.

What each operation is in CrewAI (`FRAMEWORK_CALLS`; every one that runs methods runs in a
forked child process, which a crash point SIGKILLs: before or after a stage method's code, or
right after CrewAI's `save_state` of the method's completion, hooked by subclassing
`SQLiteFlowPersistence`; for the effect in a `notify<e>` body, right after CrewAI's
`save_pending_feedback` of its pause, hooked the same way):

- start: `kickoff(inputs={"id": <thread's flow id>})` on a fresh flow instance;
- resume: `Flow.from_pending(id, persistence).resume(str(v))`;
- recover: `kickoff(inputs={"id": id})` again, CrewAI's documented way to restore a `@persist`
  flow ("resume: writes land under the supplied id, extending the same flow_uuid history");
- fork: `kickoff(restore_from_state_id=<parent's flow id>)`, CrewAI's documented fork, which
  hydrates a new flow from the parent's latest snapshot and runs it at once: a replay fork from
  the parent's head is expressible, a fork from an earlier checkpoint or with a new input is
  not (refused with the reason, `FORK_NOT_EXPRESSIBLE`);
- update: not expressible (see `UNSUPPORTED`).

Refusals: an operation is `refused` by CrewAI only when CrewAI raised the exception, told by
where it was raised (`raised_by`: the innermost frame of its traceback in CrewAI's modules or
in ours). A refusal by the adapter's own rule (its validation, a fork CrewAI cannot express)
says that the rule is the adapter's. Any other exception is a bug and stops the run.

What CrewAI gives and what it does not:

- keys: CrewAI documents no idempotency key (neither its Flows nor its persistence pages name
  one) and hands method code no identity of the execution that survives re-execution (its
  event ids are new per execution), so effects go to the sink without a key.
- recorded inputs: CrewAI records a consumed value only in the state its taking method
  writes; it records no claim (the `pending_feedback` row holds the question, not an answer),
  so the inputs are exactly the values in the committed checkpoints.
- no leases: nothing in the store tells a live run from a crashed one; the `dead` run state
  is the adapter's own memory that it killed the thread's last process (so the bridge
  recovers it), not something CrewAI stores. `liveness` comes out skipped.
- observation reads CrewAI's `flow_states` table (read-only): one row per persisted method
  completion, oldest first. A row of a stage method `s<k>` is a commit of stage k; rows of
  `ask<k>` (written when the flow pauses and when a resume completes the feedback step) carry no
  stage and are not commits. A `notify<e>` method has the same two rows: its pause row (written
  by `save_pending_feedback` once its body ran) is the commit of effect stage e, its completion
  row (written when a resume completes the feedback step) commits nothing. The two rows look
  alike in the store (same method name, same state), so the adapter tells them by the call that
  wrote them: a delivery (`from_pending(...).resume`) writes completions of the method it
  resumes and never a pause of it, a kickoff writes pauses and never a completion (its provider
  always pauses). CrewAI writes no row before the first method: a root thread's chain starts
  with the initial state. A fork's chain is its parent's chain up to the snapshot it was
  hydrated from (CrewAI's store keeps no link between them: the adapter remembers the call it
  made), then the fork's own rows. Its recorded inputs are read from its own rows only, never
  from the parent's: a value the parent consumed is the fork's only if the fork recorded it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import sqlite3
import tempfile
import types
import uuid
from pathlib import Path

from pymc_resume.bridge.adapter import (
    CLIENT,
    FRAMEWORK,
    OK,
    REFUSED,
    CrashPoint,
    FuzzSetup,
    Observation,
    Outcome,
    ThreadView,
)
from pymc_resume.bridge.adapter.nodes import NodeContext
from pymc_resume.bridge.kit.process import Barrier, ClientControl, run_in_children, settle
from pymc_resume.model.state import INITIAL, Checkpoint
from pymc_resume.model.workflow import NodeKind, StageKind, Workflow

# Set before CrewAI is imported and inherited by every child: no telemetry, no tracing, no
# version check. (An audit with socket.connect and getaddrinfo patched to record every call
# saw no connection attempt from a flow run with these set; see docs/crewai.md.)
OFFLINE = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_DISABLE_VERSION_CHECK": "true",
}

# Contract operation -> the public CrewAI call the adapter performs it with.
FRAMEWORK_CALLS = {
    "start": 'FuzzFlow().kickoff(inputs={"id": <new flow id>}), @persist(SQLiteFlowPersistence) on the class',
    "resume": "FuzzFlow.from_pending(<flow id>, persistence).resume(str(v)); the pause: @human_feedback("
    "provider=...) whose provider raises HumanFeedbackPending",
    "resume-together": "k processes, each FuzzFlow.from_pending(<flow id>, persistence).resume(str(v))",
    "crash": "SIGKILL of the client process (os.kill(os.getpid(), SIGKILL)) in a flow method before or "
    "after its code, or once SQLiteFlowPersistence.save_state of its completion returned",
    "recover": 'FuzzFlow().kickoff(inputs={"id": <flow id>}) (the documented @persist resume)',
    "fork": "FuzzFlow().kickoff(restore_from_state_id=<parent flow id>): from the parent's head, "
    "intent replay",
}

# What the one-method configuration adds to the calls of `start` and `crash` (its operation table).
ONE_METHOD_CALLS = {
    "start": "; an effect-then-interrupt node is one @human_feedback method whose body fires the effect",
    "crash": "; for the effect fired in a @human_feedback method's body, once "
    "SQLiteFlowPersistence.save_pending_feedback of its pause returned",
}

# How an effect-then-interrupt node is built: its effect method, then the feedback method and the
# method that takes the value (two methods before the value); or one @human_feedback method whose
# body fires the effect (CrewAI's "produce, then ask a human"), then the method that takes the value.
EFFECT_THEN_INTERRUPT = ("two-methods", "one-method")

UNSUPPORTED = {
    "update": "CrewAI has no client call that writes a flow's persisted state without running it: "
    "kickoff inputs are applied only as the flow starts over, and "
    "FlowPersistence.save_state is the engine's own write",
}

# Why a fork is not expressible, by what was asked: CrewAI's fork is kickoff(restore_from_state_id=...).
FORK_NOT_EXPRESSIBLE = {
    "checkpoint": "restore_from_state_id hydrates from the source flow's latest snapshot only, so a fork "
    "starts from the head, never from an earlier checkpoint",
    "edit": "restore_from_state_id takes no new input for an interrupt the source flow consumed (the "
    "fork only copies the state; an edit fork starts at an interrupt before the head)",
}

DB_NAME = "crewai_flows.db"
NOT_EXPRESSIBLE = "not expressible in CrewAI"
ADAPTER_RULE = "refused by the adapter's validation (validate_assignment, not CrewAI's default)"


def switch_off_telemetry() -> None:
    """Set `OFFLINE` in this process's environment (before CrewAI is imported)."""
    os.environ.update(OFFLINE)


def _crewai_version() -> str:
    from importlib.metadata import version

    return version("crewai")


def _field(node: int) -> str:
    return f"n{node}"


def _stage_method_name(stage: int) -> str:
    return f"s{stage}"


def _ask_method_name(stage: int) -> str:
    return f"ask{stage}"


def _notify_method_name(effect_stage: int) -> str:
    return f"notify{effect_stage}"


def _committed_stage(method_name: str) -> int | None:
    """The stage a persisted method completion commits, or None for a feedback step."""
    if method_name.startswith("s") and method_name[1:].isdigit():
        return int(method_name[1:])
    return None


def _paused_stage(method_name: str) -> int | None:
    """The stage a persisted pause of a feedback method commits: the effect stage a `notify<e>`
    body ran before CrewAI paused; None for an `ask<s>` pause (its body runs no stage)."""
    prefix = "notify"
    if method_name.startswith(prefix) and method_name[len(prefix) :].isdigit():
        return int(method_name[len(prefix) :])
    return None


def _fires_then_asks(workflow: Workflow, s: int) -> bool:
    """Whether stage `s` is the effect stage of an effect-then-interrupt node (its wait follows)."""
    if not 0 <= s < len(workflow.stages):
        return False
    stage = workflow.stages[s]
    return stage.kind is StageKind.EFFECT and workflow.nodes[stage.node] is NodeKind.EFFECT_THEN_INTERRUPT


# The control of the operation this child process runs (set in the child only, once per process).
_CONTROL: ClientControl | None = None


class AdapterValidationRefused(Exception):
    """The adapter's own validation (`validate_assignment`) refused a value a method assigned:
    a refusal by the adapter's rule, never counted as CrewAI's."""

    def __init__(self, stage: int, value: int, node_output: bool) -> None:
        what = "node output" if node_output else "resume value"
        super().__init__(f"{ADAPTER_RULE}: {what} {value} at stage {stage}")
        self.node_output = node_output


def raised_by(error: BaseException) -> str | None:
    """Whose code raised `error`: "crewai" or "adapter" (pymc_resume), by the innermost frame of
    its traceback in either (frames of libraries they call, such as Pydantic, are skipped), or
    None when neither appears."""
    owner = None
    tb = error.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module == "crewai" or module.startswith("crewai."):
            owner = "crewai"
        elif module == "pymc_resume" or module.startswith("pymc_resume."):
            owner = "adapter"
        tb = tb.tb_next
    return owner


@functools.cache
def _crewai():
    """CrewAI's classes the adapter uses, imported once telemetry is off."""
    switch_off_telemetry()
    from crewai.flow import HumanFeedbackPending, HumanFeedbackProvider, human_feedback
    from crewai.flow.flow import Flow, FlowState, listen, start
    from crewai.flow.persistence import SQLiteFlowPersistence, persist
    from pydantic import ConfigDict, ValidationError

    # Every Flow builds a Memory on LanceDB, which imports its namespace client's models on first
    # use: seconds of Pydantic schema building that each forked child would pay again. Imported
    # here once, in the host, the children inherit them (pure Python, no threads; LanceDB itself
    # starts a runtime a fork cannot carry, so it stays the child's own import).
    importlib.import_module("lance_namespace")

    class PauseForHuman(HumanFeedbackProvider):
        """An async feedback provider: the flow pauses until a client resumes it."""

        def request_feedback(self, context, flow):
            raise HumanFeedbackPending(context=context)

    class CommitHookedPersistence(SQLiteFlowPersistence):
        """CrewAI's SQLite persistence, telling the child's control once a save is durable."""

        def save_state(self, flow_uuid, method_name, state_data):
            super().save_state(flow_uuid, method_name, state_data)
            if _CONTROL is not None:
                _CONTROL.committed((_committed_stage(method_name),))

        def save_pending_feedback(self, flow_uuid, context, state_data):
            # CrewAI's pause: one write of a flow_states row and the pending_feedback row. For a
            # notify<e> method it is the first durable record that its body (stage e) ran.
            super().save_pending_feedback(flow_uuid, context, state_data)
            if _CONTROL is not None:
                _CONTROL.committed((_paused_stage(context.method_name),))

    class ValidatedState(FlowState):
        """CrewAI's state base with Pydantic's checks on every assignment a method makes (ours)."""

        model_config = ConfigDict(validate_assignment=True)

    return types.SimpleNamespace(
        Flow=Flow,
        FlowState=FlowState,
        ValidatedState=ValidatedState,
        ValidationError=ValidationError,
        listen=listen,
        start=start,
        persist=persist,
        human_feedback=human_feedback,
        PauseForHuman=PauseForHuman,
        Persistence=CommitHookedPersistence,
    )


def _state_model(workflow: Workflow, validate_assignment: bool):
    """The flow's state: one field per node plus `note`, each declared `>= 0`; on CrewAI's
    `FlowState` as it comes, or with `validate_assignment` (the adapter's validation)."""
    from typing import Annotated

    from pydantic import Field, create_model

    crewai = _crewai()
    base = crewai.ValidatedState if validate_assignment else crewai.FlowState
    fields = {name: (Annotated[int, Field(ge=0)], 0) for name in _names(workflow)}
    return create_model("FuzzState", __base__=base, **fields)


def _names(workflow: Workflow) -> list[str]:
    return [_field(n) for n in range(len(workflow.nodes))] + ["note"]


def _flow_class(
    workflow: Workflow, run_node, persistence, validate_assignment: bool, one_method: bool = False
):
    """A linear CrewAI Flow for `workflow`, persisted after every method by `@persist`; with
    `one_method`, each effect-then-interrupt node's effect runs in its `@human_feedback` method."""
    crewai = _crewai()
    names = _names(workflow)
    error = crewai.ValidationError
    namespace = {}
    previous = None

    def add(name: str, method) -> None:
        nonlocal previous
        namespace[name] = _triggered_after(crewai, previous)(method)
        previous = name

    def asking(s: int):
        """CrewAI's @human_feedback asking for stage s's value, through the pausing provider."""
        return crewai.human_feedback(
            message=f"value for stage {s}", provider=crewai.PauseForHuman(), llm=None
        )

    for s, stage in enumerate(workflow.stages):
        if one_method and _fires_then_asks(workflow, s):  # CrewAI asks for s+1 after this body
            add(_notify_method_name(s), asking(s + 1)(_notify_method(s, stage, names, run_node, error)))
            continue
        if stage.consumes and not (one_method and _fires_then_asks(workflow, s - 1)):
            add(_ask_method_name(s), asking(s)(_ask_method(s)))
        add(_stage_method_name(s), _stage_method(s, stage, names, run_node, error))
    flow = type("FuzzFlow", (crewai.Flow[_state_model(workflow, validate_assignment)],), namespace)
    return crewai.persist(persistence)(flow)


def _triggered_after(crewai, previous: str | None):
    """The trigger of the next method: the flow's start, or listening to `previous`."""
    return crewai.start() if previous is None else crewai.listen(previous)


def _ask_method(s: int):
    def ask(self):
        return f"waiting at stage {s}"

    ask.__name__ = _ask_method_name(s)
    return ask


def _notify_method(s: int, stage, names: list[str], run_node, validation_error: type[Exception]):
    """The one-method effect-then-interrupt (to be decorated with `@human_feedback`): its body
    runs effect stage `s` and returns what the human is asked about; CrewAI then pauses for the
    value of stage s+1, which the next method takes."""

    def notify(self):
        _run_stage(self, s, stage, names, run_node, validation_error, None)
        return f"effect of stage {s} fired: waiting at stage {s + 1}"

    notify.__name__ = _notify_method_name(s)
    return notify


def _stage_method(s: int, stage, names: list[str], run_node, validation_error: type[Exception]):
    def method(self):
        # The feedback is a string: turning it into the stage's value is the adapter's (user) code.
        value = int(self.last_human_feedback.feedback) if stage.consumes else None
        return _run_stage(self, s, stage, names, run_node, validation_error, value)

    method.__name__ = _stage_method_name(s)
    return method


def _run_stage(flow, s: int, stage, names: list[str], run_node, validation_error: type[Exception], value):
    """Run stage `s`'s node code on the flow's state, between its crash points, and assign the
    node's field; the field's new value."""
    control = _CONTROL
    control.at("before-execute", s)
    context = NodeContext(
        control.thread, s, stage.node, control.op, control.role, idempotency_key=None
    )  # CrewAI hands method code no stable execution identity
    app = tuple(getattr(flow.state, name) for name in names)
    out = run_node(s, app, value, context)
    try:
        setattr(flow.state, names[stage.node], out[stage.node])
    except validation_error:  # only with validate_assignment: the adapter's validation
        raise AdapterValidationRefused(s, out[stage.node], node_output=not stage.consumes) from None
    control.executed.add(s)
    control.at("after-execute", s)
    return out[stage.node]


class CrewAIAdapter:
    name = "crewai"
    # Imported once in the host template: CrewAI with its telemetry off, and LanceDB's namespace
    # models (pure Python); LanceDB itself starts a runtime at import: each client imports it.
    preload = staticmethod(_crewai)
    capabilities = frozenset({"recorded-inputs", "executions"})
    unsupported = UNSUPPORTED

    def __init__(self, validate_assignment: bool = False, effect_then_interrupt: str = "two-methods") -> None:
        if effect_then_interrupt not in EFFECT_THEN_INTERRUPT:
            raise KeyError(
                f"effect_then_interrupt {effect_then_interrupt!r} (one of {', '.join(EFFECT_THEN_INTERRUPT)})"
            )
        try:
            _crewai()
        except ImportError as error:
            raise RuntimeError(
                f"crewai is not installed ({error}); pip install 'pymc-resume[crewai]'"
            ) from None
        self.version = f"crewai {_crewai_version()}"
        self.validate_assignment = bool(validate_assignment)
        self.effect_then_interrupt = effect_then_interrupt
        self.path: Path | None = None
        self.workflow: Workflow | None = None
        # Per bridge thread: its CrewAI flow id, run state, and for a fork the parent thread and
        # the parent's checkpoint it was hydrated from.
        self.threads: list[dict] = []
        # Ids of the flow_states rows of notify<e> methods that a delivery wrote: their completion
        # rows (the store does not tell them from their pause rows; see the module docstring).
        self._completions: set[int] = set()
        self._persistence = None
        self._flow = None
        self._outer_tempdir: str | None = None
        self._outer_storage_dir: str | None = None

    @property
    def one_method(self) -> bool:
        return self.effect_then_interrupt == "one-method"

    @property
    def framework_calls(self) -> dict[str, str]:
        calls = dict(FRAMEWORK_CALLS)
        if self.one_method:
            for op, more in ONE_METHOD_CALLS.items():
                calls[op] += more
        return calls

    def options(self) -> dict:
        options = {"validate_assignment": self.validate_assignment}
        if self.one_method:
            options["effect_then_interrupt"] = self.effect_then_interrupt
        return options

    def open(self, setup: FuzzSetup) -> None:
        self.path = setup.workdir / DB_NAME
        # CrewAI's own files stay in the example (and the variable is put back on close: CrewAI
        # creates the folder it names whenever it looks its storage up, even after the example).
        self._outer_storage_dir = os.environ.get("CREWAI_STORAGE_DIR")
        os.environ["CREWAI_STORAGE_DIR"] = str(setup.workdir)
        # CrewAI's SQLite persistence takes a file lock named after the database in the temp
        # directory and never removes it. Every process of the example (the children fork from
        # here) shares this temp directory, so they still share the lock, and it goes with the example.
        self._outer_tempdir, tempfile.tempdir = tempfile.tempdir, str(setup.workdir)
        self.workflow = setup.workflow
        self.threads = [{"id": str(uuid.uuid4()), "run": "new", "parent": None, "base": None}]
        self._completions = set()
        self._persistence = _crewai().Persistence(str(self.path))  # creates CrewAI's tables
        self._flow = _flow_class(
            setup.workflow, setup.run_node, self._persistence, self.validate_assignment, self.one_method
        )

    def close(self) -> None:
        self._persistence = self._flow = None
        tempfile.tempdir = self._outer_tempdir
        if self._outer_storage_dir is None:
            os.environ.pop("CREWAI_STORAGE_DIR", None)
        else:
            os.environ["CREWAI_STORAGE_DIR"] = self._outer_storage_dir

    # -- operations that run methods: in child processes -----------------------------------

    def start(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._run(thread, self._kickoff(thread), "run", crash, op)

    def resume(self, thread: int, value: int, crash: CrashPoint | None, op: str) -> Outcome:
        with self._deliveries():
            return self._run(thread, self._deliver(thread, value), "delivery", crash, op)

    def recover(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._run(thread, self._kickoff(thread), "recovery", crash, op)

    def resume_together(self, thread: int, values: list[int], window: str | None, op: str) -> list[Outcome]:
        tasks = [
            self._task(thread, self._deliver(thread, v), "delivery", None, f"{op}.{i}", window)
            for i, v in enumerate(values)
        ]
        with self._deliveries():
            results = run_in_children(tasks, synchronized=window is not None)
        return [self._settle(thread, result) for result in results]

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        """A replay fork from the head through `kickoff(restore_from_state_id=...)`, which runs
        the new flow at once (until it pauses or completes); any other fork is refused as not
        expressible, with the reason."""
        head = len(self._chain(thread)) - 1
        if intent == "edit":
            return Outcome(REFUSED, f"{NOT_EXPRESSIBLE}: {FORK_NOT_EXPRESSIBLE['edit']}")
        if checkpoint != head:
            return Outcome(
                REFUSED,
                f"{NOT_EXPRESSIBLE}: {FORK_NOT_EXPRESSIBLE['checkpoint']} "
                f"(asked for checkpoint {checkpoint}, the head is {head})",
            )
        new = len(self.threads)
        memory = {"id": None, "run": "new", "parent": thread, "base": checkpoint}
        restore = self._restore_fork(self.threads[thread]["id"])
        task = self._task(new, restore, "run", None, f"fork.t{new}", None)
        [result] = run_in_children([task])
        outcome = self._settle_in(memory, result)
        memory["id"] = (result.value or {}).get("flow_id")
        if outcome.status == REFUSED and not (memory["id"] and self._rows(memory["id"])):
            return outcome  # refused before CrewAI stored anything of the new flow: there is no fork
        self.threads.append(memory)
        detail = f"forked as flow {memory['id']}" + (f"; then {outcome.detail}" if outcome.detail else "")
        return Outcome(OK, detail, thread=new)

    def _kickoff(self, thread: int):
        """Start or restore the thread's flow under its id, as CrewAI documents for @persist."""
        flow_id = self.threads[thread]["id"]

        def kickoff() -> dict:
            self._flow().kickoff(inputs={"id": flow_id})
            return {}

        return kickoff

    def _deliver(self, thread: int, value: int):
        """Resume the paused flow with the value as the human's feedback."""
        flow_id = self.threads[thread]["id"]

        def deliver() -> dict:
            paused = self._flow.from_pending(flow_id, self._persistence)  # CrewAI's ValueError: not paused
            _CONTROL.at("after-load", -1)
            paused.resume(str(value))
            return {}

        return deliver

    def _restore_fork(self, parent_id: str):
        """CrewAI's fork: a new flow hydrated from the parent's latest snapshot, run at once;
        the new flow's id (CrewAI's own, fresh) comes back to the adapter."""

        def restore() -> dict:
            flow = self._flow()
            try:
                flow.kickoff(restore_from_state_id=parent_id)
            except Exception as error:
                error.flow_id = flow.state.id if flow.state.id != parent_id else None
                raise
            return {"flow_id": flow.state.id}

        return restore

    def _run(self, thread: int, call, role: str, crash, op: str) -> Outcome:
        [result] = run_in_children([self._task(thread, call, role, crash, op, None)])
        return self._settle(thread, result)

    def _task(self, thread: int, call, role: str, crash, op: str, window: str | None):
        def task(barrier: Barrier) -> dict:
            global _CONTROL
            _CONTROL = ClientControl(thread, op, role, crash, window, barrier)
            _silence_console()
            try:
                extra = call()
            except AdapterValidationRefused as refusal:
                return {
                    "status": REFUSED,
                    "detail": str(refusal),
                    "by": CLIENT,  # the adapter's validation, not CrewAI's
                    "failed": refusal.node_output,
                    "flow_id": getattr(refusal, "flow_id", None),
                }
            except Exception as error:
                if raised_by(error) != "crewai":
                    raise
                return {
                    "status": REFUSED,
                    "detail": f"refused by CrewAI: {type(error).__name__}: {error}",
                    "by": FRAMEWORK,
                    "flow_id": getattr(error, "flow_id", None),
                }
            return {"status": OK, "detail": "", **extra}

        return task

    def _settle(self, thread: int, result) -> Outcome:
        return self._settle_in(self.threads[thread], result)

    @staticmethod
    def _settle_in(memory: dict, result) -> Outcome:
        """The outcome of a child's operation for the thread whose memory is `memory`; a thread
        whose node output the adapter's validation refused stays failed (it ends there)."""
        failed = memory["run"] == "failed"
        outcome = settle(memory, result, "CrewAI")
        if failed or (isinstance(result.value, dict) and result.value.get("failed")):
            memory["run"] = "failed"  # the adapter's validation refused a node output: the thread ends
        return outcome

    # -- client calls CrewAI cannot express --------------------------------------------------

    def update(self, thread: int, note: int) -> Outcome:
        return Outcome(REFUSED, f"{NOT_EXPRESSIBLE}: {UNSUPPORTED['update']}")

    # -- observation: CrewAI's flow_states table, read-only ----------------------------------

    def _read(self, query: str, parameters: tuple) -> list[tuple]:
        """The rows of a query on CrewAI's database, opened read-only."""
        db = sqlite3.connect(f"{self.path.as_uri()}?mode=ro", uri=True, timeout=30.0)
        try:
            return db.execute(query, parameters).fetchall()
        finally:
            db.close()

    def _rows(self, flow_id: str) -> list[tuple[int, str, dict]]:
        """(row id, method name, state) of every persisted row of the flow, oldest first."""
        rows = self._read(
            "SELECT id, method_name, state_json FROM flow_states WHERE flow_uuid = ? ORDER BY id", (flow_id,)
        )
        return [(row, method, json.loads(state)) for row, method, state in rows]

    @contextlib.contextmanager
    def _deliveries(self):
        """Around deliveries (one-method only): remember the notify<e> rows they write as
        completions. The bridge runs one operation at a time, and a delivery writes a notify<e>
        row only when it completes its feedback step (a kickoff writes only its pauses)."""
        if not self.one_method:  # no notify<e> methods: nothing to tell apart
            yield
            return
        [(newest,)] = self._read("SELECT COALESCE(MAX(id), 0) FROM flow_states", ())
        yield
        rows = self._read("SELECT id, method_name FROM flow_states WHERE id > ?", (newest,))
        self._completions.update(row for row, method in rows if _paused_stage(method) is not None)

    def _chain(self, thread: int) -> tuple[Checkpoint, ...]:
        """The thread's checkpoints: a root's initial state, or a fork's parent chain up to the
        checkpoint it was hydrated from; then one per persisted completion of a stage method and
        per pause of a notify<e> method."""
        memory = self.threads[thread]
        if memory["parent"] is None:
            chain = [Checkpoint(0, self.workflow.initial_state(), INITIAL)]
        else:
            chain = list(self._chain(memory["parent"])[: memory["base"] + 1])
        names = _names(self.workflow)
        for row, method, state in self._rows(memory["id"]) if memory["id"] else ():
            stage = _committed_stage(method)
            if stage is None and row not in self._completions:
                stage = _paused_stage(method)  # a notify<e> pause: its body ran stage e
            if stage is not None:
                app = tuple(int(state.get(name, 0)) for name in names)
                chain.append(Checkpoint(stage + 1, app, stage))
        return tuple(chain)

    def observe(self) -> Observation:
        workflow = self.workflow
        views = []
        for t, memory in enumerate(self.threads):
            chain = self._chain(t)
            # Recorded inputs come from the thread's own rows only: a fork's chain starts with
            # its parent's checkpoints (the state it was hydrated from), but a value the parent
            # consumed is the fork's only if the fork's own run recorded it.
            own = chain[0 if memory["parent"] is None else memory["base"] + 1 :]
            inputs = {
                e.stage: e.app[workflow.stages[e.stage].node]
                for e in own
                if e.stage >= 0 and workflow.consumes[e.stage]
            }
            views.append(ThreadView(chain, memory["run"], inputs))
        return Observation(tuple(views))


def _silence_console() -> None:
    """CrewAI prints a panel per method to stdout; the child's output is not the bridge's."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
