"""The bridge adapter for pydantic-graph: a real `Graph` of `BaseNode` classes whose run is
persisted by a real `FileStatePersistence` (one JSON file per thread in the example's workdir).

The fuzzing workflow becomes a linear graph, one node class per stage of the model (`S0`,
`S1`, ...; an effect-then-interrupt node is two classes, the effect then the wait). Node code is
the bridge's `run_node`. The state is a Pydantic model whose fields are `>= 0`, and a consuming
node's `value` field is `>= 0` too, so pydantic-graph is given the chance to refuse the
schema's forbidden value (-1); it validates them when it loads the file.

pydantic-graph persists a run as a list of snapshots: a `NodeSnapshot` (the state before a node
and the node to run, with a status `created` / `pending` / `running` / `success` / `error`)
appended after every node, and an `EndSnapshot` at the end. `iter_from_persistence` (its
documented way to continue a run) takes the first `created` snapshot (`load_next` marks it
`pending`) and runs from there; `record_run` marks a snapshot `running` while its node runs,
then `success`.

How the contract's operations map (docs/pydantic-graph.md says more):

- start: `graph.iter(S0(), state=initial, persistence=file)`, driven with `GraphRun.next()`
  until the next node is a consuming node without a value (the run parks: its snapshot is
  persisted `created`, the client stops iterating, as in pydantic-graph's human-in-the-loop
  example) or the run ends.
- resume(v), two variants (`VARIANTS`), each building the consuming node with the answer as
  a field (`S3(value=v)`), which pydantic-graph appends as a snapshot (the recorded value)
  before it runs it:
  - `load-next` (the default), the documented human-in-the-loop pattern, literally
    (`if snapshot := await persistence.load_next(): state = snapshot.state; node =
    Evaluate(answer) else: state = QuestionState(); node = Ask()`, then `graph.iter(node,
    state=state, persistence=persistence)`): the client takes the first `created` snapshot with
    `load_next()` (created -> pending) and runs its answered node on `snapshot.state`, whatever
    node was loaded. When `load_next` returns None (pydantic-graph raises nothing) the example's
    else branch starts a new run from the first node with a fresh state on the same persistence,
    and the answer is not used.
  - `iter-from-persistence`: `graph.iter_from_persistence(persistence)` restores the first
    `created` node (its own `load_next`) and the client hands it the answered node with
    `GraphRun.next(S3(value=v))` ("the node you want to run next"). With nothing waiting,
    `iter_from_persistence` raises `GraphRuntimeError` itself: pydantic-graph's refusal.
  Under both, the answered node's class is the question the client read before its load (the
  first `created` snapshot's node, the question the example's previous invocation printed); the
  client refuses before it calls pydantic-graph when that node asks nothing. Concurrent
  deliveries all read the question before any of them loads (the question both humans saw).
  The `after-load` race window is after the load and after the first `GraphRun.next` appended
  the answered node `created`, before `record_run` marks it `running` (the claim) in the same
  call; deliveries held there load one at a time (`_LoadTurns`), so a later load comes in that
  moment, as a free race does only by chance.
- recover: `iter_from_persistence` (nothing to do when the head is parked or ended). After a
  SIGKILL in the middle of a node that snapshot stays `running` forever and there is no
  `created` snapshot, so pydantic-graph raises `GraphRuntimeError`: the adapter returns it as a
  refusal.
- fork and update: not expressible (see `unsupported`); the adapter never writes the
  persistence file itself (it reads it to observe).

Refusals say whose they are (`Outcome.by`). One that pydantic-graph raised to its client
(`_from_pydantic_graph`: the innermost frame of pydantic-graph or pymc_resume on the traceback
is pydantic-graph's) is pydantic-graph's (`FRAMEWORK`). What to do when `load_next` finds no snapshot, the
human-in-the-loop example says in its else branch (start a new run), and the client does that;
whatever node `load_next` returns, the example runs its answered node on its state, and so does
the client. Where the client itself refuses (no question to answer: docs/pydantic-graph.md,
"Client refusals"), its refusal says that the rule is the adapter's (`ADAPTER_RULE`, `CLIENT`).

Crash points are real SIGKILLs of the child process that runs the graph: before or after the
node's code (in the node), or after the persistence appended the snapshot that records the
node's result (a wrapper around `FileStatePersistence.snapshot_node` / `snapshot_end`).
Effects are unkeyed (`EFFECT_KEY`): pydantic-graph documents no identity for a side effect. Its
API reference documents the snapshot id only as `NodeSnapshot.id`, "Unique ID of the snapshot"
(https://ai.pydantic.dev/api/pydantic_graph/persistence/), and nothing documents handing it to
node code (`BaseNode.get_snapshot_id` is undocumented), so the sink applies every fire.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from typing import Annotated, Optional

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
    Variant,
)
from pymc_resume.bridge.adapter.nodes import NodeContext
from pymc_resume.bridge.kit.child_process_adapter import NoOp
from pymc_resume.bridge.kit.preload import preloading
from pymc_resume.bridge.kit.process import Barrier, ClientControl, run_in_children, settle
from pymc_resume.model.state import INITIAL, Checkpoint
from pymc_resume.model.workflow import Workflow

UPDATE_UNSUPPORTED = (
    "pydantic-graph has no client API to write a run's state: snapshots are appended only by a "
    "running graph, and iter_from_persistence resumes the first 'created' snapshot, so a "
    "snapshot a client appends is not the one that runs"
)
FORK_UNSUPPORTED = (
    "pydantic-graph 1.x has no fork API: a run's persistence holds one run, iter_from_persistence "
    "continues it, and nothing starts a second run from an earlier snapshot (a copy of the "
    "persistence file would be the adapter's fork, not pydantic-graph's)"
)
# Where the sink key comes from: nowhere, as pydantic-graph documents none (the module docstring).
EFFECT_KEY = {
    "key": "none",
    "why": "pydantic-graph documents no identity for deduplicating a side effect: the snapshot id is "
    "documented only as NodeSnapshot.id, 'Unique ID of the snapshot', and nothing documents handing it "
    "to node code (BaseNode.get_snapshot_id has no documentation)",
}
# How a refusal made by the adapter's client code (not raised by pydantic-graph) begins.
ADAPTER_RULE = "the adapter's rule, not pydantic-graph's"

# Where pydantic-graph documents each call (the graph guide and its API reference, 1.x).
GRAPH_DOCS = "https://ai.pydantic.dev/graph/"
ITERATING_DOCS = f"{GRAPH_DOCS}#iterating-over-a-graph"
HITL_DOCS = f"{GRAPH_DOCS}#example-human-in-the-loop"
PERSISTENCE_DOCS = f"{GRAPH_DOCS}#state-persistence"
API_DOCS = "https://ai.pydantic.dev/api/pydantic_graph/graph/"
ITER_FROM_PERSISTENCE_API = f"{API_DOCS}#pydantic_graph.graph.Graph.iter_from_persistence"
NEXT_API = (
    f"{API_DOCS}#pydantic_graph.graph.GraphRun.next ('Manually drive the graph run by passing in the "
    "node you want to run next. This lets you inspect or mutate the node before continuing execution')"
)
LOAD_NEXT_API = (
    "https://ai.pydantic.dev/api/pydantic_graph/persistence/"
    "#pydantic_graph.persistence.BaseStatePersistence.load_next"
)

LOAD_NEXT = "load-next"
# What the human-in-the-loop pattern does when load_next finds nothing waiting (its else branch).
NO_SNAPSHOT = "load_next returned no snapshot: the pattern started a new run"
ITER_FROM_PERSISTENCE = "iter-from-persistence"
START_CALL = (
    "graph.iter(S0(), state=FuzzState(), persistence=FileStatePersistence(path)), driven with "
    "GraphRun.next() until the next node waits for a value or the run ends"
)
LOAD_NEXT_CALL = (
    "snapshot = await persistence.load_next() (created -> pending), then graph.iter(S{k}(value=v), "
    "state=snapshot.state, persistence=...) driven with GraphRun.next(); when it returns None, "
    "graph.iter(S0(), state=FuzzState(), persistence=...) (the human-in-the-loop pattern's else branch)"
)
ITER_FROM_PERSISTENCE_CALL = (
    "async with graph.iter_from_persistence(persistence) as run (restores the parked S{k}(), "
    "created -> pending): await run.next(S{k}(value=v)), then driven with GraphRun.next()"
)
RECOVER_CALL = "graph.iter_from_persistence(persistence) in a fresh process, driven with GraphRun.next()"

# The crash, which is no call of pydantic-graph's (every other operation's calls are its variants).
FRAMEWORK_CALLS = {
    "crash": "SIGKILL of the client process running the graph (inside a node, or right after "
    "FileStatePersistence.snapshot_node / snapshot_end appended the next snapshot)",
}

# Every documented way of performing each operation (`bridge/adapter/protocol.py`): the answer
# handed to the parked run by the human-in-the-loop pattern (load_next, then iter), or to the
# run iter_from_persistence restores (GraphRun.next with the answered node). The default first.
VARIANTS = (
    Variant("start", "iter", START_CALL, ITERATING_DOCS),
    Variant("resume", LOAD_NEXT, LOAD_NEXT_CALL, f"{HITL_DOCS}; {LOAD_NEXT_API}"),
    Variant(
        "resume",
        ITER_FROM_PERSISTENCE,
        ITER_FROM_PERSISTENCE_CALL,
        f"{PERSISTENCE_DOCS}; {ITER_FROM_PERSISTENCE_API}; {NEXT_API}",
    ),
    Variant("resume-together", LOAD_NEXT, f"k processes, each {LOAD_NEXT_CALL}", HITL_DOCS),
    Variant(
        "resume-together",
        ITER_FROM_PERSISTENCE,
        f"k processes, each {ITER_FROM_PERSISTENCE_CALL}",
        f"{PERSISTENCE_DOCS}; {NEXT_API}",
    ),
    Variant(
        "recover", ITER_FROM_PERSISTENCE, RECOVER_CALL, f"{PERSISTENCE_DOCS}; {ITER_FROM_PERSISTENCE_API}"
    ),
)


def _pydantic_graph_version() -> str:
    from importlib.metadata import version

    return version("pydantic-graph")


_CONTROL: ClientControl | None = None


def _field(node: int) -> str:
    return f"n{node}"


def _stage_of(node_id: str) -> int:
    return int(node_id[1:])


class PydanticGraphAdapter:
    name = "pydantic-graph"
    # Imported once in the host template (none starts a thread at import).
    preload = preloading(
        "pydantic", "pydantic_graph.graph", "pydantic_graph.basenode", "pydantic_graph.persistence.file"
    )
    capabilities = frozenset({"recorded-inputs", "leases", "executions", "late-inputs"})
    effect_key = EFFECT_KEY
    unsupported = {"update": UPDATE_UNSUPPORTED, "fork": FORK_UNSUPPORTED}
    framework_calls = FRAMEWORK_CALLS
    variants = VARIANTS

    def __init__(self) -> None:
        try:
            import pydantic_graph
        except ImportError as error:
            raise RuntimeError(
                f"pydantic-graph is not installed ({error}); pip install 'pymc-resume[pydantic-graph]'"
            ) from None
        self.version = f"pydantic-graph {_pydantic_graph_version()}"
        try:
            import pydantic_graph.graph
            import pydantic_graph.persistence.file  # noqa: F401
        except ImportError:
            raise RuntimeError(
                f"{self.version} has no BaseNode Graph runner and no state persistence "
                "(pydantic_graph.graph, pydantic_graph.persistence were removed in 2.0): "
                "nothing durable to resume; pip install 'pydantic-graph<2'"
            ) from None
        self.workdir: Path | None = None
        self.workflow: Workflow | None = None
        self.run_node = None
        self.threads: list[dict] = []  # per bridge thread: its file name and the client's run memory

    def options(self) -> dict:
        return {}

    def open(self, setup: FuzzSetup) -> None:
        self.workdir = setup.workdir
        self.workflow = setup.workflow
        self.run_node = setup.run_node
        self.threads = [{"file": "t0.json", "run": "new"}]

    def close(self) -> None:
        self.threads = []

    def _path(self, thread: int) -> Path:
        return self.workdir / self.threads[thread]["file"]

    # -- the graph (built in each child process) -------------------------------------------

    def _build(self):
        """(graph, state model, node classes by stage, persistence class) for this workflow."""
        from pydantic import BaseModel, Field, create_model
        from pydantic_graph.basenode import BaseNode, End
        from pydantic_graph.graph import (
            Graph,
        )  # the BaseNode runner (the top-level name is deprecated in 1.x)
        from pydantic_graph.persistence.file import FileStatePersistence

        workflow = self.workflow
        names = [_field(n) for n in range(len(workflow.nodes))] + ["note"]
        fields = {name: (Annotated[int, Field(ge=0)], 0) for name in names}
        state_model = create_model("FuzzState", __base__=BaseModel, **fields)

        classes: list[type] = [None] * len(workflow.stages)
        following = End[None]
        for s in reversed(range(len(workflow.stages))):
            classes[s] = _node_class(s, workflow, names, self.run_node, following, BaseNode, state_model)
            following = classes[s]
        graph = Graph(
            nodes=classes, name="fuzz", state_type=state_model, run_end_type=type(None), auto_instrument=False
        )

        class Persistence(FileStatePersistence):
            """The file persistence, with the after-commit crash point after each append, and a
            delivery's after-load window once its answered node is appended `created`."""

            on_recorded = None  # the delivery's window, called once

            async def snapshot_node_if_new(self, snapshot_id, state, next_node) -> None:
                await super().snapshot_node_if_new(snapshot_id, state, next_node)
                recorded, self.on_recorded = self.on_recorded, None
                if recorded is not None:
                    recorded()

            async def snapshot_node(self, state, next_node) -> None:
                await super().snapshot_node(state, next_node)
                if _CONTROL is not None:
                    _CONTROL.committed((_stage_of(next_node.get_node_id()) - 1,))

            async def snapshot_end(self, state, end) -> None:
                await super().snapshot_end(state, end)
                if _CONTROL is not None:
                    _CONTROL.committed((len(workflow.stages) - 1,))

        return graph, state_model, classes, Persistence

    # -- operations that run nodes: in child processes -------------------------------------

    def start(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._run(thread, "start", None, "run", crash, op)

    def resume(
        self, thread: int, value: int, crash: CrashPoint | None, op: str, variant: str = LOAD_NEXT
    ) -> Outcome:
        return self._run(thread, "resume", value, "delivery", crash, op, variant)

    def recover(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._run(thread, "recover", None, "recovery", crash, op)

    def resume_together(
        self, thread: int, values: list[int], window: str | None, op: str, variant: str = LOAD_NEXT
    ) -> list[Outcome]:
        # Every delivery answers the question the run showed before any of them began (both
        # humans saw the question the previous invocation printed): each reads it, then waits
        # at the barrier until all have. Held `after-load`, they also load one at a time.
        together = len(values) > 1
        if window == "after-load" and together:
            turns, fds = _load_turns(len(values))
        else:
            turns, fds = [_LoadTurns(together) for _ in values], []
        tasks = [
            self._task(thread, "resume", v, "delivery", None, f"{op}.{i}", window, variant, turns[i])
            for i, v in enumerate(values)
        ]
        try:
            results = run_in_children(tasks, synchronized=window is not None or together)
        finally:
            for fd in fds:
                os.close(fd)
        return [self._settle(thread, result) for result in results]

    def _run(self, thread: int, action: str, value, role: str, crash, op: str, variant: str = "") -> Outcome:
        [result] = run_in_children([self._task(thread, action, value, role, crash, op, None, variant)])
        return self._settle(thread, result)

    def _task(
        self,
        thread: int,
        action: str,
        value,
        role: str,
        crash,
        op: str,
        window: str | None,
        variant: str,
        turns: _LoadTurns | None = None,
    ):
        path = self._path(thread)

        def task(barrier: Barrier) -> dict:
            global _CONTROL
            _CONTROL = ClientControl(thread, op, role, crash, window, barrier)
            client = _Client(*self._build(), path, turns or _LoadTurns())
            call = getattr(client, action)
            try:
                return self._perform(client, call, action, value, variant)
            finally:
                client.turns.pass_on()  # a delivery that ends before its window lets the next load

        return task

    @staticmethod
    def _perform(client: _Client, call, action: str, value, variant: str) -> dict:
        """Run one client call and say how it ended, and whose a refusal is."""
        try:
            detail = asyncio.run(call(value, variant) if action == "resume" else call(value))
        except NoOp as nothing:
            return {"status": OK, "detail": str(nothing), "by": CLIENT}
        except _Refusal as refusal:
            return {"status": REFUSED, "detail": f"{ADAPTER_RULE}: {refusal}", "by": CLIENT}
        except Exception as error:
            if _from_pydantic_graph(error):
                detail = f"{client.began}{type(error).__name__}: {error}"
                return {"status": REFUSED, "detail": detail, "by": FRAMEWORK}
            raise
        return {"status": OK, "detail": detail}

    def _settle(self, thread: int, result) -> Outcome:
        return settle(self.threads[thread], result, "pydantic-graph")

    # -- observation: the raw JSON file, as stored (no validation) -------------------------

    def _view(self, snapshots: list[dict]) -> list[Checkpoint]:
        """The model's chain for a snapshot list.

        Every node run appends the snapshot of the next node with the state after it, so a
        snapshot whose node comes later than the previous checkpoint's commits the stage before
        it. A snapshot at the same position is the resume pattern's record of a delivered value
        (the consuming node with its `value`), not a checkpoint. A first node's snapshot after
        the first is a new run in the same file (the human-in-the-loop pattern's else branch):
        its stages commit again, further back than the head.
        """
        workflow = self.workflow
        names = [_field(n) for n in range(len(workflow.nodes))] + ["note"]
        chain: list[Checkpoint] = []
        run_pc = 0  # the position the current run has reached
        for snapshot in snapshots:
            pc = _pc(workflow, snapshot)
            app = tuple(int(snapshot["state"].get(name, 0)) for name in names)
            if not chain:
                chain.append(Checkpoint(pc, app, INITIAL if pc == 0 else pc - 1))
                run_pc = pc
            elif pc == 0:
                run_pc = 0
            elif pc > run_pc:
                chain.append(Checkpoint(pc, app, pc - 1))
                run_pc = pc
        return chain

    def _inputs(self, snapshots: list[dict]) -> tuple[dict[int, int], tuple[tuple[int, int], ...]]:
        """The current run's recorded values (the first per interrupt) and any recorded after
        it (late); a new run in the same file (see `_view`) starts with none."""
        starts = [i for i, s in enumerate(snapshots) if i and _pc(self.workflow, s) == 0]
        snapshots = snapshots[starts[-1] :] if starts else snapshots
        inputs: dict[int, int] = {}
        late: list[tuple[int, int]] = []
        for stage in self.workflow.consuming:
            values = [int(s["node"]["value"]) for s in _claims(snapshots, stage)]
            if values:
                inputs[stage] = values[0]
                late += [(stage, v) for v in values[1:]]
        return inputs, tuple(late)

    def observe(self) -> Observation:
        views = []
        for t, thread in enumerate(self.threads):
            snapshots = _read(self._path(t))
            chain = self._view(snapshots)
            if not chain:
                chain = [Checkpoint(0, self.workflow.initial_state(), INITIAL)]
            inputs, late = self._inputs(snapshots)
            views.append(ThreadView(tuple(chain), self._run_state(thread, snapshots), inputs, late))
        return Observation(tuple(views))

    @staticmethod
    def _run_state(thread: dict, snapshots: list[dict]) -> str:
        """ "dead" when the file holds a snapshot marked `running`: pydantic-graph's mark of the
        process that runs a node, and no process of this adapter is alive when the bridge
        observes (run_in_children reaps every child before it returns), so its holder crashed.
        Otherwise the client's memory: "new" before the first run, "dead" after a kill until a
        run succeeds, else "free"."""
        if any(s.get("kind") == "node" and s.get("status") == "running" for s in snapshots):
            return "dead"
        return thread["run"]


# -- the client's side, in the child process ------------------------------------------------


class _Refusal(Exception):
    """The client refuses before it asks pydantic-graph for anything."""


class _Client:
    """One process's calls to pydantic-graph for one thread's persistence file."""

    def __init__(self, graph, state_model, classes, persistence_class, path: Path, turns: _LoadTurns) -> None:
        self.graph, self.state_model, self.classes = graph, state_model, classes
        self.turns = turns
        self.persistence = persistence_class(path)
        self.persistence.set_graph_types(graph)
        # What the client began that it was not asked for, should pydantic-graph raise in it: a
        # refusal's detail begins with it (the new run may have run nodes and fired effects).
        self.began = ""

    def _parked(self, node) -> bool:
        return getattr(node, "value", False) is None

    async def _drive(self, run) -> str:
        """Run nodes until the run parks at an interrupt or ends."""
        from pydantic_graph.basenode import End

        node = run.next_node
        while not isinstance(node, End) and not self._parked(node):
            node = await run.next()
        return "ended" if isinstance(node, End) else f"parked at {node.get_node_id()}"

    async def _head(self):
        snapshots = await self.persistence.load_all()
        return snapshots[-1] if snapshots else None

    async def start(self, _value) -> str:
        async with self.graph.iter(
            self.classes[0](), state=self.state_model(), persistence=self.persistence
        ) as run:
            return await self._drive(run)

    async def recover(self, _value) -> str:
        head = await self._head()
        if head is None:
            return await self.start(None)
        if head.kind == "end":
            raise NoOp("already ended: nothing to recover")
        if head.status == "created" and self._parked(head.node):
            raise NoOp(f"parked at {head.node.get_node_id()}: nothing to recover")
        return await self._from_persistence()

    async def _from_persistence(self) -> str:
        async with self.graph.iter_from_persistence(self.persistence) as run:
            return await self._drive(run)

    async def _question(self):
        """The interrupt this client answers: the node class of the first `created` snapshot, the
        question the human-in-the-loop example's previous invocation printed before it stopped.
        The client refuses, before any call, when that node is no parked interrupt: the example
        answers only a question it showed (there is no answer node to build for any other)."""
        snapshots = await self.persistence.load_all()
        waiting = next((s for s in snapshots if s.kind == "node" and s.status == "created"), None)
        if waiting is None:
            return None
        if not self._parked(waiting.node):
            next_id = waiting.node.get_node_id()
            raise _Refusal(f"the run shows no question to answer (next to run: {next_id})")
        return type(waiting.node)

    def _loaded(self) -> None:
        """The client's load is done and the first `GraphRun.next` appended its answered node
        (`created`), not yet marked `running` by `record_run` (the claim, in the same call): the
        `after-load` race window. The next delivery may load now (see `_LoadTurns`)."""
        self.turns.pass_on()
        _CONTROL.at("after-load", -1)

    async def resume(self, value: int, variant: str = LOAD_NEXT) -> str:
        """The answer `value` to the question the run showed, handed over as `variant` says."""
        question = await self._question()
        self.turns.wait(_CONTROL.barrier)
        if variant == ITER_FROM_PERSISTENCE:
            return await self._resume_from_persistence(question, value)
        if variant != LOAD_NEXT:
            raise ValueError(f"unknown resume variant {variant!r}")
        snapshot = await self.persistence.load_next()
        if snapshot is None:
            # The pattern's else branch: with nothing waiting it starts a new run from the first
            # node, with a fresh state, on the same persistence; the answer is not used.
            self.began = f"{NO_SNAPSHOT}, in which pydantic-graph raised "
            self.persistence.on_recorded = self._loaded
            async with self.graph.iter(
                self.classes[0](), state=self.state_model(), persistence=self.persistence
            ) as run:
                where = await self._drive(run)
            return f"{NO_SNAPSHOT} ({where}), value unused"
        # As the example does (`node = Evaluate(answer)` on `snapshot.state`), whatever node
        # load_next returned: another delivery's answered node, when this load came between that
        # delivery's write of it (`created`) and its `record_run`, is run again with this answer.
        answered = self._answer_node(question, snapshot.node, value)
        self.persistence.on_recorded = self._loaded
        async with self.graph.iter(answered, state=snapshot.state, persistence=self.persistence) as run:
            return await self._drive(run)

    def _answer_node(self, question, loaded, value: int):
        """The answered node: the question's class with `value`; with no question seen (nothing
        was waiting when the client read the file), the loaded node's class if it is an
        interrupt's, else the client refuses (the example has no answer node for it)."""
        if question is None and hasattr(loaded, "value"):
            question = type(loaded)
        if question is None:
            raise _Refusal(
                f"the run showed no question, and the node it loaded ({loaded.get_node_id()}) is none"
            )
        return question(value=value)

    async def _resume_from_persistence(self, question, value: int) -> str:
        """iter_from_persistence restores the first `created` node (or raises when nothing
        waits); the client passes the answered node to GraphRun.next, which records it and runs
        it, whatever node was restored (as under load-next)."""
        async with self.graph.iter_from_persistence(self.persistence) as run:
            answered = self._answer_node(question, run.next_node, value)
            self.persistence.on_recorded = self._loaded
            await run.next(answered)
            return await self._drive(run)


class _LoadTurns:
    """The order of concurrent deliveries' loads. Every delivery reads the question first, and
    the loads begin once all have (the barrier, before any window), so that no delivery reads
    what another one's load wrote: both humans answer the question the run showed.

    Held at `after-load`, they also load one at a time, in delivery order: each begins its load
    (`load_next`, `iter_from_persistence`) once the one before it is held between its load and
    its claim, or has finished. So a later delivery's load sees what the earlier ones recorded,
    which is the interleaving a free race reaches only by chance (a second `load_next` in the
    moment between another delivery's `created` and `running`). One pipe between each pair of
    neighbours, made before the children fork; `wait` and `pass_on` are no-ops outside such a
    step."""

    def __init__(self, together: bool = False, receive: int | None = None, send: int | None = None) -> None:
        self.together, self.receive, self.send = together, receive, send

    def wait(self, barrier: Barrier) -> None:
        if self.together:
            barrier.wait()
        if self.receive is not None:
            os.read(self.receive, 1)
            self.receive = None

    def pass_on(self) -> None:
        if self.send is not None:
            os.write(self.send, b"t")
            self.send = None


def _load_turns(deliveries: int) -> tuple[list[_LoadTurns], list[int]]:
    """One `_LoadTurns` per delivery, chained in order, and every pipe end (for the parent to
    close once the children are reaped)."""
    pipes = [os.pipe() for _ in range(deliveries - 1)]
    turns = [
        _LoadTurns(True, pipes[i - 1][0] if i else None, pipes[i][1] if i < deliveries - 1 else None)
        for i in range(deliveries)
    ]
    return turns, [fd for pipe in pipes for fd in pipe]


def _node_class(s: int, workflow: Workflow, names: list[str], run_node, following, base, state_model) -> type:
    """The dataclass `S{s}` that runs stage `s` and returns the next stage's node (or End)."""
    from pydantic import Field
    from pydantic_graph.basenode import End

    stage = workflow.stages[s]
    last = s == len(workflow.stages) - 1

    async def run(self, ctx):
        control = _CONTROL
        control.at("before-execute", s)
        context = NodeContext(
            thread=control.thread,
            stage=s,
            node=stage.node,
            op=control.op,
            role=control.role,
        )  # no key (EFFECT_KEY): pydantic-graph documents none for a side effect
        app = tuple(getattr(ctx.state, name) for name in names)
        out = run_node(s, app, getattr(self, "value", None), context)
        setattr(ctx.state, names[stage.node], out[stage.node])
        control.executed.add(s)
        control.at("after-execute", s)
        return End(None) if last else following()

    run.__annotations__ = {"return": following}
    namespace = {"run": run, "__module__": __name__, "__qualname__": f"S{s}"}
    fields = []
    if stage.consumes:
        # Optional[...], as pydantic reads it at run time (the annotation is the schema).
        fields = [("value", Optional[Annotated[int, Field(ge=0)]], dataclasses.field(default=None))]  # noqa: UP045
    return dataclasses.make_dataclass(
        f"S{s}", fields, bases=(base[state_model, None, None],), namespace=namespace
    )


def _from_pydantic_graph(error: BaseException) -> bool:
    """Whether pydantic-graph raised `error` to its client (rather than the bridge's node code
    or this adapter): the innermost frame of pydantic-graph or pymc_resume on its traceback is
    pydantic-graph's. That covers its own errors, the Pydantic validation it runs when it loads
    the file, and what its file lock raises (`TimeoutError`, `FileNotFoundError`)."""
    innermost = None
    tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if "/pydantic_graph/" in filename:
            innermost = "pydantic_graph"
        elif "/pymc_resume/" in filename:
            innermost = "pymc_resume"
        tb = tb.tb_next
    return innermost == "pydantic_graph"


def _pc(workflow: Workflow, snapshot: dict) -> int:
    if snapshot.get("kind") == "end":
        return workflow.end
    return _stage_of(snapshot["node"]["node_id"])


def _claims(snapshots: list[dict], stage: int) -> list[dict]:
    """Snapshots of the consuming node at `stage` that carry a value, in order."""
    return [
        s
        for s in snapshots
        if s.get("kind") == "node"
        and _stage_of(s["node"]["node_id"]) == stage
        and s["node"].get("value") is not None
    ]


def _read(path: Path) -> list[dict]:
    """The persistence file as stored (read-only, no validation)."""
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return []
