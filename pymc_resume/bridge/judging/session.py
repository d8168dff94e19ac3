"""One example against an adapter: apply client steps, observe, judge; then drain and judge
liveness. The Hypothesis state machine, `replay` and the generated pytest repros all drive a
`Session`, so a repro replays exactly what the fuzzer ran.

A step is a JSON-able dict, one of the model's client-visible actions:

    {"action": "start", "thread": t, "crash": null | {"stage": s, "when": w}}
    {"action": "resume", "thread": t, "value": v, "crash": ...}          # v = -1: schema-invalid
    {"action": "resume-together", "thread": t, "values": [v, ...], "window": null | w}
    {"action": "recover", "thread": t, "crash": ...}
    {"action": "fork", "thread": t, "checkpoint": c, "intent": "replay" | "edit", "value": v | null}
    {"action": "update", "thread": t, "value": v}

A step may also name the variant it is performed with (`"variant": name`, see
`bridge/adapter/protocol.py`): the bridge passes it to the adapter when the operation has two or
more variants. A session can be given a choice per operation (`variants=`), which fills in the
steps that name none: the battery runs a scenario once per variant that way.

After every step the session observes the adapter and raises a `Violation` (an AssertionError,
one subclass per clause so Hypothesis shrinks each clause's failure on its own) when a clause
fails. `finish` is the liveness drain: it recovers every thread held by a crashed process and
starts every new thread, a bounded number of rounds, then requires a quiescent state and judges
every clause once more (effect-exactly-once is strict only when quiescent).

The adapter runs in a host process (`bridge/hosting/host.py`), built there too, so that every call
into it has a deadline the adapter cannot defeat. An adapter that raises (anything, `SystemExit`
included), dies, or does not return within the step timeout raises `AdapterFailure`, a
BaseException so that Hypothesis stops at once instead of shrinking a broken adapter. The
session's work directory (`bridge/hosting/workdirs.py`) is removed on every way out.
"""

from __future__ import annotations

import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from pymc_resume.bridge.adapter import (
    CRASHED,
    OK,
    REFUSED,
    CrashPoint,
    FuzzSetup,
    Observation,
    Outcome,
    ThreadView,
    declared_variants,
    expressible_workflow,
    unsupported_operations,
    variants_of,
)
from pymc_resume.bridge.adapter.nodes import FuzzNodes
from pymc_resume.bridge.adapter.sink import Sink, SinkEvent
from pymc_resume.bridge.hosting.host import RAISED, HostedAdapter, HostProblem
from pymc_resume.bridge.hosting.workdirs import default_workroot, make_workdir
from pymc_resume.bridge.judging.clauses import (
    judge_liveness,
    judge_world,
    not_expressible,
    ordered,
    unobservable,
)
from pymc_resume.bridge.judging.evidence import CRASH, INVALID_INPUT, LATE_RESUME, effect_places
from pymc_resume.bridge.judging.evidence import DRAIN as DRAIN_EXERCISE
from pymc_resume.bridge.judging.observe import (
    ForkRecord,
    History,
    as_when_forked,
    build_world,
    committed_upto,
    parent_changes,
)
from pymc_resume.model.clauses import CHECKS
from pymc_resume.model.contract import (
    CHECKPOINT_VALIDITY,
    CLAUSE_IDS,
    CONSUME_ONCE_VALUE,
    FORK_DETERMINISM,
    LIVENESS,
    PREFIX_CONTINUATION,
)
from pymc_resume.model.state import NO_VALUE
from pymc_resume.model.workflow import INVALID, Workflow, value_name

DRAIN = "drain"


class Violation(AssertionError):
    """A clause failed on what the adapter showed. `clauses` maps every failing id to what was
    observed; `clause` is the first of them in contract order."""

    def __init__(self, clauses: dict[str, str], at: int | str, steps: list[dict], observed: dict) -> None:
        self.clauses = clauses
        self.clause = next(iter(clauses))
        self.at = at  # index of the step after which it was seen, or DRAIN
        self.steps = steps
        self.observed = observed
        where = "in the liveness drain" if at == DRAIN else f"after step {at}"
        super().__init__(f"{self.clause} violated {where}: {clauses[self.clause]}")


def _class_name(clause_id: str) -> str:
    return "".join(part.capitalize() for part in clause_id.split("-")) + "Violated"


# One exception type per clause, so that Hypothesis tells the clauses' failures apart.
VIOLATIONS: dict[str, type[Violation]] = {
    cid: type(_class_name(cid), (Violation,), {"__module__": __name__}) for cid in CLAUSE_IDS
}


class AdapterFailure(BaseException):
    """The adapter raised, died or hung: not a verdict about the contract."""


