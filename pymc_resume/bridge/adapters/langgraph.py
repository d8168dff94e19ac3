"""The bridge adapter for LangGraph: a real `StateGraph` on a real `SqliteSaver` file (or, with
`store="postgres"`, a `PostgresSaver` on the server at `PYMC_RESUME_POSTGRES_URL`).

The fuzzing workflow becomes a linear `StateGraph`. By default each stage of the model is a
LangGraph node, so an effect-then-interrupt node is two LangGraph nodes (the effect, then
`interrupt()`: the placement LangGraph's docs recommend for side effects around an interrupt).
With `effect_then_interrupt="one-node"` it is one LangGraph node that fires the effect and then
calls `interrupt()` (the contract's pattern as one node; LangGraph re-runs a node from its top on
resume). Node code is the bridge's `run_node`; a consuming stage calls `interrupt()` first and
takes the value it returns. The state schema is a Pydantic model whose fields are `>= 0`, so
LangGraph is given the chance to refuse the schema's forbidden value (-1).

Operations that run nodes (start, resume, recover) run in a forked child process that opens
its own connection to the store; a crash point is a real SIGKILL of that child: before or after
a node's code (inside the node wrapper), or after the checkpointer's `put` of the checkpoint
that records the stage (a wrapper around `SqliteSaver.put`; for the effect of a one-node
effect-then-interrupt, after the `put_writes` of its interrupt). `durability` (`sync`, `async`,
`exit`) is passed to every `invoke`; each mode is its own configuration.

Every operation is a public LangGraph call (`FRAMEWORK_CALLS`); the adapter never writes the
checkpointer itself (it reads it, with `list` and `get_tuple`, to observe). What LangGraph gives
and what it does not:

- resume is `invoke(Command(resume=v))`; recovery is `invoke(None)` (or the initial input
  again when no checkpoint survived the crash): LangGraph has no other recovery procedure.
- forks are LangGraph's time travel, branches inside the same LangGraph thread id: a replay fork
  is `invoke(None, config)` with the past `checkpoint_id` (LangGraph writes a `fork` checkpoint
  and re-runs from there). An edit fork has two documented calls, each a variant
  (`VARIANTS`): `update-state`, `update_state(config, {field: v}, as_node=...)` on the past
  checkpoint, recording v as the interrupt node's output (LangGraph's "fork from a specific
  node"), then `invoke(None, config)` at the checkpoint it made; and `command-at-checkpoint`,
  `invoke(Command(resume=v), config)` with the past `checkpoint_id` of a checkpoint parked at the
  interrupt (time travel re-raises the interrupt and answers it), which runs the fork at once
  (in a child process, like any run). Each bridge thread is a branch:
  its LangGraph thread id, the checkpoint it forks from, and the checkpoints LangGraph wrote for
  it, which carry the bridge thread in their metadata (`THREAD_KEY`, passed in the run's
  `configurable`, which LangGraph copies into every checkpoint it writes). A branch whose head is
  the LangGraph thread's newest checkpoint is addressed by thread id alone; any other (a parent
  after a fork of it ran, a fork not yet started) by its head's `checkpoint_id`, the only way
  LangGraph offers to run an older branch, which is time travel: its run drops the `__resume__`
  writes of that checkpoint (see `PregelLoop._first`).
- effect keys: none. LangGraph documents no identity for a side effect to be deduplicated by;
  its durable-execution page leaves the key to the user: "When possible ensure that side effects
  (e.g., API calls, file writes) are idempotent. [...] Use idempotency keys or verify existing
  results to avoid unintended duplication" (docs.langchain.com/oss/python/langgraph/
  durable-execution, "Determinism and Consistent Replay", LangGraph 1.2.9). Its task id (in
  `checkpoint_ns`, "node:task-id") is an internal name of a task, documented as no key, so the
  sink applies every fire, and a reason counts the fires of each contract identity (lineage,
  node, inputs) and says which operation fired them (`EFFECT_KEY`).
- recorded inputs, read on every checkpoint of a branch: for an interrupt, the record on the
  checkpoint it parked at (the interrupted task's own `__resume__` write, else its write of the
  interrupt's field, else the `__resume__` write `Command(resume=v)` makes, i.e. the claim),
  and the committed value where there is none; an edit fork's input is the state its
  `update_state` wrote. `late-inputs`: `__resume__` writes on a completed thread's head.
- no leases: LangGraph has no run lease or claim holder, so `leases` is not declared and
  `liveness` comes out skipped. The adapter itself remembers which thread's process it
  killed (`dead`) so that the bridge recovers it; that is the client's memory, not the store's.

`gate=True` puts the consume-once gate (`pymc_resume.gate`) in front: a delivery validates its
value, then claims the parked interrupt in the same store before LangGraph runs anything, and a
delivery that loses the claim is `refused`; recovery continues an outstanding claim with the
claimed value. The claim shows in `inputs` until LangGraph records the value itself.
"""

