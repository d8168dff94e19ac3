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

Every documented way of performing an operation is driven (`bridge/adapter/protocol.py`,
variants): a scenario runs once with the first variant of each operation it is about (its
`subject`: a resume scenario's resume, a crash scenario's recovery, a run-through's every
client operation), then once more for each other variant of each such operation, so that every
variant meets every position its operation is judged at. The other operations a scenario uses to
carry a thread along take their first variant.

Forks are made at every position the contract allows: at the head of a parent parked at each of
its interrupts, at the head of a completed parent, and at older checkpoints right before and
right after each interrupt, with each intent and each fork variant that performs it; an adapter
refuses a position its framework cannot express (`NOT_EXPRESSIBLE`) and the battery goes on
with the others.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from pymc_resume.bridge.adapter import CRASH_POINTS, CRASHED, OK, RACE_WINDOWS, WARM_CLIENT_IDS, CrashPoint
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


# The operations that carry a thread along (`advance`): a run-through is about all of them.
CARRY = ("start", "resume", "recover")


@attrs.frozen
class Scenario:
    name: str
    targets: tuple[str, ...]  # the clause ids it is aimed at (every clause is judged)
    needs: tuple[str, ...]  # operations it uses beyond start and recover (adapter.OPERATIONS)
    run: Callable[[Session], None]
    crash: CrashPoint | None = None  # the crash it plants, for the evidence notes
    # operation -> the variant its steps use (`Session(variants=...)`); set by `scenarios`
    variants: dict[str, str] = attrs.field(factory=dict)
    # the operations whose variants it is run under (default: those it needs)
    subject: tuple[str, ...] | None = None

    def uses(self) -> tuple[str, ...]:
        """The operations whose variants this scenario is run under."""
        return self.needs if self.subject is None else self.subject


def advance(
    session: Session,
    thread: int,
    crash: CrashPoint | None = None,
    values: dict[int, int] | None = None,
    client: str | None = None,
) -> None:
    """Carry `thread` to its end (or until it makes no progress); see the module docstring.

    `values` gives the resume value per consuming stage (default: approve everywhere);
    `client`, a warm client that serves every step (none: a fresh process each).
    """
    workflow = session.workflow
    values = values or {}
    pending = crash.as_json() if crash is not None else None
    served = {"client": client} if client else {}
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
        session.apply({**step, **served})
        if any(outcome["status"] == CRASHED for outcome in session.steps[-1]["outcome"]):
            pending = None


def _parked_at(
    session: Session, thread: int, stage_wanted: Callable[[int], bool], client: str | None = None
) -> bool:
    """Resume `thread` (approving) until it parks at a consuming stage `stage_wanted` accepts;
    with `client`, every step in that warm client."""
    workflow = session.workflow
    served = {"client": client} if client else {}
    for _ in range(len(workflow.stages) + 1):
        view = session.observation.threads[thread]
        pc = view.chain[-1].pc
        if view.run == "new":
            session.apply({"action": "start", "thread": thread, "crash": None, **served})
            continue
        if pc == workflow.end or not workflow.consumes[pc]:
            return False
        if stage_wanted(pc):
            return True
        session.apply({"action": "resume", "thread": thread, "value": APPROVE, "crash": None, **served})
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


def _fork_twice(
    session: Session, thread: int, checkpoint: int, intent: str, client: str | None = None
) -> bool:
    """Fork `thread` twice from `checkpoint` with `intent` (and, for edits, the same new input:
    a value other than the recorded one), so the two forks can be compared; whether
    the framework made the first one. With `client`, both in that warm client."""
    choices = dict(session.fork_choices(thread))
    edits = choices.get(checkpoint, [])
    if intent == "edit" and not edits:
        return False
    # The last value: at a parked head (nothing recorded) it is not the approving value the
    # parent is resumed with afterwards.
    value = edits[-1] if intent == "edit" else None
    fork = {"action": "fork", "thread": thread, "checkpoint": checkpoint, "intent": intent, "value": value}
    if client:
        fork["client"] = client
    session.apply(fork)
    if session.steps[-1]["outcome"][0]["status"] != OK:
        return False  # refused (a position the framework cannot express): no second one
    session.apply(fork)
    return True


def _advance_forks(session: Session) -> None:
    for thread in range(1, len(session.observation.threads)):
        advance(session, thread)


def forks_at_parked_heads(intent: str) -> Callable[[Session], None]:
    """Park the parent at each of its interrupts in turn and fork twice from its head there;
    then resume the parent (approving, so that an edit fork's new input differs) and go on;
    finally run every fork to its end. The parent's own resume after a fork at its head is
    what shows a fork that wrote into the parent's pending record."""

    def run(session: Session) -> None:
        for stage in session.workflow.consuming:
            if not _parked_at(session, 0, lambda pc, stage=stage: pc == stage):
                break
            _fork_twice(session, 0, len(session.observation.threads[0].chain) - 1, intent)
        advance(session, 0)
        _advance_forks(session)

    return run


def warm_forks_at_parked_heads(intent: str) -> Callable[[Session], None]:
    """`forks_at_parked_heads`, every step in one warm client (a long-lived process): the
    parent parks, is forked from its head and goes on in the process that holds its state and
    made the forks, where a client that keeps a fork's state in memory lets it leak into the
    parent's later checkpoints (or the parent's into the fork's)."""

    def run(session: Session) -> None:
        client = WARM_CLIENT_IDS[0]
        for stage in session.workflow.consuming:
            if not _parked_at(session, 0, lambda pc, stage=stage: pc == stage, client):
                break
            _fork_twice(session, 0, len(session.observation.threads[0].chain) - 1, intent, client)
        advance(session, 0, client=client)
        for thread in range(1, len(session.observation.threads)):
            advance(session, thread, client=client)

    return run


