"""Workflows of the reference semantics: node kinds, their atomic stages, and the state schema.

A node is one of the contract's kinds. Each node runs as one or two *stages*, the unit a
process executes and commits: an effect-then-interrupt node fires its effect and commits, then
waits for its value as a second stage, so the notification is not re-sent when the value arrives.

Application state is a tuple of small ints, one field per node plus a trailing `note` field
that client updates write. `UNSET` fields are not yet written; `INVALID` is the one value the
schema forbids.

An `overflow` node is a pure step whose field has a bound in the schema that its output can run
past: where a step would write 2 it writes the forbidden value. So a node can break the schema
although every input it was given was valid (the published finding "schema-invalid node output
persisted"); a correct layer refuses that output before anything is persisted and the thread
fails (see `semantics`). It needs an interrupt before it to be reachable: with no input before
it, it writes 1.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import attrs

UNSET = 0
INVALID = -1
APPROVE = 1  # value 1 approves a gated node; any other valid value rejects it
DONE = 1  # what an effect node writes into its field


def value_name(value: int) -> str:
    """A resume value as traces and reports print it: v1, v2, ..., invalid, or none."""
    if value == UNSET:
        return "none"
    return "invalid" if value == INVALID else f"v{value}"


class NodeKind(enum.Enum):
    STEP = "step"
    EFFECT = "effect"
    INTERRUPT = "interrupt"
    GATED = "gated"
    EFFECT_THEN_INTERRUPT = "effect-then-interrupt"
    OVERFLOW = "overflow"


class StageKind(enum.IntEnum):
    STEP = 0  # pure state update
    EFFECT = 1  # calls the effect sink once per execution
    WAIT = 2  # consumes a resume value
    GATED = 3  # consumes a resume value; fires the gated effect if it approves


NODE_STAGES = {
    NodeKind.STEP: (StageKind.STEP,),
    NodeKind.EFFECT: (StageKind.EFFECT,),
    NodeKind.INTERRUPT: (StageKind.WAIT,),
    NodeKind.GATED: (StageKind.GATED,),
    NodeKind.EFFECT_THEN_INTERRUPT: (StageKind.EFFECT, StageKind.WAIT),
    NodeKind.OVERFLOW: (StageKind.STEP,),  # a step, whose output may break the schema
}

CONSUMING = (StageKind.WAIT, StageKind.GATED)


@attrs.frozen
class Stage:
    node: int
    kind: StageKind

    @property
    def consumes(self) -> bool:
        return self.kind in CONSUMING


@attrs.frozen
class Workflow:
    """Nodes in order, flattened into stages."""

    nodes: tuple[NodeKind, ...]
    stages: tuple[Stage, ...] = attrs.field(init=False)
    consuming: tuple[int, ...] = attrs.field(init=False)  # positions of consuming stages
    consumes: tuple[bool, ...] = attrs.field(init=False)  # per stage: does it consume a value

    def __attrs_post_init__(self) -> None:
        stages = tuple(
            Stage(index, kind) for index, node in enumerate(self.nodes) for kind in NODE_STAGES[node]
        )
        object.__setattr__(self, "stages", stages)
        object.__setattr__(self, "consumes", tuple(stage.consumes for stage in stages))
        object.__setattr__(self, "consuming", tuple(i for i, c in enumerate(self.consumes) if c))

    @classmethod
    def of(cls, names: Sequence[str]) -> Workflow:
        return cls(tuple(NodeKind(name) for name in names))

    @property
    def end(self) -> int:
        """The position of a completed thread: one past the last stage."""
        return len(self.stages)

    @property
    def note(self) -> int:
        """Index of the `note` field in application state."""
        return len(self.nodes)

    def initial_state(self) -> tuple[int, ...]:
        return (UNSET,) * (len(self.nodes) + 1)

    def inputs_before(self, app: tuple[int, ...], node: int) -> tuple[int, ...]:
        """The resume values an execution of `node` has consumed before it (its inputs)."""
        return tuple(app[stage.node] for stage in self.stages if stage.consumes and stage.node < node)

    def step_output(self, app: tuple[int, ...], node: int, flipped: bool = False) -> int:
        """A pure step's output: a function of the inputs consumed before it (1 or 2; an
        `overflow` node writes `INVALID` instead of 2).

        `flipped` gives the other output: the fault of a step whose result depends on
        whether it runs in recovery.
        """
        parity = sum(self.inputs_before(app, node)) % 2
        output = 1 + (parity ^ flipped)
        if output == 2 and self.nodes[node] is NodeKind.OVERFLOW:
            return INVALID
        return output

    def is_valid(self, app: tuple[int, ...]) -> bool:
        """The state schema: no field holds the forbidden value."""
        return INVALID not in app

    def replay(self, recorded: dict[int, int], note: int) -> tuple[int, ...]:
        """The crash-free run from the initial state with the recorded inputs.

        `recorded` maps each consuming stage to its consumed value; `note` is the last
        persisted update's value.
        """
        app = list(self.initial_state())
        for position, stage in enumerate(self.stages):
            if stage.kind is StageKind.STEP:
                app[stage.node] = self.step_output(tuple(app), stage.node)
            elif stage.consumes:
                app[stage.node] = recorded[position]
            elif self.nodes[stage.node] is NodeKind.EFFECT:
                app[stage.node] = DONE
        app[self.note] = note
        return tuple(app)