@contextmanager
def step_deadline(seconds: float | None, what: str) -> Iterator[None]:
    """Interrupt this process (SIGALRM) if the body runs longer than `seconds`: the in-process
    deadline `race` uses for its trials. Sessions do not use it: an adapter can block SIGALRM,
    so their deadlines are kept from outside the adapter's process (`bridge/hosting/host.py`).

    Works in the main thread only (elsewhere the body runs without a deadline).
    """
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise AdapterFailure(
            f"{what} did not finish within the step timeout of {seconds:g}s (the adapter hangs)"
        )

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def hosted(adapter, timeout: float | None) -> HostedAdapter:
    """`adapter` in a host process: an adapter hosted already, or one built in the bridge
    (carried into the host by the fork), or a zero-argument callable (a class, a factory)
    that the host calls to build it, under the deadline. Raises AdapterFailure."""
    if isinstance(adapter, HostedAdapter):
        return adapter
    build = adapter if isinstance(adapter, type) or not hasattr(adapter, "observe") else (lambda: adapter)
    try:
        return HostedAdapter(build, timeout, getattr(build, "template", None), getattr(build, "stats", None))
    except HostProblem as problem:
        raise AdapterFailure(f"building the adapter {problem.reason}") from None


def describe_step(step: dict) -> str:
    """One line for a step, as in repro listings: which client served it (a warm one, or a
    fresh process) and, for concurrent deliveries, whether the drawn order or timing decides."""
    action, t = step["action"], step["thread"]
    crash = step.get("crash")
    killed = f", crash at stage {crash['stage']} {crash['when']}" if crash else ""
    killed += f", by warm client {step['client']}" if step.get("client") else ""
    if action == "resume":
        return f"resume t{t} with {_value(step['value'])}{killed}"
    if action == "resume-together":
        values = ", ".join(map(_value, step["values"])) + killed
        if not step.get("window"):
            return f"resume t{t} concurrently with {values} (timing decides the order)"
        if step.get("order") is None:
            return (
                f"resume t{t} concurrently with {values}, held together {step['window']} "
                "(timing decides the order)"
            )
        order = ", ".join(f"#{i}" for i in step["order"])
        return (
            f"resume t{t} concurrently with {values}, held {step['window']}, released one at a time: {order}"
        )
    if step.get("variant"):
        killed += f", variant {step['variant']}"
    if action == "fork":
        edit = f", new input {_value(step['value'])}" if step["intent"] == "edit" else ""
        return f"fork t{t} at checkpoint {step['checkpoint']} ({step['intent']}{edit}){killed}"
    if action == "update":
        return f"update t{t} note to {_value(step['value'])}{killed}"
    return f"{action} t{t}{killed}"


def store_summary(observation) -> list[dict]:
    """Each thread's store in a few fields: its checkpoints, its head (the stage it runs
    next, the stage the head committed), its run state and recorded inputs."""
    return [
        {
            "checkpoints": len(view.chain),
            "pc": view.chain[-1].pc if view.chain else None,
            "stage": view.chain[-1].stage if view.chain else None,
            "run": view.run,
            "inputs": None if view.inputs is None else {str(k): v for k, v in sorted(view.inputs.items())},
        }
        for view in observation.threads
    ]


def _value(value: int) -> str:
    return "invalid" if value == INVALID else f"v{value}"