from __future__ import annotations

import importlib
import sqlite3
import traceback
import uuid
from pathlib import Path

from pymc_resume.bridge.adapter import (
    FRAMEWORK,
    NOT_EXPRESSIBLE,
    OK,
    REFUSED,
    CrashPoint,
    FuzzSetup,
    Observation,
    Outcome,
    ThreadView,
    Variant,
)
from pymc_resume.bridge.adapter.nodes import NodeContext
from pymc_resume.bridge.kit.postgres import (
    create_schema,
    drop_schema,
    in_schema,
    postgres_url,
    schema_of,
    sweep_schemas,
)
from pymc_resume.bridge.kit.preload import preloading
from pymc_resume.bridge.kit.process import Barrier, ClientControl, run_in_children, settle
from pymc_resume.gate import ConsumeOnceGate, GateRefusal
from pymc_resume.model.state import INITIAL, UPDATE, Checkpoint
from pymc_resume.model.workflow import UNSET, NodeKind, StageKind, Workflow

DURABILITY = ("sync", "async", "exit")
STORES = ("sqlite", "postgres")
# How an effect-then-interrupt node is built: two LangGraph nodes (effect, then interrupt()), or
# one node that fires the effect and then calls interrupt().
EFFECT_THEN_INTERRUPT = ("two-nodes", "one-node")
SCHEMA_TAG = "langgraph"  # a PostgreSQL example's schema: `kit.postgres.schema_of(workdir, SCHEMA_TAG)`

RESUME = "__resume__"
INTERRUPT = "__interrupt__"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"  # LangGraph's task id for Command(resume=v)
# The `configurable` key that names the bridge thread a run serves; LangGraph copies it into the
# metadata of every checkpoint it writes for that run, so each branch of a thread is readable.
THREAD_KEY = "pymc_resume_thread"
# Sources of the checkpoints LangGraph writes: a step of a run, a client's update_state, the
# copy time travel makes before it re-runs from a past checkpoint, a run's input.
LOOP, UPDATE_SOURCE, FORK_SOURCE, INPUT_SOURCE = "loop", "update", "fork", "input"
# The modules whose exceptions are LangGraph's answer to its client (Pydantic validates its state).
FRAMEWORK_MODULES = ("langgraph", "pydantic", "pydantic_core")

FRAMEWORK_CALLS = {
    "start": "graph.invoke(initial_state, {'configurable': {'thread_id': t}}, durability=d)",
    "resume": "graph.invoke(Command(resume=v), config, durability=d); config is the thread id, plus the "
    "branch head's checkpoint_id when the branch is not the thread's newest",
    "resume-together": "k processes, each graph.invoke(Command(resume=v), config, durability=d)",
    "crash": "SIGKILL of the client process running graph.invoke (inside a node, or right after the "
    "checkpointer's put of the stage's checkpoint)",
    "recover": "graph.invoke(None, config, durability=d) in a fresh process",
    "fork": "time travel in the same thread id: replay is graph.invoke(None, {'thread_id': t, "
    "'checkpoint_id': c}); edit is graph.update_state({'thread_id': t, 'checkpoint_id': c}, "
    "{field: v}, as_node=the interrupt's node), then graph.invoke(None, config)",
    "update": "graph.update_state(config, {'note': v})",
}
DURABLE_EXECUTION_DOCS = "https://docs.langchain.com/oss/python/langgraph/durable-execution"
# Where the sink key comes from: nowhere, as LangGraph documents none (see the module docstring).
EFFECT_KEY = {
    "key": "none",
    "why": "LangGraph documents no identity for deduplicating a side effect: its durable-execution page "
    "asks that side effects be idempotent and says 'Use idempotency keys or verify existing results to "
    f"avoid unintended duplication', leaving the key to the user ({DURABLE_EXECUTION_DOCS}, Determinism "
    "and Consistent Replay); the task id in checkpoint_ns is not documented as one",
}
TIME_TRAVEL_DOCS = "https://docs.langchain.com/oss/python/langgraph/use-time-travel"
INTERRUPTS_DOCS = "https://docs.langchain.com/oss/python/langgraph/interrupts"
PERSISTENCE_DOCS = "https://docs.langchain.com/oss/python/langgraph/persistence"
GATE_DOCS = "docs/gate.md (pymc_resume.gate, a separately named configuration)"
REPLAY_AT_CHECKPOINT = "replay-at-checkpoint"
UPDATE_STATE = "update-state"
COMMAND_AT_CHECKPOINT = "command-at-checkpoint"
# The fork variants: one call for a replay fork, two for an edit fork.
FORK_VARIANTS = (
    Variant(
        "fork",
        REPLAY_AT_CHECKPOINT,
        "graph.invoke(None, {'configurable': {'thread_id': t, 'checkpoint_id': c}})",
        f"{TIME_TRAVEL_DOCS} (Replay)",
        intents=("replay",),
    ),
    Variant(
        "fork",
        UPDATE_STATE,
        "graph.update_state({'configurable': {'thread_id': t, 'checkpoint_id': c}}, {field: v}, "
        "as_node=the interrupt's node), then graph.invoke(None, config)",
        f"{TIME_TRAVEL_DOCS} (Fork; From a specific node)",
        intents=("edit",),
    ),
    Variant(
        "fork",
        COMMAND_AT_CHECKPOINT,
        "graph.invoke(Command(resume=v), {'configurable': {'thread_id': t, 'checkpoint_id': c}}) at a "
        "checkpoint parked at the interrupt: two documented calls combined, which no page shows together "
        "(time travel's invoke at a past checkpoint_id, with the resume Command as input instead of None)",
        f"time travel: {TIME_TRAVEL_DOCS} (4. Resume execution from the checkpoint: invoke with the "
        f"config's checkpoint_id); Command(resume=v): {INTERRUPTS_DOCS} (Resuming interrupts)",
        intents=("edit",),
    ),
)
GATE_CALLS = {
    "resume": "ConsumeOnceGate.resume(graph, config, v) (validate, claim in the store, then "
    "graph.invoke(Command(resume=v), config))",
    "resume-together": "k processes, each ConsumeOnceGate.resume(graph, config, v)",
    "recover": "ConsumeOnceGate.recover(graph, config) (graph.invoke(Command(resume=claimed value)) "
    "for an outstanding claim, else graph.invoke(None, config))",
}