def forks_at_completed_head(session: Session) -> None:
    """Complete the parent, fork twice (replay) from its head, run both forks."""
    advance(session, 0)
    _fork_twice(session, 0, len(session.observation.threads[0].chain) - 1, "replay")
    _advance_forks(session)


def forks_at_older_checkpoints(intent: str) -> Callable[[Session], None]:
    """Complete the parent, then fork twice from the checkpoint right before each interrupt
    (an edit fork gives it a new input) and, for replay forks, right after it; run every fork
    to its end."""

    def run(session: Session) -> None:
        advance(session, 0)
        chain = session.observation.threads[0].chain
        positions = []
        for stage in session.workflow.consuming:
            before = [c for c, entry in enumerate(chain[:-1]) if entry.pc == stage]
            after = [c for c, entry in enumerate(chain[:-1]) if entry.pc == stage + 1]
            positions += before[-1:] + (after[:1] if intent == "replay" else [])
        if not positions:  # a workflow without interrupts: a checkpoint halfway
            positions = [len(chain) // 2] if len(chain) > 2 else []
        for checkpoint in positions:
            _fork_twice(session, 0, checkpoint, intent)
        _advance_forks(session)

    return run


def scenarios(
    workflow: Workflow,
    processes: int,
    variants: dict[str, dict[str, tuple[str, ...]]] | None = None,
    warm: bool = False,
) -> list[Scenario]:
    """The battery for `workflow` (as the adapter runs it), in the order it runs: every
    scenario under every variant its operations have. `variants` maps each operation to its
    variants' names, for a fork by intent (`{"fork": {"replay": (...), "edit": (...)}}`,
    others under the key ""); without it every operation has one, unnamed. `warm`: the adapter
    has warm clients (`warm-clients`): forks at a parked head made and continued in one."""
    variants = variants or {}
    battery = _base_battery(workflow, processes, variants.get("fork", {}))
    if warm and workflow.consuming:
        battery += _warm_battery(variants.get("fork", {}))
    return [each for scenario in battery for each in _under_every_variant(scenario, variants)]


def _warm_battery(fork_variants: dict[str, tuple[str, ...]]) -> list[Scenario]:
    """Forks at a parked head, made and continued in one warm client, once per intent and fork
    variant that performs it."""
    battery = []
    for intent in ("replay", "edit"):
        names = fork_variants.get(intent) or ("",)
        for name in names:
            suffix = f" [fork: {name}]" if len(names) > 1 else ""
            battery.append(
                Scenario(
                    f"warm-fork-{intent}-parked-head{suffix}",
                    (FORK_DETERMINISM, FORK_INTENT),
                    ("fork",),
                    warm_forks_at_parked_heads(intent),
                    variants={"fork": name} if name else {},
                )
            )
    return battery


def _under_every_variant(
    scenario: Scenario, variants: dict[str, dict[str, tuple[str, ...]]]
) -> list[Scenario]:
    """`scenario` with the first variant of each operation it uses, then once more for each
    other variant of each operation (the others at their first)."""
    several = {
        op: names
        for op in scenario.uses()
        if op not in scenario.variants and len(names := variants.get(op, {}).get("", ())) > 1
    }
    if not several:
        return [scenario]
    first = {**scenario.variants, **{op: names[0] for op, names in several.items()}}
    runs = [first] + [{**first, op: name} for op, names in several.items() for name in names[1:]]
    return [
        attrs.evolve(
            scenario,
            name=f"{scenario.name} [{', '.join(f'{op}: {chosen[op]}' for op in several)}]",
            variants=chosen,
        )
        for chosen in runs
    ]


def _base_battery(
    workflow: Workflow, processes: int, fork_variants: dict[str, tuple[str, ...]]
) -> list[Scenario]:
    """The scenarios, forks once per fork variant that performs their intent."""
    battery = [
        Scenario(
            "run-through",
            (PREFIX_CONTINUATION, EFFECT_EXACTLY_ONCE, LIVENESS),
            (),
            run_through,
            subject=CARRY,
        )
    ]
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
                    subject=("resume", "recover"),
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
                    subject=("recover",),
                )
            )
    positions = [("completed-head", "replay", forks_at_completed_head)]
    if workflow.consuming:
        positions.insert(0, ("parked-head", "replay", forks_at_parked_heads("replay")))
    positions.append(("older", "replay", forks_at_older_checkpoints("replay")))
    if workflow.consuming:
        positions.append(("parked-head", "edit", forks_at_parked_heads("edit")))
        positions.append(("older", "edit", forks_at_older_checkpoints("edit")))
    for where, intent, run in positions:
        names = fork_variants.get(intent) or ("",)
        for name in names:
            suffix = f" [fork: {name}]" if len(names) > 1 else ""
            battery.append(
                Scenario(
                    f"fork-{intent}-{where}{suffix}",
                    (FORK_DETERMINISM, FORK_INTENT),
                    ("fork",),
                    run,
                    variants={"fork": name} if name else {},
                )
            )
    return battery
