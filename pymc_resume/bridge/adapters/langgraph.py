"""The bridge adapter for LangGraph: a real `StateGraph` on a real `SqliteSaver` file (or, with
`store="postgres"`, a `PostgresSaver` on the server at `PYMC_RESUME_POSTGRES_URL`).

The fuzzing workflow becomes a linear `StateGraph`, one node per stage of the model (an
effect-then-interrupt node is two LangGraph nodes, effect then `interrupt()`, the placement
LangGraph's own docs recommend for side effects around an interrupt). Node code is the bridge's
`run_node`; a consuming stage calls `interrupt()` first and takes the value it returns. The state
schema is a Pydantic model whose fields are `>= 0`, so LangGraph is given the chance to refuse
the schema's forbidden value (-1).

Operations that run nodes (start, resume, recover) run in a forked child process that opens
its own connection to the store; a crash point is a real SIGKILL of that child: before or after
a node's code (inside the node wrapper), or after the checkpointer's `put` of the checkpoint
that records the stage (a wrapper around `SqliteSaver.put`). `durability` (`sync`, `async`,
`exit`) is passed to every `invoke`; each mode is its own configuration.

What LangGraph gives and what it does not:

- resume is `invoke(Command(resume=v))`; recovery is `invoke(None)` (or the initial input
  again when no checkpoint survived the crash): LangGraph has no other recovery procedure.
- keys: node code gets LangGraph's task id (in `checkpoint_ns`, "node:task-id"), derived
  from the checkpoint id it runs from, so a re-execution from the same checkpoint gets the
  same key; it is handed to the sink as the idempotency key.
- recorded inputs: the committed interrupt values, plus `__resume__` pending writes on a
  checkpoint (LangGraph's durable record of a delivered resume value, i.e. the claim);
  `late-inputs`: `__resume__` writes on a completed thread's head (recorded, never read).
- no leases: LangGraph has no run lease or claim holder, so `leases` is not declared and
  `liveness` comes out skipped. The adapter itself remembers which thread's process it
  killed (`dead`) so that the bridge recovers it; that is the client's memory, not the store's.
- forks: LangGraph forks by time travel inside one thread (invoking at an old checkpoint id),
  which moves the thread's head; a contract fork is a new thread, so the adapter copies the
  checkpoint ancestry up to the fork point into a new LangGraph thread with the checkpointer's
  own `put`/`put_writes` (`SqliteSaver` has no `copy_thread`). A replay fork keeps the fork
  point's pending writes (its recorded resume value), an edit fork drops them and its start
  records the new input as a `__resume__` pending write on the fork point (the write
  `Command(resume=v)` makes), which its start (`invoke(None)`) reads.

`gate=True` puts the consume-once gate (`pymc_resume.gate`) in front: a delivery validates its
value, then claims the parked interrupt in the same store before LangGraph runs anything, and a
delivery that loses the claim is `refused`; recovery continues an outstanding claim with the
claimed value. The claim shows in `inputs` until LangGraph records the value itself.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import types
import uuid
from pathlib import Path

from pymc_resume.bridge.adapter import (
    OK, REFUSED, CrashPoint, FuzzSetup, Observation, Outcome, ThreadView,
)
from pymc_resume.bridge.process import ClientControl, Gate, run_in_children, settle
from pymc_resume.gate import ConsumeOnceGate, GateRefusal
from pymc_resume.model.state import INITIAL, UPDATE, Checkpoint
from pymc_resume.model.workflow import UNSET, NodeKind, StageKind, Workflow

DURABILITY = ("sync", "async", "exit")
STORES = ("sqlite", "postgres")
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_url() -> str:
    return os.environ.get("PYMC_RESUME_POSTGRES_URL", POSTGRES_URL)
RESUME = "__resume__"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"  # LangGraph's task id for Command(resume=v)


def _langgraph_version() -> str:
    from importlib.metadata import version
    return version("langgraph")


_CONTROL: ClientControl | None = None


def _field(node: int) -> str:
    return f"n{node}"


class LangGraphAdapter:
    name = "langgraph"
    capabilities = frozenset({"recorded-inputs", "executions", "late-inputs"})

    def __init__(self, durability: str = "sync", store: str = "sqlite", gate: bool = False) -> None:
        if durability not in DURABILITY:
            raise KeyError(f"durability {durability!r} (one of {', '.join(DURABILITY)})")
        if store not in STORES:
            raise KeyError(f"store {store!r} (one of {', '.join(STORES)})")
        module = "langgraph.checkpoint.sqlite" if store == "sqlite" else "langgraph.checkpoint.postgres"
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise RuntimeError(f"{module} is not installed ({error}); pip install 'pymc-resume[langgraph]'") from None
        self.durability = durability
        self.store = store
        self.gate = bool(gate)
        self.version = f"langgraph {_langgraph_version()}"
        self.path: Path | None = None
        self.prefix = ""  # thread ids are unique per example (a Postgres database is shared)
        self.workflow: Workflow | None = None
        self.run_node = None
        self.threads: list[dict] = []  # per bridge thread: its LangGraph thread id and run state
        self._saver = None
        self._graph = None
        self._gate: ConsumeOnceGate | None = None  # the bridge process's own, to observe claims

    def options(self) -> dict:
        options = {"durability": self.durability}
        if self.store != "sqlite":
            options["store"] = self.store
        if self.gate:
            options["gate"] = True
        return options

    # -- the graph -----------------------------------------------------------------------

    def _build(self, saver):
        from typing import Annotated

        from langgraph.graph import END, START, StateGraph
        from pydantic import BaseModel, Field, create_model

        workflow, run_node = self.workflow, self.run_node
        fields = {_field(n): (Annotated[int, Field(ge=0)], 0) for n in range(len(workflow.nodes))}
        fields["note"] = (Annotated[int, Field(ge=0)], 0)
        state_model = create_model("FuzzState", __base__=BaseModel, **fields)
        names = [_field(n) for n in range(len(workflow.nodes))] + ["note"]

        graph = StateGraph(state_model)
        previous = START
        for s, stage in enumerate(workflow.stages):
            graph.add_node(f"s{s}", _node(s, stage, names, run_node))
            graph.add_edge(previous, f"s{s}")
            previous = f"s{s}"
        graph.add_edge(previous, END)
        return graph.compile(checkpointer=saver)

    def _connect(self, setup: bool = False):
        if self.store == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver as base

            conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
        else:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver as base
            from psycopg.rows import dict_row

            conn = psycopg.connect(postgres_url(), autocommit=True, prepare_threshold=0, row_factory=dict_row)

        class Saver(base):
            def put(self, config, checkpoint, metadata, new_versions):
                result = super().put(config, checkpoint, metadata, new_versions)
                if _CONTROL is not None and metadata.get("source") == "loop":
                    _CONTROL.committed(range(int(metadata.get("step", -1))))  # stages before the step
                return result

        saver = Saver(conn)
        if setup or self.store == "sqlite":
            saver.setup()
        return saver

    def _initial(self) -> dict:
        return {_field(n): 0 for n in range(len(self.workflow.nodes))} | {"note": 0}

    def _config(self, thread: int, checkpoint_id: str | None = None) -> dict:
        configurable = {"thread_id": self.prefix + self.threads[thread]["id"], "checkpoint_ns": ""}
        if checkpoint_id is not None:
            configurable["checkpoint_id"] = checkpoint_id
        return {"configurable": configurable}

    def open(self, setup: FuzzSetup) -> None:
        self.path = setup.workdir / "langgraph.db"
        self.workflow = setup.workflow
        self.run_node = setup.run_node
        self.prefix = f"{uuid.uuid4().hex}-"
        self.threads = [{"id": "t0", "run": "new"}]
        self._saver = self._connect(setup=True)
        self._graph = self._build(self._saver)
        self._gate = ConsumeOnceGate.for_checkpointer(self._saver) if self.gate else None

    def close(self) -> None:
        if self._saver is not None:
            try:
                if self.store != "sqlite":  # the shared database keeps nothing of the example
                    for thread in self.threads:
                        self._saver.delete_thread(self.prefix + thread["id"])
                        if self._gate is not None:
                            self._gate.forget(self.prefix + thread["id"])
            finally:
                self._saver.conn.close()
        self._saver = self._graph = self._gate = None

    # -- operations that run nodes: in child processes -------------------------------------

    def start(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        # A fork's copied checkpoints are there (with an edit fork's new input): continue them.
        payload = None if self._checkpoints(thread) else self._initial()
        return self._run(thread, lambda: payload, "run", crash, op)

    def resume(self, thread: int, value: int, crash: CrashPoint | None, op: str) -> Outcome:
        from langgraph.types import Command
        return self._run(thread, lambda: Command(resume=value), "delivery", crash, op)

    def recover(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        payload = None if self._checkpoints(thread) else self._initial()
        return self._run(thread, lambda: payload, "recovery", crash, op)

    def resume_together(self, thread: int, values: list[int], window: str | None, op: str) -> list[Outcome]:
        from langgraph.types import Command
        tasks = [self._task(thread, lambda v=v: Command(resume=v), "delivery", None, f"{op}.{i}", window)
                 for i, v in enumerate(values)]
        results = run_in_children(tasks, synchronized=window is not None)
        return [self._settle(thread, result) for result in results]

    def _run(self, thread, payload, role, crash, op) -> Outcome:
        [result] = run_in_children([self._task(thread, payload, role, crash, op, None)])
        return self._settle(thread, result)

    def _task(self, thread: int, payload, role: str, crash, op: str, window: str | None):
        def task(gate: Gate) -> dict:
            global _CONTROL
            _CONTROL = ClientControl(thread, op, role, crash, window, gate)
            saver = self._connect()  # this process's own connection
            graph = self._build(saver)
            config = self._config(thread)
            gate = ConsumeOnceGate.for_checkpointer(saver) if self.gate else None
            try:
                seen = None
                if window == "after-load":  # the client reads the head, then the deliveries race
                    seen = gate.parked(graph, config) if gate else graph.get_state(config)
                    _CONTROL.at("after-load", -1)
                self._invoke(graph, gate, config, role, payload(), seen)
            except Exception as error:  # noqa: BLE001 - what LangGraph (or the gate) returns to its client
                if isinstance(error, GateRefusal) or type(error).__module__.startswith(("langgraph", "pydantic")):
                    return {"status": REFUSED, "detail": f"{type(error).__name__}: {error}"}
                raise
            return {"status": OK, "detail": ""}
        return task

    def _invoke(self, graph, gate, config, role: str, payload, seen) -> None:
        """Run the graph: through the gate when it is on (a delivery claims first; a recovery
        continues an outstanding claim), else LangGraph's own invoke."""
        if gate is not None and role == "delivery":
            gate.resume(graph, config, payload.resume, seen=seen,
                        validate=_valid_value, durability=self.durability)
        elif gate is not None and role == "recovery" and payload is None:
            gate.recover(graph, config, durability=self.durability)
        else:
            graph.invoke(payload, config, durability=self.durability)

    def _settle(self, thread: int, result) -> Outcome:
        return settle(self.threads[thread], result, "LangGraph")

    # -- client calls that run no node -----------------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        tuples = self._chain_tuples(thread)  # oldest first, the input checkpoint included
        view = self._view_chain(tuples)
        if not 0 <= checkpoint < len(view):
            return Outcome(REFUSED, f"no checkpoint {checkpoint}")
        source = view[checkpoint][1]
        if source is None:
            return Outcome(REFUSED, f"checkpoint {checkpoint} is inside a checkpoint LangGraph wrote "
                                    "for several nodes at once: there is no LangGraph checkpoint to fork from")
        upto = tuples[: tuples.index(source) + 1]
        new = len(self.threads)
        self.threads.append({"id": f"t{new}", "run": "new"})
        parent_id = None
        for k, entry in enumerate(upto):
            configurable = {"thread_id": f"{self.prefix}t{new}", "checkpoint_ns": ""}
            if parent_id is not None:
                configurable["checkpoint_id"] = parent_id
            stored = self._saver.put({"configurable": configurable}, entry.checkpoint, entry.metadata,
                                     entry.checkpoint["channel_versions"])
            last = k == len(upto) - 1
            if last and intent == "edit":  # the new input, recorded as Command(resume=v) records it
                self._saver.put_writes(stored, [(RESUME, value)], NULL_TASK_ID)
            else:
                by_task: dict[str, list] = {}
                for task_id, channel, written in entry.pending_writes or ():
                    by_task.setdefault(task_id, []).append((channel, written))
                for task_id, writes in by_task.items():
                    self._saver.put_writes(stored, writes, task_id)
            parent_id = entry.checkpoint["id"]
        return Outcome(OK, f"forked as thread {new}", thread=new)

    def update(self, thread: int, note: int) -> Outcome:
        try:
            self._graph.update_state(self._config(thread), {"note": note})
        except Exception as error:  # noqa: BLE001 - what LangGraph returns to its client
            if type(error).__module__.startswith(("langgraph", "pydantic")):
                return Outcome(REFUSED, f"{type(error).__name__}: {error}")
            raise
        return Outcome(OK, "updated")

    # -- observation -------------------------------------------------------------------------

    def _checkpoints(self, thread: int) -> bool:
        return self._saver.get_tuple(self._config(thread)) is not None

    def _chain_tuples(self, thread: int) -> list:
        """The head's ancestry, oldest first (CheckpointTuples with their pending writes)."""
        entries = {entry.checkpoint["id"]: entry for entry in self._saver.list(self._config(thread))}
        head = self._saver.get_tuple(self._config(thread))
        chain = []
        while head is not None:
            chain.append(entries.get(head.checkpoint["id"], head))
            parent = head.parent_config
            head = entries.get(parent["configurable"]["checkpoint_id"]) if parent else None
        return chain[::-1]

    def _view_chain(self, tuples: list) -> list[tuple[Checkpoint, object]]:
        """The model's chain for LangGraph checkpoints, each with the CheckpointTuple it shows.

        A LangGraph checkpoint that records several nodes at once (durability "exit" writes one
        when the run parks or ends) is shown as one model checkpoint per stage it commits, each
        with the state after that stage, which is exact here: every stage writes only its own
        node's field. Those in-between entries (and the initial one when LangGraph wrote none)
        have no LangGraph checkpoint of their own (None).
        """
        workflow = self.workflow
        names = [_field(n) for n in range(len(workflow.nodes))] + ["note"]
        chain: list[tuple[Checkpoint, object]] = []
        for entry in tuples:
            step = entry.metadata.get("step", -1)
            source = entry.metadata.get("source")
            if source == "input" or step < 0:
                continue
            values = entry.checkpoint["channel_values"]
            app = tuple(int(values.get(name, 0)) for name in names)
            pc = self._pc(entry)
            if not chain and (source != "loop" or pc > 0):  # LangGraph wrote no initial checkpoint
                initial = self.workflow.initial_state()[:-1] + (app[-1],)
                chain.append((Checkpoint(0, initial, INITIAL), None))
            if source != "loop":
                chain.append((Checkpoint(pc, app, UPDATE), entry))
                continue
            if pc == 0:
                chain.append((Checkpoint(0, app, INITIAL), entry))
                continue
            before = chain[-1][0].pc
            for stage in range(before, pc):  # the stages this checkpoint commits
                last = stage == pc - 1
                chain.append((Checkpoint(stage + 1, app if last else _after(workflow, app, stage), stage),
                              entry if last else None))
        return chain

    def _pc(self, entry) -> int:
        """The checkpoint's position: the stage of the node LangGraph runs next, or the end.

        Read from the raw checkpoint (the node's trigger channel `branch:to:sK` holds a value),
        not from `get_state`, which raises on a checkpoint whose state breaks the schema.
        """
        waiting = [int(key[len("branch:to:s"):]) for key in entry.checkpoint["channel_values"]
                   if key.startswith("branch:to:s")]
        return min(waiting) if waiting else self.workflow.end

    def observe(self) -> Observation:
        workflow = self.workflow
        views = []
        for t, thread in enumerate(self.threads):
            tuples = self._chain_tuples(t)
            chain = [c for c, _ in self._view_chain(tuples)]
            if not chain:
                chain = [Checkpoint(0, tuple(self._initial().values()), INITIAL)]
            inputs = {e.stage: e.app[workflow.stages[e.stage].node]
                      for e in chain if e.stage >= 0 and workflow.consumes[e.stage]}
            late = []
            head = tuples[-1] if tuples else None
            claim = self._gate.outstanding_claim(self._config(t)) if self._gate is not None else None
            if claim is not None and head is not None and head.checkpoint["id"] == claim.checkpoint_id:
                inputs.setdefault(chain[-1].pc, int(claim.value))  # claimed, not yet recorded by LangGraph
            if head is not None:
                resumes = [w for _, channel, w in head.pending_writes or () if channel == RESUME]
                pc = chain[-1].pc
                if resumes and pc < workflow.end and workflow.consumes[pc]:
                    inputs.setdefault(pc, _value(resumes[-1]))
                elif resumes and workflow.consuming:
                    reached = [s for s in workflow.consuming if s < pc]
                    if reached:
                        late += [(reached[-1], _value(w)) for w in resumes]
            views.append(ThreadView(tuple(chain), thread["run"], inputs, tuple(late)))
        return Observation(tuple(views))