def _short(text: str, length: int = 80) -> str:
    """`text` on one line, cut to `length` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= length else line[: length - 3] + "..."


class Session:
    """One example: a fresh adapter (in its own host process), sink and working directory.

    `adapter` is an adapter, a `HostedAdapter`, or a zero-argument callable that builds one
    (see `hosted`). `before_step` is called before each step is applied: it may raise a
    BaseException to stop the example (a spent time budget). Raises AdapterFailure when the
    adapter cannot be built or opened; nothing is left behind then either.
    """

    def __init__(
        self,
        adapter,
        workflow: Workflow,
        values: int,
        *,
        step_timeout: float | None = 30.0,
        before_step: Callable[[], None] | None = None,
        on_step: Callable[[], None] | None = None,
        on_violation: Callable[[Violation], None] | None = None,
        ignore: frozenset[str] = frozenset(),
        workroot: str | Path | None = None,
        on_close: Callable[[Session, list[SinkEvent]], None] | None = None,
        variants: dict[str, str] | None = None,
        waiting: Callable[[], AbstractContextManager] | None = None,
    ) -> None:
        # What this thread does while it waits on the host (`hosting/jobs.py`, `Turns`).
        self.waiting = waiting or nullcontext
        with self.waiting():
            self.adapter = hosted(adapter, step_timeout)
        self.workdir: Path | None = None
        self.on_close = None  # not before the session is set up: nothing ran yet
        self.exercised: dict[str, set[str]] = {}  # kind of operation -> where (bridge/judging/evidence.py)
        # kind of operation -> the variants that performed it and reached the framework
        self.exercised_variants: dict[str, set[str]] = {}
        self.variant_choice = dict(variants or {})  # operation -> the variant its steps use
        try:
            self._setup(workflow, values, step_timeout, workroot)
        except BaseException:
            self._discard()
            raise
        self.before_step = before_step
        self.on_step = on_step
        self.on_violation = on_violation
        self.ignore = ignore  # clauses already found violated: judged, never raised
        self.history = History()
        self._late: list[tuple[int, int, int]] = []  # accepted late resumes of the step being applied
        self.steps: list[dict] = []
        self.stores: list[list[dict]] = []  # what the store showed after each step (`store_summary`)
        self.drained = False
        self.failed = False  # a step raised (a violation or an adapter failure)
        self.on_close = on_close

    def _setup(self, workflow: Workflow, values: int, step_timeout: float | None, workroot) -> None:
        """What the example needs from the adapter's declarations, a fresh directory and sink,
        then the adapter opened on them and a first observation."""
        adapter = self.adapter
        try:
            self.unsupported = unsupported_operations(adapter)
            self.variants = declared_variants(adapter)
        except ValueError as error:
            raise AdapterFailure(str(error)) from None
        self.workflow = expressible_workflow(workflow, self.unsupported)
        self.values = values
        self.step_timeout = step_timeout
        self.capabilities = frozenset(adapter.capabilities)
        self.not_applicable = not_expressible(self.unsupported)
        self.skip = unobservable(self.capabilities) | self.not_applicable
        self.workdir = make_workdir(workroot or default_workroot())
        self.sink = Sink.create(self.workdir / "sink.db")
        setup = FuzzSetup(self.workflow, values, self.workdir, FuzzNodes(self.workflow, self.sink))
        self._call("open the adapter", lambda: adapter.open(setup))
        self.observation = self._observe()

    # -- what the rules need to choose their arguments ------------------------------------

    def threads_where(self, *runs: str) -> list[int]:
        return [t for t, view in enumerate(self.observation.threads) if view.run in runs]

    def can(self, operation: str) -> bool:
        """Whether the adapter's framework expresses `operation` (see `adapter.OPERATIONS`)."""
        return operation not in self.unsupported

    def started(self) -> list[int]:
        return self.threads_where("free", "dead", "live")

    def head_pc(self, thread: int) -> int:
        return self.observation.threads[thread].chain[-1].pc

    def fork_choices(self, thread: int) -> list[tuple[int, list[int]]]:
        """(checkpoint, values an edit fork may take there) for every checkpoint, the head
        first: the fork a warm client makes with the thread's state still in memory, and the
        one time travel never offered (the first choice is also what shrinking prefers).

        An edit fork gives the interrupt at its fork point a new input: any value other than
        the one recorded there, and any value at all at the head of a thread parked at an
        interrupt with nothing recorded yet (docs/contract.md, "Forks at a parked head")."""
        view = self.observation.threads[thread]
        upto = committed_upto(view.chain)
        recorded = self._recorded(view)
        parked = self._parked(self.observation, thread)
        choices = []
        for c, entry in enumerate(view.chain):
            edits = []
            at_parked_head = parked is not None and c == len(view.chain) - 1
            if (entry.pc < upto or at_parked_head) and self.workflow.consumes[entry.pc]:
                edits = [v for v in range(1, self.values + 1) if v != recorded.get(entry.pc)]
            choices.append((c, edits))
        return choices[-1:] + choices[:-1]

    # -- steps -------------------------------------------------------------------------

    def apply(self, step: dict) -> None:
        """Apply one step, observe, judge; a Violation or AdapterFailure marks the session failed."""
        try:
            if self.before_step is not None:
                self.before_step()
            self._apply(step)
        except BaseException:
            self.failed = True
            raise

    def variant_names(self, operation: str, intent: str | None = None) -> list[str]:
        """The variants the adapter declares for `operation` (a fork of `intent`), by name."""
        return [variant.name for variant in variants_of(self.variants, operation, intent)]

    def _with_variant(self, step: dict, index: int) -> dict:
        """`step` naming the variant chosen for its operation, when it names none and the
        session has a choice; a named variant the adapter does not declare is an
        AdapterFailure (a repro written for another version of the adapter)."""
        action = step["action"]
        named = step.get("variant")
        declared = self.variant_names(action, step.get("intent"))
        if named is None and self.variant_choice.get(action) in declared:
            return {**step, "variant": self.variant_choice[action]}
        if named is not None and named not in declared:
            raise AdapterFailure(
                f"step {index} names the {action} variant {named!r}, which the adapter does not declare "
                f"(it declares: {', '.join(declared) or 'none'})"
            )
        return step

    def _variant(self, step: dict) -> dict:
        """The `variant` keyword of the adapter call: only for an operation with two or more
        variants (an adapter with one call per operation never gets it)."""
        named = step.get("variant")
        if named is None or len(self.variant_names(step["action"], step.get("intent"))) < 2:
            return {}
        return {"variant": named}

    def _apply(self, step: dict) -> None:
        index = len(self.steps)
        step = self._with_variant(step, index)
        before = self.observation
        what = f"step {index} ({describe_step(step)})"
        outcomes = self._call(what, lambda: self._dispatch(step, f"s{index}"))
        expected = len(step["values"]) if step["action"] == "resume-together" else 1
        outcomes = checked_outcomes(outcomes, expected, step["action"])
        self.steps.append({**step, "outcome": [o.as_json() for o in outcomes]})
        self._remember(step, outcomes, before)
        self.observation = checked_observation(self._call(f"observe after {what}", self.adapter.observe))
        self.stores.append(store_summary(self.observation))
        self._describe_late(step, outcomes, before)
        if self.on_step is not None:
            self.on_step()
        self._judge(index)

    def _dispatch(self, step: dict, op: str) -> list:
        adapter, action, t = self.adapter, step["action"], step["thread"]
        crash = CrashPoint(**step["crash"]) if step.get("crash") else None
        # Keywords of the optional capabilities, passed only when a step has them (adapters
        # that do not declare them never get such steps).
        warm = {"client": step["client"]} if step.get("client") else {}
        warm.update(self._variant(step))
        if action == "start":
            return [adapter.start(t, crash, op, **warm)]
        if action == "resume":
            return [adapter.resume(t, step["value"], crash, op, **warm)]
        if action == "resume-together":
            order = {"order": list(step["order"])} if step.get("order") is not None else {}
            order.update(self._variant(step))
            return adapter.resume_together(t, list(step["values"]), step.get("window"), op, **order)
        if action == "recover":
            return [adapter.recover(t, crash, op, **warm)]
        if action == "fork":
            return [adapter.fork(t, step["checkpoint"], step["intent"], step.get("value"), **warm)]
        if action == "update":
            return [adapter.update(t, step["value"], **self._variant(step))]
        raise ValueError(f"unknown action {action!r}")

    def _remember(self, step: dict, outcomes: list, before: Observation) -> None:
        """Update the bridge's history with what the step did and what it should have done."""
        action, t = step["action"], step["thread"]
        history = self.history
        self._exercise(step, outcomes, before)
        if any(o.status == CRASHED for o in outcomes):
            history.crashed.add(t)
            history.crashed_since_fork.add(t)
        if action in ("resume", "resume-together"):
            values = [step["value"]] if action == "resume" else step["values"]
            target = self._consumed_interrupt(self._as_forked(before, t), t)
            for value, outcome in zip(values, outcomes):
                if value == INVALID:
                    if outcome.status != REFUSED:
                        history.findings.append(
                            (
                                CHECKPOINT_VALIDITY,
                                f"a schema-invalid resume value to t{t} was not refused ({outcome.status})",
                            )
                        )
                    elif (parked := self._parked(before, t)) is not None:
                        history.refused_invalid[t] = parked
                    if target is None:  # sent to a parked interrupt: a record of it is the thread's own
                        history.sent.setdefault(t, []).append(value)
                elif target is not None and outcome.status != REFUSED:
                    if self._rewound_across(before, t, target):
                        history.derived.append(
                            (
                                PREFIX_CONTINUATION,
                                (
                                    f"a resume of {value_name(value)} to the interrupt at stage {target} "
                                    f"of t{t} was accepted only because its committed node ran again and "
                                    "waits again (the second record consume-once-value would count is "
                                    "derived from this re-execution)"
                                ),
                            )
                        )
                    else:
                        history.second_records.setdefault(t, []).append((target, value))
                        self._late.append((t, target, value))
                else:  # a value sent to a parked interrupt
                    history.sent.setdefault(t, []).append(value)
                    if outcome.status == REFUSED and action == "resume":
                        self._judge_refused_valid(t, before)
        if action == "resume-together":
            self._judge_concurrent_acceptance(step, outcomes, before)
        if action == "update" and step["value"] == INVALID and outcomes[0].status != REFUSED:
            history.findings.append((CHECKPOINT_VALIDITY, f"a schema-invalid update of t{t} was accepted"))
        if action == "fork" and outcomes[0].status == OK:
            self._remember_fork(step, outcomes[0], before)

    def _judge_concurrent_acceptance(self, step: dict, outcomes: list, before: Observation) -> None:
        """k deliveries held together at one parked interrupt: at most one is consumed and the
        others are refused (docs/contract.md). Every delivery the framework accepted (OK,
        having reached it) beyond one was not refused: a second record of the interrupt, which
        the model counts under consume-once-value (its claim was taken by the first), whatever
        was consumed. DBOS is the case: it records each `send` as a message, its workflow reads
        one, and tells every racer its value was taken."""
        t = step["thread"]
        reading = self._as_forked(before, t)
        parked = self._parked(reading, t)
        if parked is None or self._consumed_interrupt(reading, t) is not None:
            return
        accepted = [
            value
            for value, outcome in zip(step["values"], outcomes)
            if value != INVALID and outcome.status == OK and outcome.reached_framework()
        ]
        stage = parked[0]
        for value in accepted[1:]:
            self.history.second_records.setdefault(t, []).append((stage, value))
            self.history.late_seen[(t, stage, value)] = (
                f"{len(accepted)} of {len(step['values'])} deliveries of resumes held together at the "
                f"interrupt at stage {stage} of t{t} were accepted (ok): at most one can be the consumed "
                f"one, and the framework refused none of the others (a resume of {value_name(value)} "
                "recorded instead of refused; counted here, not under consume-once-consumption, whose "
                "executions are what ran the interrupt's node)"
            )

    def _exercise(self, step: dict, outcomes: list, before: Observation) -> None:
        """Record what kind of operation the step ran, where, and with which variant
        (`bridge/judging/evidence.py`): the stage a thread was at, the checkpoint a fork was made
        from, the crash point. Only what reached the framework is evidence: a step that only
        our client refused, or that no call of its variant expresses, records nothing."""
        action, t = step["action"], step["thread"]
        reached = [outcome for outcome in outcomes if outcome.reached_framework()]
        if not reached:
            return
        view = before.threads[t] if t < len(before.threads) else None
        pc = view.chain[-1].pc if view is not None else 0
        at = f"stage {pc}" + (" (the end)" if pc == self.workflow.end else "")
        note = self._noter(step)
        if action == "resume":
            note("resume", at)
            late = self._consumed_interrupt(before, t)
            if late is not None and step["value"] != INVALID and reached[0].status == REFUSED:
                note(LATE_RESUME, f"stage {late}: refused by the framework ({_short(reached[0].detail)})")
        elif action == "resume-together":
            note("resume-together", f"{at}, window {step.get('window')}")
        elif action == "recover":
            note("recover", at)
        elif action == "fork" and outcomes[0].status == OK and view is not None:
            c = step["checkpoint"]
            head = ", the head" if c == len(view.chain) - 1 else ""
            if head and view.run == "free" and pc != self.workflow.end and self.workflow.consumes[pc]:
                head = ", the parked head"
            note("fork", f"checkpoint {c} (stage {view.chain[c].pc}{head}), {step['intent']}")
        elif action == "update":
            note("update", at)
        values = [step.get("value")] if action in ("resume", "update") else list(step.get("values") or [])
        invalid = [o for v, o in zip(values, outcomes) if v == INVALID and o.reached_framework()]
        if invalid:
            note(INVALID_INPUT, f"{'update' if action == 'update' else 'resume'} at {at}")
        for outcome in outcomes:
            if outcome.status == CRASHED and step.get("crash"):
                crash = step["crash"]
                note(CRASH, f"stage {crash['stage']} {crash['when']}")

    def _noter(self, step: dict) -> Callable[[str, str], None]:
        """Records a kind of exercise at a place, with the step's variant where the adapter
        declares one for its operation (named in the step, or its only one)."""
        declared = self.variant_names(step["action"], step.get("intent"))
        variant = step.get("variant") or (declared[0] if len(declared) == 1 else None)

        def note(kind: str, place: str) -> None:
            self.exercised.setdefault(kind, set()).add(place)
            if variant is not None:
                self.exercised_variants.setdefault(kind, set()).add(f"{step['action']}: {variant}")

        return note

    def _describe_late(self, step: dict, outcomes: list, before: Observation) -> None:
        """What the framework did with each resume it accepted for an interrupt that had already
        consumed a value, read off the observation after it: the reason consume-once-value
        gives, and the evidence of where it was exercised."""
        late, self._late = self._late, []
        for t, stage, value in late:
            was, now = before.threads[t], self.observation.threads[t]
            if (stage, value) in (now.late_inputs or ()) and (stage, value) not in (was.late_inputs or ()):
                did = "recorded it as a late input, which is never read"
                if self._ran_with(was, now, stage, value):
                    did = (
                        f"stored it beside the value already recorded and ran stage {stage} with it "
                        f"(its head went from stage {was.chain[-1].pc} to stage {now.chain[-1].pc})"
                    )
            elif now.inputs is not None and now.inputs.get(stage) == value != (was.inputs or {}).get(stage):
                did = "recorded it in place of the consumed value"
            elif now.chain != was.chain:
                recorded = self._where_recorded(was, now, value)
                did = f"accepted it without an error{recorded} and ran the thread again (its head went "
                did += f"from stage {was.chain[-1].pc} to stage {now.chain[-1].pc})"
            else:
                did = "accepted it without an error and ignored it: nothing recorded, the thread unchanged"
            self.history.late_seen.setdefault(
                (t, stage, value),
                f"a resume of {value_name(value)} to the interrupt at stage {stage} of t{t}, which had "
                f"already consumed a value, was not refused: the framework {did}",
            )
            self._noter(step)(LATE_RESUME, f"stage {stage}: not refused, the framework {did.split(':')[0]}")

    def _ran_with(self, was, now, stage: int, value: int) -> bool:
        """Whether `now` has a new checkpoint committing `stage` with `value` as its node's
        input: the late value was used, not only stored (Google ADK's second confirmation)."""
        node = self.workflow.stages[stage].node
        new = [entry for entry in now.chain if entry not in was.chain]
        return any(entry.stage == stage and entry.app[node] == value for entry in new)

    @staticmethod
    def _where_recorded(was, now, value: int) -> str:
        """What the framework did with a late value it accepted, where the adapter observes
        recorded inputs: ", recorded it at stage S," or ", recorded it nowhere,"; else ""."""
        if now.inputs is None:
            return ""
        stages = sorted(s for s, v in now.inputs.items() if v == value != (was.inputs or {}).get(s))
        return f", recorded it at stage {stages[0]}," if stages else ", recorded it nowhere,"

    def _remember_fork(self, step: dict, outcome, before: Observation) -> None:
        t, c = step["thread"], step["checkpoint"]
        new = len(before.threads)
        if outcome.thread is not None and outcome.thread != new:
            raise AdapterFailure(f"the adapter numbered the new fork {outcome.thread}, expected {new}")
        parent = before.threads[t]
        chain = parent.chain
        edit = step["intent"] == "edit"
        self.history.forks[new] = ForkRecord(
            parent=t,
            base=c,
            intent=step["intent"],
            edit_value=step["value"] if edit else NO_VALUE,
            inherited=chain[c].pc if edit else committed_upto(chain),
            snapshot=tuple(chain[: c + 1]),
            parent_chain=tuple(chain),
            parent_inputs=None if parent.inputs is None else dict(parent.inputs),
            parent_sent=len(self.history.sent.get(t, ())),
        )
        if t in self.history.crashed:
            self.history.crashed.add(new)

    @staticmethod
    def _rewound_across(observation: Observation, thread: int, stage: int) -> bool:
        """Whether `thread`'s head is back at or before `stage` although a checkpoint records
        `stage` committed: the node ran again after its commit (prefix-continuation's fault)."""
        chain = observation.threads[thread].chain
        return chain[-1].pc <= stage and any(entry.stage == stage for entry in chain)

    def _parked(self, observation: Observation, thread: int) -> tuple[int, object] | None:
        """(stage, head) when `thread` is parked at an interrupt with no value recorded for it."""
        if thread >= len(observation.threads):
            return None
        view = observation.threads[thread]
        pc = view.chain[-1].pc
        if view.run != "free" or pc == self.workflow.end or not self.workflow.consumes[pc]:
            return None
        if pc in self._recorded(view):
            return None
        return pc, view.chain[-1]

    def _judge_refused_valid(self, thread: int, before: Observation) -> None:
        """A valid value refused by an interrupt that is still parked where a schema-invalid
        value was refused: the invalid value consumed it (it must not; checkpoint-validity)."""
        parked = self._parked(before, thread)
        if parked is None or self.history.refused_invalid.get(thread) != parked:
            return
        # Refused for another reason (the delivery ran and a node's output failed the thread)
        # when the interrupt is no longer parked where it was.
        if self._parked(self._observe(), thread) == parked:
            self.history.findings.append(
                (
                    CHECKPOINT_VALIDITY,
                    f"after refusing a schema-invalid resume value, the interrupt at stage {parked[0]} of "
                    f"t{thread} refuses valid values too: the invalid value consumed it",
                )
            )

    def _as_forked(self, observation: Observation, thread: int) -> Observation:
        """`observation` with fork parents read as they were when forked (`as_when_forked`):
        a record a fork wrote onto its parent's parked interrupt is the fork's fault
        (fork-determinism), so the parent's own resume there is a delivery, not a second one."""
        if not self.history.forks:
            return observation
        reading = as_when_forked(self.history, observation)
        return reading if thread < len(reading.threads) else observation

    def _consumed_interrupt(self, observation: Observation, thread: int) -> int | None:
        """The interrupt a resume to `thread` is aimed at, if it has already consumed (or
        claimed) a value: such a resume must be refused."""
        if thread >= len(observation.threads):
            return None
        view = observation.threads[thread]
        if view.run == "new":
            return None
        pc = view.chain[-1].pc
        reached = [s for s in self.workflow.consuming if s <= pc]
        if not reached:
            return None
        target = reached[-1]
        if target < pc or target in self._recorded(view):
            return target
        return None

    def _recorded(self, view) -> dict[int, int]:
        if view.inputs is not None:
            return dict(view.inputs)
        return {
            e.stage: e.app[self.workflow.stages[e.stage].node]
            for e in view.chain
            if e.stage >= 0 and self.workflow.consumes[e.stage]
        }

    # -- judging -------------------------------------------------------------------------

    def _world(self):
        events = self.sink.events()
        return build_world(self.workflow, self.history, self.observation, events, self.capabilities)

    def _violations(self, world) -> dict[str, str]:
        violated = judge_world(self.workflow, world, self.skip)
        if CONSUME_ONCE_VALUE in violated:
            violated[CONSUME_ONCE_VALUE] = self._late_reason(world, violated[CONSUME_ONCE_VALUE])
        for clause_id, seen in self.history.findings:
            violated.setdefault(clause_id, seen)
        changed = parent_changes(self.history, self.observation, self.workflow)
        for f, fork in self.history.forks.items():
            threads = self.observation.threads
            if f >= len(threads) or fork.parent in changed:
                continue
            if threads[f].chain[: fork.base + 1] != fork.snapshot:
                violated.setdefault(
                    FORK_DETERMINISM,
                    f"fork t{f} does not start from exactly "
                    f"checkpoint {fork.base} of t{fork.parent} and its ancestry",
                )
        if changed and FORK_DETERMINISM not in self.skip:
            violated = self._count_parent_changes(violated, changed)
        if FORK_DETERMINISM in violated and PREFIX_CONTINUATION in violated:
            violated = self._count_rerun_ancestry(world, violated)
        for root, seen in self.history.derived:  # the root's fault was seen when these were
            if root not in violated:
                violated[root] = seen
            elif seen not in violated[root]:
                violated[root] += f"; {seen}"
        return violated

    def _count_rerun_ancestry(self, world, violated: dict[str, str]) -> dict[str, str]:
        """A fork that ran a node of its checkpoint's ancestry again is fork-determinism's fault
        (docs/contract.md, "Where a derived fault is counted"): prefix-continuation failing on
        that re-run is derived, named in fork-determinism's finding, when it holds without the
        first such fork and the threads after it."""
        rerun = [t for t, thread in enumerate(world.threads) if thread.ancestry_executed]
        if not rerun:
            return violated
        first = rerun[0]
        before = Observation(self.observation.threads[:first])
        events = self.sink.events()
        still = judge_world(
            self.workflow,
            build_world(self.workflow, self.history, before, events, self.capabilities),
            self.skip,
        )
        if PREFIX_CONTINUATION in still:
            return violated
        kept = {cid: reason for cid, reason in violated.items() if cid != PREFIX_CONTINUATION}
        kept[FORK_DETERMINISM] += (
            f"; fork t{first} ran its checkpoint's ancestry again, on which prefix-continuation also "
            "fails, counted here only (derived from this re-run)"
        )
        return kept

    def _late_reason(self, world, reason: str) -> str:
        """consume-once-value's reason in the framework's terms: the model's predicate names the
        first thread with a second record; what the framework did with it was observed."""
        for t, thread in enumerate(world.threads):
            if thread.second_records:
                stage, value = thread.second_records[0]
                return self.history.late_seen.get((t, stage, value), reason)
        return reason

    def _count_parent_changes(self, violated: dict[str, str], changed: dict[int, str]) -> dict[str, str]:
        """A fork changed its parent's checkpoints or recorded inputs: fork-determinism's fault,
        counted there and only there (docs/contract.md, "Where a derived fault is counted").
        A clause that fails on the changed parent but holds once the parent is read as it was
        when the fork was made (its snapshot) fails only because of that change: it is named
        in fork-determinism's finding, not reported itself."""
        seen = "; ".join(changed[t] for t in sorted(changed))
        repaired = as_when_forked(self.history, self.observation)
        events = self.sink.events()
        still = judge_world(
            self.workflow,
            build_world(self.workflow, self.history, repaired, events, self.capabilities),
            self.skip,
        )
        derived = [cid for cid in violated if cid in CHECKS and cid != FORK_DETERMINISM and cid not in still]
        if derived:
            verb = "fails" if len(derived) == 1 else "fail"
            seen += (
                f"; on the changed record {', '.join(derived)} also {verb}, "
                "counted here only (derived from this change)"
            )
        kept = {cid: reason for cid, reason in violated.items() if cid not in derived}
        own = kept.get(FORK_DETERMINISM)
        kept[FORK_DETERMINISM] = seen if own is None else f"{own}; {seen}"
        return kept

    def _judge(self, at: int | str, extra: dict[str, str] | None = None) -> None:
        world = self._world()
        violated = self._violations(world)
        violated.update(extra or {})
        violated = {cid: seen for cid, seen in violated.items() if cid not in self.ignore}
        if violated:
            violated = ordered(violated)
            first = next(iter(violated))
            violation = VIOLATIONS[first](violated, at, list(self.steps), self.observed(world))
            if self.on_violation is not None:
                self.on_violation(violation)
            raise violation

    def observed(self, world) -> dict:
        """What the adapter showed, for repros: each thread's chain, inputs and run state, and
        the sink's applications by effect identity; and, step by step, what the store showed
        after it (`stores`) and the sink's events with the operation that caused them
        (`events`: an event's `op` is `s<step>`, `s<step>.<delivery>` or a drain's), so that a
        reader (the HTML report's sequence diagram) can tell what each step did."""
        threads = []
        for t, view in enumerate(self.observation.threads):
            threads.append(
                {
                    "thread": t,
                    "run": view.run,
                    "checkpoints": [{"pc": e.pc, "stage": e.stage, "state": list(e.app)} for e in view.chain],
                    "inputs": None
                    if view.inputs is None
                    else {str(k): v for k, v in sorted(view.inputs.items())},
                }
            )
        sink = [
            {"identity": [identity[0], identity[1], list(identity[2])], "applications": count}
            for identity, count in world.sink
        ]
        events = [
            {
                "op": e.op,
                "kind": e.kind,
                "thread": e.thread,
                "stage": e.stage,
                "role": e.role,
                "key": e.key,
                "applied": e.applied,
            }
            for e in self.sink.events()
        ]
        return {"threads": threads, "sink": sink, "stores": list(self.stores), "events": events}

    # -- the end of an example -----------------------------------------------------------

    def finish(self, max_rounds: int | None = None) -> None:
        """Drain (recover crashed, start new threads), judge liveness and every clause, close."""
        try:
            self.drained = True
            rounds = max_rounds or len(self.workflow.stages) + 2
            for round_number in range(rounds):
                progressed = False
                for t, view in enumerate(self.observation.threads):
                    op = f"drain{round_number}.t{t}"
                    if view.run == "dead":
                        outcome = self._call(
                            f"drain: recover t{t}", lambda t=t, op=op: self.adapter.recover(t, None, op)
                        )
                    elif view.run == "new":
                        outcome = self._call(
                            f"drain: start t{t}", lambda t=t, op=op: self.adapter.start(t, None, op)
                        )
                    else:
                        continue
                    [outcome] = checked_outcomes([outcome], 1, "recover" if view.run == "dead" else "start")
                    progressed |= outcome.status == OK
                    self.observation = self._observe()
                if not progressed:
                    break
            extra = {}
            if LIVENESS not in self.skip:
                stuck = judge_liveness(self.workflow, self._world())
                if stuck is not None:
                    extra[LIVENESS] = stuck
            self._judge(DRAIN, extra)
        finally:
            self.close()

    def close(self) -> None:
        """Close the adapter and stop its host; remove the work directory, whatever happens."""
        try:
            if self.adapter.alive:
                self._call("close the adapter", self.adapter.close)
        finally:
            self._discard()

    def _discard(self) -> None:
        """Stop the host (and every process of its group), hand the sink's log to `on_close`,
        and remove the work directory."""
        try:
            self.adapter.stop()
        finally:
            try:
                if self.on_close is not None:
                    self._closing()
            finally:
                if self.workdir is not None:
                    shutil.rmtree(self.workdir, ignore_errors=True)

    def _closing(self) -> None:
        """What the session exercised, with what the sink's log shows, to `on_close`."""
        on_close, self.on_close = self.on_close, None  # once
        events = self.sink.events()
        for kind, places in effect_places(self.workflow, events).items():
            self.exercised.setdefault(kind, set()).update(places)
        if self.drained:
            self.exercised.setdefault(DRAIN_EXERCISE, set())
        on_close(self, events)

    # -- adapter calls -------------------------------------------------------------------

    def _observe(self) -> Observation:
        return checked_observation(self._call("observe", self.adapter.observe))

    def _call(self, what: str, function):
        """Call into the hosted adapter; a call that does not return normally (it raised, its
        process died, it outlived the step timeout) is an AdapterFailure naming the step."""
        try:
            with self.waiting():
                return function()
        except HostProblem as problem:
            if problem.kind == RAISED:
                raise AdapterFailure(
                    f"the adapter raised during {what}: {problem.reason[len('raised ') :]}"
                ) from None
            raise AdapterFailure(f"{what} {problem.reason}") from None


