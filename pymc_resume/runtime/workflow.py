"""What the runtime executes: node kinds in order, the node code, and the state schema.

The runtime speaks the model's vocabulary: a workflow's shape is a `model.workflow.Workflow`
(node kinds flattened into stages, the unit the executor runs and commits). Node code is one
plain function, `run_node(stage, state, value, context) -> new state`, called once per
execution of a stage; `value` is the consumed resume value for an interrupt or gated stage.
Node code fires effects itself, passing `context.idempotency_key` to the sink: the runtime
hands it the effect's identity as a stable key that survives re-execution.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from pymc_resume.model.workflow import Workflow

State = tuple[int, ...]


@attrs.frozen
class NodeContext:
    """What node code learns about the execution it is part of."""

    thread: int
    stage: int
    node: int
    op: str  # the client operation (run, delivery, recovery) this execution belongs to
    role: str  # "run", "delivery" or "recovery"
    idempotency_key: str | None  # None: the layer hands no key (every fire applies)
    recovering: bool


NodeRunner = Callable[[int, State, "int | None", NodeContext], State]


@attrs.frozen
class RuntimeWorkflow:
    shape: Workflow
    run_node: NodeRunner
    schema: Callable[[State], bool]  # True when a state is allowed
    value_schema: Callable[[int], bool]  # True when a resume value is allowed


class Probe:
    """Hooks at the atomic-step boundaries of an execution, for tests and the bridge.

    `at(point, stage)` is called at "after-load" (a delivery validated its value and read the
    head, before its claim), "before-execute", "after-execute" (effects fired, not committed)
    and "after-commit". The default does nothing; the bridge kills the process or pauses it at
    a barrier there.
    """

    def at(self, point: str, stage: int) -> None:
        return None


NO_PROBE = Probe()
