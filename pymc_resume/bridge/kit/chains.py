"""A thread's model checkpoint chain from what a framework recorded per stage: each stage's
result state in order, with a client update's checkpoint wherever the note changed between two
(the note is the field `update` writes). For adapters whose store records the state after every
stage and the note beside it (the OpenAI Agents SDK's, Strands')."""

from __future__ import annotations

from collections.abc import Iterable

from pymc_resume.model.state import INITIAL, UPDATE, Checkpoint
from pymc_resume.model.workflow import Workflow


def stage_chain(
    workflow: Workflow, results: Iterable[tuple[int, tuple[int, ...]]], note: int | None
) -> list[Checkpoint]:
    """The chain: the initial checkpoint, then per `(stage, state)` result an update checkpoint
    if its note differs from the chain's, then the stage's; then an update to `note` (the
    store's current note) if it differs from the last."""
    chain = [Checkpoint(0, workflow.initial_state(), INITIAL)]

    def update_to(value: int) -> None:
        if value != chain[-1].app[workflow.note]:
            app = list(chain[-1].app)
            app[workflow.note] = value
            chain.append(Checkpoint(chain[-1].pc, tuple(app), UPDATE))

    for stage, app in results:
        update_to(app[workflow.note])
        chain.append(Checkpoint(stage + 1, app, stage))
    if note is not None:
        update_to(note)
    return chain
