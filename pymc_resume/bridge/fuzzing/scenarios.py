"""Targeted scenarios: short, deterministic step sequences aimed at one clause each.

A conformance profile starts with these before it fuzzes: each scenario drives a `Session`
the way a careful tester would (run through, resume twice, resume concurrently, crash at every
stage and point then recover, fork with each intent, send invalid input), so every clause is
exercised on every adapter whatever Hypothesis happens to draw. A scenario chooses its steps
from what the adapter shows (which stage a thread is parked at, which checkpoints it can fork
from), and the session records the concrete steps, so a failing scenario is a repro like any
other.

`advance` is the client that carries a thread to its end: start it if new, recover it if its
process crashed, resume each interrupt it parks at; a crash point rides on every operation
until one is killed by it.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from pymc_resume.bridge.adapter import CRASH_POINTS, CRASHED, RACE_WINDOWS, CrashPoint
from pymc_resume.bridge.judging.session import Session
from pymc_resume.model.contract import (
    CHECKPOINT_VALIDITY,
    CONSUME_ONCE_CONSUMPTION,
    CONSUME_ONCE_VALUE,
    EFFECT_EXACTLY_ONCE,
    FORK_DETERMINISM,
    FORK_INTENT,
    LIVENESS,
    PREFIX_CONTINUATION,
    RECOVERY_DETERMINISM,
)
from pymc_resume.model.workflow import APPROVE, INVALID, Workflow

# Most operations `advance` spends on one thread: enough for every stage to need its own
# operation twice over; a thread that is still not complete then is judged by the drain.
ADVANCE_LIMIT_PER_STAGE = 2


@attrs.frozen
class Scenario:
    name: str
    targets: tuple[str, ...]  # the clause ids it is aimed at (every clause is judged)
    needs: tuple[str, ...]  # operations it uses beyond start and recover (adapter.OPERATIONS)
    run: Callable[[Session], None]
    crash: CrashPoint | None = None  # the crash it plants, for the evidence notes


def advance(
    session: Session, thread: int, crash: CrashPoint | None = None, values: dict[int, int] | None = None
) -> None:
    """Carry `thread` to its end (or until it makes no progress); see the module docstring.

    `values` gives the resume value per consuming stage (default: approve everywhere).
    """
    workflow = session.workflow
    values = values or {}
    pending = crash.as_json() if crash is not None else None
    last = None
    for _ in range(ADVANCE_LIMIT_PER_STAGE * (len(workflow.stages) + 1)):
        view = session.observation.threads[thread]
        pc = view.chain[-1].pc
        if view.run == "new":
            step = {"action": "start", "thread": thread, "crash": pending}
        elif view.run == "dead":
            step = {"action": "recover", "thread": thread, "crash": pending}
        elif pc == workflow.end:
            return
        elif workflow.consumes[pc] and session.can("resume"):
            step = {"action": "resume", "thread": thread, "value": values.get(pc, APPROVE), "crash": pending}
        else:  # stopped short of an interrupt without a crash: a fresh process tries to go on
            step = {"action": "recover", "thread": thread, "crash": pending}
        state = (pc, view.run, step["action"])
        if state == last and step["action"] == "recover":
            return  # recovery makes no progress: the drain and liveness judge it
        last = state
        session.apply(step)
        if any(outcome["status"] == CRASHED for outcome in session.steps[-1]["outcome"]):
            pending = None


def _parked_at(session: Session, thread: int, stage_wanted: Callable[[int], bool]) -> bool:
    """Resume `thread` (approving) until it parks at a consuming stage `stage_wanted` accepts."""
    workflow = session.workflow
    for _ in range(len(workflow.stages) + 1):
        view = session.observation.threads[thread]
        pc = view.chain[-1].pc
        if view.run == "new":
            session.apply({"action": "start", "thread": thread, "crash": None})
            continue
        if pc == workflow.end or not workflow.consumes[pc]:
            return False
        if stage_wanted(pc):
            return True
        session.apply({"action": "resume", "thread": thread, "value": APPROVE, "crash": None})
    return False


def _other_value(session: Session) -> int:
    """A valid resume value other than the approving one (or the approving one if it is alone)."""
    return 2 if session.values >= 2 else APPROVE


# -- the scenarios ------------------------------------------------------------------------


def run_through(session: Session) -> None:
    advance(session, 0)


def resume_after_completion(session: Session) -> None:
    """Complete the thread, then resume its last interrupt again with another value."""
    advance(session, 0)
    session.apply({"action": "resume", "thread": 0, "value": _other_value(session), "crash": None})


def second_resume_after_crash(when: str) -> Callable[[Session], None]:
    """Deliver v1 to the first interrupt and kill the process `when`; deliver another value;
    then carry on: the continuation must use v1 and the second value must be refused."""

    def run(session: Session) -> None:
        first = session.workflow.consuming[0]
        if not _parked_at(session, 0, lambda pc: pc == first):
            return
        session.apply(
            {"action": "resume", "thread": 0, "value": APPROVE, "crash": CrashPoint(first, when).as_json()}
        )
        session.apply({"action": "resume", "thread": 0, "value": _other_value(session), "crash": None})
        advance(session, 0)

    return run


def invalid_update(session: Session) -> None:
    session.apply({"action": "start", "thread": 0, "crash": None})
    session.apply({"action": "update", "thread": 0, "value": INVALID})
    advance(session, 0)


def invalid_resume(session: Session) -> None:
    session.apply({"action": "start", "thread": 0, "crash": None})
    session.apply({"action": "resume", "thread": 0, "value": INVALID, "crash": None})
    advance(session, 0)


def concurrent_resume(window: str, processes: int) -> Callable[[Session], None]:
    """Park at the last interrupt (the gated one in the default workflow) and let `processes`
    clients deliver the approving value at once, held together at `window`."""

    def run(session: Session) -> None:
        last = session.workflow.consuming[-1]
        if not _parked_at(session, 0, lambda pc: pc == last):
            return
        session.apply(
            {"action": "resume-together", "thread": 0, "values": [APPROVE] * processes, "window": window}
        )
        advance(session, 0)

    return run


def crash_and_recover(crash: CrashPoint) -> Callable[[Session], None]:
    def run(session: Session) -> None:
        advance(session, 0, crash=crash)

    return run


def forks(intent: str) -> Callable[[Session], None]:
    """Complete the thread, then fork twice from the checkpoint before its first interrupt with
    the same intent (and the same new input for edits) and run both forks to their end."""

    def run(session: Session) -> None:
        advance(session, 0)
        choices = session.fork_choices(0)
        with_edits = [(c, edits) for c, edits in choices if edits]
        checkpoint, edits = with_edits[0] if with_edits else choices[-1] if choices else (None, [])
        if checkpoint is None or (intent == "edit" and not edits):
            return
        value = edits[0] if intent == "edit" else None
        for _ in range(2):
            session.apply(
                {"action": "fork", "thread": 0, "checkpoint": checkpoint, "intent": intent, "value": value}
            )
        for thread in range(1, len(session.observation.threads)):
            advance(session, thread)

    return run


def scenarios(workflow: Workflow, processes: int) -> list[Scenario]:
    """The battery for `workflow` (as the adapter runs it), in the order it runs."""
    battery = [Scenario("run-through", (PREFIX_CONTINUATION, EFFECT_EXACTLY_ONCE, LIVENESS), (), run_through)]
    if workflow.consuming:
        battery.append(
            Scenario("resume-after-completion", (CONSUME_ONCE_VALUE,), ("resume",), resume_after_completion)
        )
        for when in ("after-execute", "after-commit"):
            battery.append(
                Scenario(
                    f"second-resume-after-crash-{when}",
                    (CONSUME_ONCE_VALUE,),
                    ("resume",),
                    second_resume_after_crash(when),
                )
            )
        battery.append(Scenario("invalid-resume", (CHECKPOINT_VALIDITY,), ("resume",), invalid_resume))
    battery.append(Scenario("invalid-update", (CHECKPOINT_VALIDITY,), ("update",), invalid_update))
    if workflow.consuming and processes > 1:
        for window in RACE_WINDOWS:
            battery.append(
                Scenario(
                    f"concurrent-resume-{window}",
                    (CONSUME_ONCE_CONSUMPTION,),
                    ("resume-together",),
                    concurrent_resume(window, processes),
                )
            )
    for stage in range(len(workflow.stages)):
        for when in CRASH_POINTS:
            crash = CrashPoint(stage, when)
            battery.append(
                Scenario(
                    f"crash-stage-{stage}-{when}",
                    (PREFIX_CONTINUATION, EFFECT_EXACTLY_ONCE, RECOVERY_DETERMINISM, LIVENESS),
                    ("resume",) if any(s < stage for s in workflow.consuming) else (),
                    crash_and_recover(crash),
                    crash,
                )
            )
    for intent in ("replay", "edit"):
        battery.append(Scenario(f"fork-{intent}", (FORK_DETERMINISM, FORK_INTENT), ("fork",), forks(intent)))
    return battery