def _after(workflow: Workflow, app: tuple[int, ...], stage: int) -> tuple[int, ...]:
    """`app` (a later state of the same run) as it was right after `stage`: the fields of nodes
    whose writing stage comes later are not yet written."""
    out = list(app)
    for later in workflow.stages[stage + 1:]:
        if later.kind in (StageKind.STEP, StageKind.WAIT, StageKind.GATED) or (
            later.kind is StageKind.EFFECT and workflow.nodes[later.node] is NodeKind.EFFECT
        ):
            out[later.node] = UNSET
    return tuple(out)


def _valid_value(value) -> None:
    """The gate's check before it claims: a resume value must fit the state schema (>= 0)."""
    from typing import Annotated

    from pydantic import Field, TypeAdapter

    TypeAdapter(Annotated[int, Field(ge=0)]).validate_python(value)


def _value(written) -> int:
    if isinstance(written, dict) and written:  # a resume map {interrupt id: value}
        written = next(iter(written.values()))
    if isinstance(written, (list, tuple)) and written:  # a task's own record: one per interrupt()
        written = written[-1]
    return int(written)


def _node(s: int, stage, names: list[str], run_node):
    from langgraph.config import get_config
    from langgraph.types import interrupt

    def node(state):
        value = interrupt({"stage": s}) if stage.consumes else None
        control = _CONTROL
        control.at("before-execute", s)
        namespace = get_config()["configurable"].get("checkpoint_ns", "")
        context = types.SimpleNamespace(
            thread=control.thread, stage=s, node=stage.node, op=control.op, role=control.role,
            idempotency_key=namespace or None,
        )
        app = tuple(getattr(state, name) for name in names)
        out = run_node(s, app, value, context)
        control.executed.add(s)
        control.at("after-execute", s)
        return {names[stage.node]: out[stage.node]}

    node.__name__ = f"s{s}"
    return node


class LangGraphAsync(LangGraphAdapter):
    """`durability="async"`: checkpoints are written in the background while the next step runs."""

    def __init__(self, durability: str = "async") -> None:
        super().__init__(durability)


class LangGraphExit(LangGraphAdapter):
    """`durability="exit"`: LangGraph persists only when the run exits (parks, completes or fails)."""

    def __init__(self, durability: str = "exit") -> None:
        super().__init__(durability)


class LangGraphGated(LangGraphAdapter):
    """The consume-once gate on (`pymc_resume.gate`), durability "sync" on SQLite by default."""

    def __init__(self, durability: str = "sync", store: str = "sqlite", gate: bool = True) -> None:
        super().__init__(durability, store, gate)


class LangGraphPostgres(LangGraphAdapter):
    """`PostgresSaver` on the server at `PYMC_RESUME_POSTGRES_URL`, durability "sync"."""

    def __init__(self, durability: str = "sync", store: str = "postgres") -> None:
        super().__init__(durability, store)
