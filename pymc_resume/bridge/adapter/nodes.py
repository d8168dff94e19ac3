"""The fuzzing workflow's node code: deterministic plain functions, as the contract asks.

One function, `run_node(stage, state, value, context)`, runs any stage of the workflow, the
way the model's semantics does: a step writes a function of the inputs consumed before it (1 or
2), an effect node writes 1 and fires its effect, an interrupt writes its value, a gated node
writes its value and fires when the value approves (1); an effect-then-interrupt node fires in
its first stage and takes its value in the second. Every execution is logged to the sink first.

`context` is whatever the framework hands node code, read by attribute: `thread`, `stage`,
`node`, and where the framework has them `op`, `role` and `idempotency_key`. An adapter builds
it as a `NodeContext`, whose fields say what each one is for (any object with those attributes
still works: the sink reads them with `getattr`).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from pymc_resume.bridge.adapter.sink import Sink
from pymc_resume.model.workflow import APPROVE, DONE, NodeKind, StageKind, Workflow

ROLES = ("run", "delivery", "recovery")


@attrs.frozen
class NodeContext:
    """What an adapter tells the bridge's node code about one execution of a stage.

    The sink logs every execution with these fields and keys every effect fire by
    `idempotency_key`, so each one decides what a clause sees:

    - `thread`, `stage`, `node`: the bridge's thread number, the model's stage index and the
      workflow node that stage belongs to (an effect-then-interrupt node has two stages);
    - `op`: the id of the client operation the bridge asked for (`start`, `resume`, ... get
      one each; concurrent deliveries get `op.0`, `op.1`, ...); None when unknown;
    - `role`: "run" (start), "delivery" (resume) or "recovery" (recover): the
      `executions` capability; `consume-once-consumption` counts the deliveries that executed
      a consuming stage, so a wrong role hides or invents a second consumption;
    - `idempotency_key`: the stable identity the framework itself hands node code (a task id,
      a snapshot id) that survives a re-execution after a crash; None when it hands none, and
      then every fire is an application (`effect-exactly-once` judges the framework's keys).
    """

    thread: int
    stage: int
    node: int
    op: str | None = None
    role: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.in_(ROLES))
    )
    idempotency_key: str | None = None


# The node code an adapter wraps in the framework's nodes: (stage, state, value, context) -> state.
NodeCode = Callable[[int, tuple[int, ...], "int | None", NodeContext], tuple[int, ...]]


@attrs.frozen
class FuzzNodes:
    workflow: Workflow
    sink: Sink

    def __call__(
        self, stage_index: int, state: tuple[int, ...], value: int | None, context
    ) -> tuple[int, ...]:
        return self.run_node(stage_index, state, value, context)

    def record_execution(self, context) -> None:
        """Log an execution of a stage that the framework ran with a node of its own (a
        built-in node kind: no node code of ours runs), as `run_node` logs its own."""
        self.sink.record_execution(context)

    def fire(self, context, state: tuple[int, ...]) -> bool:
        """An effect the framework's own node sent (through the outlet its adapter plugs into
        the sink): applied once per `context.idempotency_key`; `state` is the model's state the
        node saw (a gated node's with its value), from which the effect's identity is read."""
        return self.sink.fire(context, state)

    def run_node(
        self, stage_index: int, state: tuple[int, ...], value: int | None, context
    ) -> tuple[int, ...]:
        stage = self.workflow.stages[stage_index]
        node = stage.node
        self.sink.record_execution(context)
        app = list(state)
        if stage.kind is StageKind.STEP:
            app[node] = self.workflow.step_output(tuple(state), node)
        elif stage.kind is StageKind.EFFECT:
            if self.workflow.nodes[node] is NodeKind.EFFECT:
                app[node] = DONE
            self.sink.fire(context, tuple(state))
        else:
            app[node] = value
            if stage.kind is StageKind.GATED and value == APPROVE:
                self.sink.fire(context, tuple(app))
        return tuple(app)