def _langgraph_version() -> str:
    from importlib.metadata import version

    return version("langgraph")


_CONTROL: ClientControl | None = None


def _field(node: int) -> str:
    return f"n{node}"


def _node_name(first_stage: int) -> str:
    """A LangGraph node is named by the first stage it runs (its trigger channel is
    `branch:to:s<stage>`, which is how a checkpoint's position is read)."""
    return f"s{first_stage}"


class LangGraphAdapter:
    name = "langgraph"
    capabilities = frozenset({"recorded-inputs", "executions", "late-inputs"})
    effect_key = EFFECT_KEY
    # Imported once in the host template (none starts a thread at import).
    preload = preloading(
        "pydantic",
        "langgraph.graph",
        "langgraph.types",
        "langgraph.config",
        "langgraph.checkpoint.sqlite",
        "langgraph.checkpoint.sqlite.aio",
        "langgraph.checkpoint.postgres",
        "langgraph.checkpoint.postgres.aio",
        "psycopg",
        "aiosqlite",
    )

    def __init__(
        self,
        durability: str = "sync",
        store: str = "sqlite",
        gate: bool = False,
        effect_then_interrupt: str = "two-nodes",
    ) -> None:
        if durability not in DURABILITY:
            raise KeyError(f"durability {durability!r} (one of {', '.join(DURABILITY)})")
        if store not in STORES:
            raise KeyError(f"store {store!r} (one of {', '.join(STORES)})")
        if effect_then_interrupt not in EFFECT_THEN_INTERRUPT:
            raise KeyError(
                f"effect_then_interrupt {effect_then_interrupt!r} (one of {', '.join(EFFECT_THEN_INTERRUPT)})"
            )
        module = "langgraph.checkpoint.sqlite" if store == "sqlite" else "langgraph.checkpoint.postgres"
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise RuntimeError(
                f"{module} is not installed ({error}); pip install 'pymc-resume[langgraph]'"
            ) from None
        self.durability = durability
        self.store = store
        self.gate = bool(gate)
        self.effect_then_interrupt = effect_then_interrupt
        self.version = f"langgraph {_langgraph_version()}"
        self.path: Path | None = None
        self.prefix = ""  # thread ids are unique per example
        self.url = ""  # PostgreSQL: the server's, with the example's schema as its search path
        self.schema: str | None = None
        self.server = ""  # PostgreSQL: the server's URL, as it was when the example opened
        self.workflow: Workflow | None = None
        self.run_node = None
        # Per bridge thread: its LangGraph thread id ("lg"), the checkpoint id its branch forks
        # from ("base", None for a root) and the client's memory of its last process ("run").
        self.threads: list[dict] = []
        self._saver = None
        self._graph = None
        self._gate: ConsumeOnceGate | None = None  # the bridge process's own, to observe claims

    @property
    def variants(self) -> tuple[Variant, ...]:
        """Every operation's documented call(s): one each, but for an edit fork's two."""
        calls = self.framework_calls
        resume_docs = GATE_DOCS if self.gate else INTERRUPTS_DOCS
        return (
            Variant("start", "invoke", calls["start"], PERSISTENCE_DOCS),
            Variant("resume", "gate-resume" if self.gate else "command-resume", calls["resume"], resume_docs),
            Variant("resume-together", "concurrent-resume", calls["resume-together"], resume_docs),
            Variant("recover", "invoke-none", calls["recover"], GATE_DOCS if self.gate else PERSISTENCE_DOCS),
            *FORK_VARIANTS,
            Variant("update", "update-state", calls["update"], PERSISTENCE_DOCS + " (Update state)"),
        )

    @property
    def framework_calls(self) -> dict[str, str]:
        calls = {**FRAMEWORK_CALLS, **GATE_CALLS} if self.gate else dict(FRAMEWORK_CALLS)
        if self.effect_then_interrupt == "one-node":
            calls["crash"] += (
                "; for the effect of the one-node effect-then-interrupt, after the put_writes "
                "of its interrupt"
            )
        return calls

    def options(self) -> dict:
        options = {"durability": self.durability}
        if self.store != "sqlite":
            options["store"] = self.store
        if self.gate:
            options["gate"] = True
        if self.effect_then_interrupt != "two-nodes":
            options["effect_then_interrupt"] = self.effect_then_interrupt
        return options

    # -- the graph -----------------------------------------------------------------------

    def _node_stages(self) -> list[tuple[int, ...]]:
        """The stages each LangGraph node runs, in order: one stage per node, except that a
        one-node effect-then-interrupt runs both of its stages."""
        groups: list[tuple[int, ...]] = []
        for s, stage in enumerate(self.workflow.stages):
            joined = (
                self.effect_then_interrupt == "one-node"
                and groups
                and self.workflow.stages[groups[-1][0]].node == stage.node
            )
            if joined:
                groups[-1] += (s,)
            else:
                groups.append((s,))
        return groups

    def _first_stage_of(self, stage: int) -> int:
        """The first stage of the LangGraph node that runs `stage`."""
        return next(group[0] for group in self._node_stages() if stage in group)

    def _one_node_effect(self, pc: int) -> bool:
        """Whether the LangGraph node at position `pc` fires an effect and then interrupts."""
        return any(len(group) > 1 and group[0] == pc for group in self._node_stages())

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
        for stages in self._node_stages():
            name = _node_name(stages[0])
            graph.add_node(name, _node(stages, workflow, names, run_node))
            graph.add_edge(previous, name)
            previous = name
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

            conn = psycopg.connect(self.url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        adapter = self

        class Saver(base):
            """The checkpointer, with the after-commit crash point after each write that records
            a stage (it only watches: every write is LangGraph's own)."""

            def put(self, config, checkpoint, metadata, new_versions):
                result = super().put(config, checkpoint, metadata, new_versions)
                adapter._stored_checkpoint(checkpoint, metadata)
                return result

            def put_writes(self, config, writes, task_id, task_path=""):
                result = super().put_writes(config, writes, task_id, task_path)
                if any(channel == INTERRUPT for channel, _ in writes):
                    adapter._stored_interrupt(self.get_tuple(config))
                return result

        saver = Saver(conn)
        if setup or self.store == "sqlite":
            saver.setup()
        return saver

    def _stored_checkpoint(self, checkpoint, metadata) -> None:
        """A run's checkpoint is stored: it commits every stage before its position."""
        if _CONTROL is not None and metadata.get("source") == LOOP:
            _CONTROL.committed(range(self._pc_of(checkpoint)))

    def _stored_interrupt(self, entry) -> None:
        """A node's interrupt is stored: for a one-node effect-then-interrupt, the record that
        its effect stage ran (LangGraph writes no checkpoint between the two stages)."""
        if _CONTROL is not None and entry is not None:
            pc = self._pc_of(entry.checkpoint)
            if self._one_node_effect(pc):
                _CONTROL.committed((pc,))

    def _initial(self) -> dict:
        return {_field(n): 0 for n in range(len(self.workflow.nodes))} | {"note": 0}

    def _thread_id(self, thread: int) -> str:
        return self.prefix + self.threads[thread]["lg"]

    def _thread_config(self, thread: int) -> dict:
        """The LangGraph thread of a bridge thread, without a checkpoint (for reading)."""
        return {"configurable": {"thread_id": self._thread_id(thread), "checkpoint_ns": ""}}

    def _run_config(self, thread: int) -> dict:
        """The config a call for bridge thread `thread` passes to LangGraph: its thread id, the
        bridge thread (copied into the metadata of the checkpoints the call writes) and, unless
        the branch's head is the LangGraph thread's newest checkpoint of a branch that has run,
        the head's checkpoint id (time travel: the only way to run an older branch)."""
        configurable = {"thread_id": self._thread_id(thread), "checkpoint_ns": "", THREAD_KEY: thread}
        entries = self._entries(thread)
        head = self._head(thread, entries)
        if head is not None:
            own = any(_owner(entry) == thread for entry in entries)
            if not own or head.checkpoint["id"] != entries[0].checkpoint["id"]:
                configurable["checkpoint_id"] = head.checkpoint["id"]
        return {"configurable": configurable}

    def open(self, setup: FuzzSetup) -> None:
        self.path = setup.workdir / "langgraph.db"
        self.workflow = setup.workflow
        self.run_node = setup.run_node
        self.prefix = f"{uuid.uuid4().hex}-"
        self.threads = [{"lg": "t0", "base": None, "run": "new"}]
        if self.store == "postgres":
            # The example's own schema, as the saver's (and the gate's) only search path: LangGraph
            # creates its tables there (`setup`), and `close` drops them all with the schema.
            self.server = server = postgres_url()  # the one `close` drops the schema on
            sweep_schemas(server, setup.workdir.parent)  # a killed bridge's examples closed nothing
            self.schema = schema_of(setup.workdir, SCHEMA_TAG)
            create_schema(server, self.schema)
            self.url = in_schema(server, self.schema)
        self._saver = self._connect(setup=True)
        self._graph = self._build(self._saver)
        self._gate = ConsumeOnceGate.for_checkpointer(self._saver) if self.gate else None

    def close(self) -> None:
        try:
            if self._saver is not None:
                self._saver.conn.close()
        finally:
            self._saver = self._graph = self._gate = None
            if self.schema is not None:  # the shared database keeps nothing of the example
                drop_schema(self.server, self.schema)
                self.schema = None

    # -- operations that run nodes: in child processes -------------------------------------

    def start(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._run(thread, self._start_payload(thread), "run", crash, op)

    def resume(self, thread: int, value: int, crash: CrashPoint | None, op: str) -> Outcome:
        from langgraph.types import Command

        return self._run(thread, lambda: Command(resume=value), "delivery", crash, op)

    def recover(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._run(thread, self._start_payload(thread), "recovery", crash, op)

    def _start_payload(self, thread: int):
        """The input of a run that continues a branch: none (continue its head), or the
        initial state when the branch has no checkpoint yet (a root never run, or whose first
        run was killed before LangGraph stored anything)."""
        payload = None if self._head(thread, self._entries(thread)) is not None else self._initial()
        return lambda: payload

    def resume_together(self, thread: int, values: list[int], window: str | None, op: str) -> list[Outcome]:
        from langgraph.types import Command

        config = self._run_config(thread)
        tasks = [
            self._task(thread, config, lambda v=v: Command(resume=v), "delivery", None, f"{op}.{i}", window)
            for i, v in enumerate(values)
        ]
        results = run_in_children(tasks, synchronized=window is not None)
        return [self._settle(thread, result) for result in results]

    def _run(self, thread, payload, role, crash, op) -> Outcome:
        task = self._task(thread, self._run_config(thread), payload, role, crash, op, None)
        [result] = run_in_children([task])
        return self._settle(thread, result)

    def _task(self, thread: int, config: dict, payload, role: str, crash, op: str, window: str | None):
        def task(barrier: Barrier) -> dict:
            global _CONTROL
            _CONTROL = ClientControl(thread, op, role, crash, window, barrier)
            saver = self._connect()  # this process's own connection
            graph = self._build(saver)
            gate = ConsumeOnceGate.for_checkpointer(saver) if self.gate else None
            try:
                seen = None
                if window == "after-load":  # the client reads the head, then the deliveries race
                    seen = gate.parked(graph, config) if gate else graph.get_state(config)
                    _CONTROL.at("after-load", -1)
                self._invoke(graph, gate, config, role, payload(), seen)
            except Exception as error:
                if isinstance(error, GateRefusal) or _raised_by_framework(error):  # the gate's or LangGraph's
                    # The gate is part of a `+gate` configuration: its refusals are that system's.
                    return {"status": REFUSED, "detail": f"{type(error).__name__}: {error}", "by": FRAMEWORK}
                raise
            return {"status": OK, "detail": ""}

        return task

    def _invoke(self, graph, gate, config, role: str, payload, seen) -> None:
        """Run the graph: through the gate when it is on (a delivery claims first; a recovery
        continues an outstanding claim), else LangGraph's own invoke."""
        if gate is not None and role == "delivery":
            gate.resume(
                graph, config, payload.resume, seen=seen, validate=_valid_value, durability=self.durability
            )
        elif gate is not None and role == "recovery" and payload is None:
            gate.recover(graph, config, durability=self.durability)
        else:
            graph.invoke(payload, config, durability=self.durability)

    def _settle(self, thread: int, result) -> Outcome:
        return settle(self.threads[thread], result, "LangGraph")

    # -- client calls that run no node -----------------------------------------------------

    def fork(
        self, thread: int, checkpoint: int, intent: str, value: int | None, variant: str = UPDATE_STATE
    ) -> Outcome:
        """A branch of the same LangGraph thread from one of `thread`'s checkpoints (time
        travel). A replay fork is made by its first run (`invoke(None)` at the checkpoint); an
        edit fork now, by `update_state` at the checkpoint as the interrupt's node, or by
        `invoke(Command(resume=v))` at the checkpoint (`variant`), which runs it at once."""
        view = self._view_chain(self._chain_tuples(thread))
        if not 0 <= checkpoint < len(view):
            return Outcome(REFUSED, f"no checkpoint {checkpoint}", by=NOT_EXPRESSIBLE)
        position, source = view[checkpoint]
        if source is None:
            return Outcome(
                REFUSED,
                f"checkpoint {checkpoint} is inside a checkpoint LangGraph wrote for "
                "several nodes at once: LangGraph has no checkpoint there to travel to",
                by=NOT_EXPRESSIBLE,
            )
        stage = position.pc
        if intent == "edit" and variant == COMMAND_AT_CHECKPOINT:
            if stage >= self.workflow.end or not self.workflow.consumes[stage]:
                return Outcome(
                    REFUSED,
                    f"checkpoint {checkpoint} is not parked at an interrupt: Command(resume=v) answers one",
                    by=NOT_EXPRESSIBLE,
                )
        new = len(self.threads)
        self.threads.append({"lg": self.threads[thread]["lg"], "base": source.checkpoint["id"], "run": "new"})
        if intent != "edit":
            return Outcome(
                OK, f"forked as thread {new} (a branch from checkpoint {source.checkpoint['id']})", thread=new
            )
        if variant == COMMAND_AT_CHECKPOINT:
            return self._fork_by_command(new, value, source.checkpoint["id"])
        values = {_field(self.workflow.stages[stage].node): value}
        try:
            as_node = _node_name(self._first_stage_of(stage))
            self._graph.update_state(self._run_config(new), values, as_node=as_node)
        except Exception as error:
            if not _raised_by_framework(error):
                raise
            self.threads.pop()
            return Outcome(REFUSED, f"{type(error).__name__}: {error}", by=FRAMEWORK)
        return Outcome(
            OK, f"forked as thread {new} (update_state at checkpoint {source.checkpoint['id']})", thread=new
        )

    def _fork_by_command(self, new: int, value: int, base: str) -> Outcome:
        """The `command-at-checkpoint` edit fork: its first run answers the interrupt at the
        checkpoint with `value`, in a child process like any run (no crash point: a fork step
        has none)."""
        from langgraph.types import Command

        outcome = self._run(new, lambda: Command(resume=value), "run", None, f"fork-t{new}")
        if outcome.status != OK:
            if not any(_owner(entry) == new for entry in self._entries(new)):
                self.threads.pop()  # LangGraph made no branch
            return outcome
        return Outcome(OK, f"forked as thread {new} (Command(resume) at checkpoint {base})", thread=new)

    def update(self, thread: int, note: int) -> Outcome:
        try:
            self._graph.update_state(self._run_config(thread), {"note": note})
        except Exception as error:
            if _raised_by_framework(error):
                return Outcome(REFUSED, f"{type(error).__name__}: {error}", by=FRAMEWORK)
            raise
        return Outcome(OK, "updated")

    # -- observation: read-only ----------------------------------------------------------------

    def _entries(self, thread: int) -> list:
        """Every checkpoint of the bridge thread's LangGraph thread (all its branches), newest
        first, each a CheckpointTuple with its pending writes."""
        return [
            entry
            for entry in self._saver.list(self._thread_config(thread))
            if entry.config["configurable"].get("checkpoint_ns", "") == ""
        ]

    def _head(self, thread: int, entries: list):
        """The head of the bridge thread's branch: the newest checkpoint LangGraph wrote for it,
        else the checkpoint it forks from (None: a root with no checkpoint yet)."""
        for entry in entries:
            if _owner(entry) == thread:
                return entry
        base = self.threads[thread]["base"]
        return None if base is None else next(entry for entry in entries if entry.checkpoint["id"] == base)

    def _chain_tuples(self, thread: int, entries: list | None = None) -> list:
        """The branch's checkpoints back to the thread's first, oldest first."""
        entries = self._entries(thread) if entries is None else entries
        by_id = {entry.checkpoint["id"]: entry for entry in entries}
        head = self._head(thread, entries)
        chain = []
        while head is not None:
            chain.append(head)
            parent = head.parent_config
            head = by_id.get(parent["configurable"]["checkpoint_id"]) if parent else None
        return chain[::-1]

    def _view_chain(self, tuples: list) -> list[tuple[Checkpoint, object]]:
        """The model's chain for a branch's LangGraph checkpoints, each with the CheckpointTuple
        it shows.

        A LangGraph checkpoint that records several nodes at once (durability "exit" writes one
        when the run parks or ends) is shown as one model checkpoint per stage it commits, each
        with the state after that stage, which is exact here: every stage writes only its own
        node's field. Those in-between entries (and the initial one when LangGraph wrote none)
        have no LangGraph checkpoint of their own (None). A `fork` checkpoint (time travel's
        copy of the checkpoint it re-runs from) shows nothing new; an `update` checkpoint that
        moves past an interrupt (an edit fork's update_state as the interrupt's node) commits
        that stage; another update is an UPDATE entry. The interrupt write of a one-node
        effect-then-interrupt records its effect stage (shown as that stage's commit).
        """
        workflow = self.workflow
        names = [_field(n) for n in range(len(workflow.nodes))] + ["note"]
        chain: list[tuple[Checkpoint, object]] = []
        for entry in tuples:
            step = entry.metadata.get("step", -1)
            source = entry.metadata.get("source")
            if source == INPUT_SOURCE or step < 0:
                continue
            values = entry.checkpoint["channel_values"]
            app = tuple(int(values.get(name, 0)) for name in names)
            pc = self._pc(entry)
            if source == FORK_SOURCE and chain:
                if chain[-1][0].pc == pc + 1 and self._one_node_effect(pc):
                    chain.pop()  # the effect record of the checkpoint it copies: its own comes below
                self._add_effect_record(chain, entry, app, pc)
                continue
            if not chain and (source != LOOP or pc > 0):  # LangGraph wrote no initial checkpoint
                initial = self.workflow.initial_state()[:-1] + (app[-1],)
                chain.append((Checkpoint(0, initial, INITIAL), None))
            before = chain[-1][0].pc if chain else 0
            if source != LOOP and pc <= before:
                chain.append((Checkpoint(pc, app, UPDATE), entry))
            elif pc == 0:
                chain.append((Checkpoint(0, app, INITIAL), entry))
            else:
                for stage in range(before, pc):  # the stages this checkpoint commits
                    last = stage == pc - 1
                    chain.append(
                        (
                            Checkpoint(stage + 1, app if last else _after(workflow, app, stage), stage),
                            entry if last else None,
                        )
                    )
            self._add_effect_record(chain, entry, app, pc)
        return chain

    def _add_effect_record(self, chain: list, entry, app: tuple, pc: int) -> None:
        """After a checkpoint parked before a one-node effect-then-interrupt: the commit of its
        effect stage when its interrupt is stored on the checkpoint."""
        interrupted = any(channel == INTERRUPT for _, channel, _ in entry.pending_writes or ())
        if self._one_node_effect(pc) and interrupted:
            chain.append((Checkpoint(pc + 1, app, pc), entry))

    def _pc(self, entry) -> int:
        return self._pc_of(entry.checkpoint)

    def _pc_of(self, checkpoint) -> int:
        """The checkpoint's position: the first stage of the node LangGraph runs next, or the end.

        Read from the raw checkpoint (the node's trigger channel `branch:to:sK` holds a value),
        not from `get_state`, which raises on a checkpoint whose state breaks the schema.
        """
        waiting = [
            int(key[len("branch:to:s") :])
            for key in checkpoint["channel_values"]
            if key.startswith("branch:to:s")
        ]
        return min(waiting) if waiting else self.workflow.end

    def _inputs(self, tuples: list, view: list[tuple[Checkpoint, object]]) -> dict[int, int]:
        """Recorded inputs on every checkpoint of the branch: the committed values, then, for
        each interrupt, the record on the checkpoint it parked at (see `_record`), unless its
        branch went on from a checkpoint that is not a run's commit of that one (an edit fork's
        update_state, whose input is the state it wrote; time travel's copy, which drops them)."""
        workflow = self.workflow
        chain = [c for c, _ in view]
        inputs = {
            e.stage: e.app[workflow.stages[e.stage].node]
            for e in chain
            if e.stage >= 0 and workflow.consumes[e.stage]
        }
        parked_at = _parked_positions(tuples, view)
        for index, entry in enumerate(tuples):
            pc = parked_at.get(entry.checkpoint["id"])
            if pc is None or pc >= workflow.end or not workflow.consumes[pc]:
                continue
            following = tuples[index + 1] if index + 1 < len(tuples) else None
            if following is not None and following.metadata.get("source") != LOOP:
                continue  # the branch went on from a checkpoint of its own: these records are not read
            recorded = _record(entry, _field(workflow.stages[pc].node))
            if recorded is not None:
                inputs[pc] = recorded
        return inputs

    def observe(self) -> Observation:
        workflow = self.workflow
        views = []
        for t, thread in enumerate(self.threads):
            tuples = self._chain_tuples(t)
            view = self._view_chain(tuples)
            chain = [c for c, _ in view]
            if not chain:
                chain = [Checkpoint(0, tuple(self._initial().values()), INITIAL)]
            inputs = self._inputs(tuples, view)
            late = []
            head = tuples[-1] if tuples else None
            claim = (
                self._gate.outstanding_claim(self._run_config(t), self._graph)
                if self._gate is not None
                else None
            )
            if claim is not None and head is not None and head.checkpoint["id"] == claim.checkpoint_id:
                inputs.setdefault(chain[-1].pc, int(claim.value))  # claimed, not yet recorded by LangGraph
            if head is not None:
                resumes = [w for _, channel, w in head.pending_writes or () if channel == RESUME]
                pc = chain[-1].pc
                if resumes and not (pc < workflow.end and workflow.consumes[pc]) and workflow.consuming:
                    reached = [s for s in workflow.consuming if s < pc]
                    if reached:
                        late += [(reached[-1], _value(w)) for w in resumes]
            views.append(ThreadView(tuple(chain), thread["run"], inputs, tuple(late)))
        return Observation(tuple(views))


def _owner(entry) -> int | None:
    """The bridge thread a checkpoint was written for (its metadata), or None."""
    owner = entry.metadata.get(THREAD_KEY)
    return None if owner is None else int(owner)


def _parked_positions(tuples: list, view: list[tuple[Checkpoint, object]]) -> dict[str, int]:
    """Checkpoint id -> the model position its branch was at on it (its last view entry; a
    checkpoint the view shows nothing for keeps the position before it)."""
    positions: dict[str, int] = {}
    by_id = {}
    for checkpoint, entry in view:
        if entry is not None:
            by_id[entry.checkpoint["id"]] = checkpoint.pc
    pc = view[0][0].pc if view else 0
    for entry in tuples:
        pc = by_id.get(entry.checkpoint["id"], pc)
        positions[entry.checkpoint["id"]] = pc
    return positions


def _record(entry, field: str) -> int | None:
    """The input recorded on a checkpoint for the interrupt parked there: the interrupted task's
    own `__resume__` record (what `interrupt()` returned to it), else its write of the
    interrupt's field (an output recorded for it, e.g. by update_state as that node), else the
    `__resume__` write of a `Command(resume=v)` not yet read (the claim); None when none."""
    writes = entry.pending_writes or ()
    own = [w for task, channel, w in writes if channel == RESUME and task != NULL_TASK_ID]
    if own:
        return _value(own[-1])
    outputs = [w for task, channel, w in writes if channel == field and task != NULL_TASK_ID]
    if outputs:
        return int(outputs[-1])
    delivered = [w for task, channel, w in writes if channel == RESUME and task == NULL_TASK_ID]
    return _value(delivered[-1]) if delivered else None


def _raised_by_framework(error: BaseException) -> bool:
    """Whether LangGraph (or the Pydantic validation it runs) raised `error` to its client, rather
    than the bridge's node code or this adapter: the innermost frame on its traceback that belongs
    to LangGraph, Pydantic or pymc_resume is LangGraph's or Pydantic's."""
    innermost = None
    for frame in traceback.extract_tb(error.__traceback__):
        path = frame.filename.replace("\\", "/")
        if "/pymc_resume/" in path:
            innermost = "pymc_resume"
        elif any(f"/{module}/" in path for module in FRAMEWORK_MODULES):
            innermost = "framework"
    if innermost is None:  # raised from compiled code with no Python frame of its own
        return type(error).__module__.split(".")[0] in FRAMEWORK_MODULES
    return innermost == "framework"


def _after(workflow: Workflow, app: tuple[int, ...], stage: int) -> tuple[int, ...]:
    """`app` (a later state of the same run) as it was right after `stage`: the fields of nodes
    whose writing stage comes later are not yet written."""
    out = list(app)
    for later in workflow.stages[stage + 1 :]:
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


def _node(stages: tuple[int, ...], workflow: Workflow, names: list[str], run_node):
    """The LangGraph node that runs `stages` in order (one stage, or a one-node
    effect-then-interrupt's effect and then its interrupt); a consuming stage calls
    `interrupt()` before its code."""
    from langgraph.types import interrupt

    def node(state):
        control = _CONTROL
        app = tuple(getattr(state, name) for name in names)
        for s in stages:
            stage = workflow.stages[s]
            value = interrupt({"stage": s}) if stage.consumes else None
            control.at("before-execute", s)
            # No key (EFFECT_KEY): LangGraph documents none for a side effect.
            context = NodeContext(
                thread=control.thread, stage=s, node=stage.node, op=control.op, role=control.role
            )
            app = run_node(s, app, value, context)
            control.executed.add(s)
            control.at("after-execute", s)
        node_index = workflow.stages[stages[0]].node
        return {names[node_index]: app[node_index]}

    node.__name__ = _node_name(stages[0])
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


class LangGraphOneNode(LangGraphAdapter):
    """An effect-then-interrupt node as one LangGraph node (effect, then `interrupt()`)."""

    def __init__(self, durability: str = "sync", effect_then_interrupt: str = "one-node") -> None:
        super().__init__(durability, effect_then_interrupt=effect_then_interrupt)
