"""The bridge adapter for CrewAI Flows: a real `Flow` whose state CrewAI's own `@persist`
writes to a real `SQLiteFlowPersistence` file in the example's working directory.

The fuzzing workflow becomes a linear Flow, one method per stage of the model, each
`@listen`-ing to the one before it (the first is the `@start`). A consuming stage is two
methods: `ask<s>`, decorated with CrewAI's `@human_feedback` and an async provider that pauses
the flow (`HumanFeedbackPending`, the documented way to wait for a human without an LLM), then
`s<s>`, which takes the value from `self.last_human_feedback` and runs the stage. Node code is
the bridge's `run_node`; an effect-then-interrupt node is its effect method, then the pair.
The state is a `FlowState` whose fields are `>= 0` with `validate_assignment`, so CrewAI's
Pydantic state is given the chance to refuse the schema's forbidden value (-1).

What each operation is in CrewAI (every one that runs methods runs in a forked child process,
which a crash point SIGKILLs: before or after a stage method's code, or right after CrewAI's
`save_state` of the method's completion, hooked by subclassing `SQLiteFlowPersistence`):

- start: `kickoff(inputs={"id": <thread's flow id>})` on a fresh flow instance;
- resume: `Flow.from_pending(id, persistence).resume(str(v))`; `from_pending` raising
  "No pending feedback" is CrewAI's refusal;
- recover: `kickoff(inputs={"id": id})` again, CrewAI's documented way to restore a `@persist`
  flow ("resume: writes land under the supplied id, extending the same flow_uuid history");
- fork and update: not expressible (see `UNSUPPORTED`).

What CrewAI gives and what it does not:

- keys: CrewAI hands method code no identity of the execution that survives re-execution
  (its event ids are new per execution), so effects go to the sink without a key.
- recorded inputs: CrewAI records a consumed value only in the state its taking method
  writes; it records no claim (the `pending_feedback` row holds the question, not an answer),
  so the inputs are exactly the values in the committed checkpoints.
- no leases: nothing in the store tells a live run from a crashed one; the `dead` run state
  is the adapter's own memory that it killed the thread's last process (so the bridge
  recovers it), not something CrewAI stores. `liveness` comes out skipped.
- observation reads CrewAI's `flow_states` table: one row per persisted method completion,
  oldest first. A row of a stage method `s<k>` is a commit of stage k; rows of `ask<k>`
  (written when the flow pauses and when a resume completes the feedback step) carry no stage
  and are not commits. CrewAI writes no row before the first method: the chain starts with the
  initial state.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import tempfile
import types
import uuid
from pathlib import Path

from pymc_resume.bridge.adapter import (
    OK, REFUSED, CrashPoint, FuzzSetup, Observation, Outcome, ThreadView,
)
from pymc_resume.bridge.process import ClientControl, Gate, run_in_children, settle
from pymc_resume.model.state import INITIAL, Checkpoint
from pymc_resume.model.workflow import Workflow

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

UNSUPPORTED = {
    "fork": "CrewAI forks a @persist flow only with kickoff(restore_from_state_id=...), which "
            "hydrates from the source's latest snapshot and runs at once: no fork from an earlier "
            "checkpoint, and no new input for one of its interrupts",
    "update": "CrewAI has no client call that writes a flow's persisted state without running it: "
              "kickoff inputs are applied only as the flow starts over, and "
              "FlowPersistence.save_state is the engine's own write",
}

DB_NAME = "crewai_flows.db"


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


def _committed_stage(method_name: str) -> int | None:
    """The stage a persisted method completion commits, or None for a feedback step."""
    if method_name.startswith("s") and method_name[1:].isdigit():
        return int(method_name[1:])
    return None


_CONTROL: ClientControl | None = None


@functools.cache
def _crewai():
    """CrewAI's classes the adapter uses, imported once telemetry is off."""
    switch_off_telemetry()
    from crewai.flow import HumanFeedbackPending, HumanFeedbackProvider, human_feedback
    from crewai.flow.flow import Flow, FlowState, listen, start
    from crewai.flow.persistence import SQLiteFlowPersistence, persist
    from pydantic import ConfigDict

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

    class ValidatedState(FlowState):
        """CrewAI's state base with Pydantic's checks on every assignment a method makes."""

        model_config = ConfigDict(validate_assignment=True)

    return types.SimpleNamespace(
        Flow=Flow, ValidatedState=ValidatedState, listen=listen, start=start, persist=persist,
        human_feedback=human_feedback, PauseForHuman=PauseForHuman, Persistence=CommitHookedPersistence,
    )