RUNS = ("new", "free", "live", "dead", "failed")


def checked_outcomes(returned: object, count: int, operation: str) -> list[Outcome]:
    """What an operation returned, as a list of `count` Outcomes (one, or one per delivery of a
    resume-together), if it has the protocol's shape; else the adapter failed, said so."""
    method = OPERATION_METHODS.get(operation, operation)
    many = isinstance(returned, (list, tuple))
    outcomes = list(returned) if many else [returned]  # type: ignore[call-overload]
    if operation == "resume-together" and not many:
        raise AdapterFailure(
            f"the adapter failed: {method}() returned a {type(returned).__name__}, not a list of Outcomes"
        )
    if len(outcomes) != count:
        raise AdapterFailure(f"the adapter failed: {method}() returned {len(outcomes)} outcomes for {count}")
    for outcome in outcomes:
        if not isinstance(outcome, Outcome):
            raise AdapterFailure(
                f"the adapter failed: {method}() returned a {type(outcome).__name__}, not an Outcome"
            )
        if outcome.status not in (OK, REFUSED, CRASHED):
            raise AdapterFailure(
                f"the adapter failed: {method}() returned an Outcome with status "
                f"{str(outcome.status)[:40]!r}, not one of {OK}, {REFUSED}, {CRASHED}"
            )
    return outcomes


