"""The fuzzing workflow's node code: deterministic plain functions, as the contract asks.

One function, `run_node(stage, state, value, context)`, runs any stage of the workflow, the
way the model's semantics does: a step writes a function of the inputs consumed before it (1 or
2), an effect node writes 1 and fires its effect, an interrupt writes its value, a gated node
writes its value and fires when the value approves (1); an effect-then-interrupt node fires in
its first stage and takes its value in the second. Every execution is logged to the sink first.

`context` is whatever the framework hands node code, read by attribute: `thread`, `stage`,
`node`, and where the framework has them `op`, `role` and `idempotency_key`.
"""

from __future__ import annotations

import attrs

from pymc_resume.bridge.sink import Sink
from pymc_resume.model.workflow import APPROVE, DONE, NodeKind, StageKind, Workflow


@attrs.frozen
class FuzzNodes:
    workflow: Workflow
    sink: Sink

    def __call__(self, stage_index: int, state: tuple[int, ...], value: int | None, context) -> tuple[int, ...]:
        return self.run_node(stage_index, state, value, context)

    def run_node(self, stage_index: int, state: tuple[int, ...], value: int | None, context) -> tuple[int, ...]:
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