def _state_model(workflow: Workflow):
    """The flow's state: one field per node plus `note`, each `>= 0`, checked on assignment."""
    from typing import Annotated

    from pydantic import Field, create_model

    fields = {name: (Annotated[int, Field(ge=0)], 0) for name in _names(workflow)}
    return create_model("FuzzState", __base__=_crewai().ValidatedState, **fields)


def _names(workflow: Workflow) -> list[str]:
    return [_field(n) for n in range(len(workflow.nodes))] + ["note"]


def _flow_class(workflow: Workflow, run_node, persistence):
    """A linear CrewAI Flow for `workflow`, persisted after every method by `@persist`."""
    crewai = _crewai()
    names = _names(workflow)
    namespace = {}
    previous = None
    for s, stage in enumerate(workflow.stages):
        if stage.consumes:
            ask = crewai.human_feedback(message=f"value for stage {s}", provider=crewai.PauseForHuman(),
                                        llm=None)(_ask_method(s))
            namespace[_ask_method_name(s)] = _triggered_after(crewai, previous)(ask)
            previous = _ask_method_name(s)
        namespace[_stage_method_name(s)] = _triggered_after(crewai, previous)(_stage_method(s, stage, names, run_node))
        previous = _stage_method_name(s)
    flow = type("FuzzFlow", (crewai.Flow[_state_model(workflow)],), namespace)
    return crewai.persist(persistence)(flow)


def _triggered_after(crewai, previous: str | None):
    """The trigger of the next method: the flow's start, or listening to `previous`."""
    return crewai.start() if previous is None else crewai.listen(previous)


def _ask_method(s: int):
    def ask(self):
        return f"waiting at stage {s}"

    ask.__name__ = _ask_method_name(s)
    return ask


def _stage_method(s: int, stage, names: list[str], run_node):
    def method(self):
        value = int(self.last_human_feedback.feedback) if stage.consumes else None
        control = _CONTROL
        control.at("before-execute", s)
        context = types.SimpleNamespace(
            thread=control.thread, stage=s, node=stage.node, op=control.op, role=control.role,
            idempotency_key=None,  # CrewAI hands method code no stable execution identity
        )
        app = tuple(getattr(self.state, name) for name in names)
        out = run_node(s, app, value, context)
        setattr(self.state, names[stage.node], out[stage.node])
        control.executed.add(s)
        control.at("after-execute", s)
        return out[stage.node]

    method.__name__ = _stage_method_name(s)
    return method