OPERATION_METHODS = {"resume-together": "resume_together"}


def checked_observation(observation: object) -> Observation:
    """What `observe()` returned, if it has the protocol's shape (an Observation of ThreadViews
    whose chains are Checkpoints); else the adapter failed, which is said in its terms."""

    def wrong(what: str) -> AdapterFailure:
        return AdapterFailure(f"the adapter failed: observe() returned {what}")

    if not isinstance(observation, Observation):
        raise wrong(f"a {type(observation).__name__}, not an Observation")
    if not isinstance(observation.threads, (tuple, list)):
        raise wrong(f"threads as a {type(observation.threads).__name__}, not a tuple")
    for t, view in enumerate(observation.threads):
        if not isinstance(view, ThreadView):
            raise wrong(f"thread {t} as a {type(view).__name__}, not a ThreadView")
        if view.run not in RUNS:
            raise wrong(f"thread {t} with run {str(view.run)[:40]!r}, not one of {', '.join(RUNS)}")
        if not isinstance(view.chain, (tuple, list)) or (not view.chain and view.run != "new"):
            raise wrong(f"thread {t} ({view.run}) with no chain of checkpoints")
        for entry in view.chain:
            shaped = isinstance(entry, tuple) and len(entry) == 3
            if not (shaped and type(entry[0]) is int and type(entry[2]) is int):
                raise wrong(f"thread {t} with a chain entry that is not a Checkpoint(pc, app, stage)")
    return observation