class CrewAIAdapter:
    name = "crewai"
    capabilities = frozenset({"recorded-inputs", "executions"})
    unsupported = UNSUPPORTED

    def __init__(self) -> None:
        try:
            _crewai()
        except ImportError as error:
            raise RuntimeError(f"crewai is not installed ({error}); pip install 'pymc-resume[crewai]'") from None
        self.version = f"crewai {_crewai_version()}"
        self.path: Path | None = None
        self.workflow: Workflow | None = None
        self.threads: list[dict] = []  # per bridge thread: its CrewAI flow id and run state
        self._persistence = None
        self._flow = None
        self._outer_tempdir: str | None = None
        self._outer_storage_dir: str | None = None

    def options(self) -> dict:
        return {}

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
        self.threads = [{"id": str(uuid.uuid4()), "run": "new"}]
        self._persistence = _crewai().Persistence(str(self.path))  # creates CrewAI's tables
        self._flow = _flow_class(setup.workflow, setup.run_node, self._persistence)

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
        return self._run(thread, self._deliver(thread, value), "delivery", crash, op)

    def recover(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._run(thread, self._kickoff(thread), "recovery", crash, op)

    def resume_together(self, thread: int, values: list[int], window: str | None, op: str) -> list[Outcome]:
        tasks = [self._task(thread, self._deliver(thread, v), "delivery", None, f"{op}.{i}", window)
                 for i, v in enumerate(values)]
        results = run_in_children(tasks, synchronized=window is not None)
        return [self._settle(thread, result) for result in results]

    def _kickoff(self, thread: int):
        """Start or restore the thread's flow under its id, as CrewAI documents for @persist."""
        flow_id = self.threads[thread]["id"]
        return lambda: self._flow().kickoff(inputs={"id": flow_id})

    def _deliver(self, thread: int, value: int):
        """Resume the paused flow with the value as the human's feedback."""
        flow_id = self.threads[thread]["id"]

        def deliver():
            paused = self._flow.from_pending(flow_id, self._persistence)  # ValueError: not paused
            _CONTROL.at("after-load", -1)
            return paused.resume(str(value))
        return deliver

    def _run(self, thread: int, call, role: str, crash, op: str) -> Outcome:
        [result] = run_in_children([self._task(thread, call, role, crash, op, None)])
        return self._settle(thread, result)

    def _task(self, thread: int, call, role: str, crash, op: str, window: str | None):
        def task(gate: Gate) -> dict:
            global _CONTROL
            _CONTROL = ClientControl(thread, op, role, crash, window, gate)
            _silence_console()
            try:
                call()
            except Exception as error:  # noqa: BLE001 - what CrewAI returns to its client
                if _is_client_error(error):
                    return {"status": REFUSED, "detail": f"{type(error).__name__}: {error}"}
                raise
            return {"status": OK, "detail": ""}
        return task

    def _settle(self, thread: int, result) -> Outcome:
        return settle(self.threads[thread], result, "CrewAI")

    # -- client calls CrewAI cannot express --------------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        return Outcome(REFUSED, f"not expressible in CrewAI: {UNSUPPORTED['fork']}")

    def update(self, thread: int, note: int) -> Outcome:
        return Outcome(REFUSED, f"not expressible in CrewAI: {UNSUPPORTED['update']}")

    # -- observation: CrewAI's flow_states table ----------------------------------------------

    def _rows(self, flow_id: str) -> list[tuple[str, dict]]:
        """(method name, state) of every persisted completion of the flow, oldest first."""
        db = sqlite3.connect(self.path, timeout=30.0)
        try:
            rows = db.execute("SELECT method_name, state_json FROM flow_states WHERE flow_uuid = ? "
                              "ORDER BY id", (flow_id,)).fetchall()
        finally:
            db.close()
        return [(method, json.loads(state)) for method, state in rows]

    def _chain(self, flow_id: str) -> tuple[Checkpoint, ...]:
        """The initial state, then one checkpoint per persisted completion of a stage method."""
        names = _names(self.workflow)
        chain = [Checkpoint(0, self.workflow.initial_state(), INITIAL)]
        for method, state in self._rows(flow_id):
            stage = _committed_stage(method)
            if stage is not None:
                app = tuple(int(state.get(name, 0)) for name in names)
                chain.append(Checkpoint(stage + 1, app, stage))
        return tuple(chain)

    def observe(self) -> Observation:
        workflow = self.workflow
        views = []
        for thread in self.threads:
            chain = self._chain(thread["id"])
            inputs = {e.stage: e.app[workflow.stages[e.stage].node]
                      for e in chain if e.stage >= 0 and workflow.consumes[e.stage]}
            views.append(ThreadView(chain, thread["run"], inputs))
        return Observation(tuple(views))


def _is_client_error(error: Exception) -> bool:
    """An error CrewAI (or its Pydantic state) raises to the client: a refusal, not a bug."""
    module = type(error).__module__
    return isinstance(error, ValueError) or module.startswith(("crewai", "pydantic"))


def _silence_console() -> None:
    """CrewAI prints a panel per method to stdout; the child's output is not the bridge's."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
