"""The adapter kit: a base class for adapters that run a framework's client in child processes.

Every live adapter needs the same plumbing around its framework: each client operation that runs
node code (start, resume, recover) runs in a forked child process, so that a crash point is a
real SIGKILL; concurrent deliveries are k children held at a race window and released together;
a killed child leaves its thread for the bridge to recover; node code gets a `NodeContext`; and
the after-commit crash point needs a hook where the framework has just stored a stage's result.
`ChildProcessAdapter` is that plumbing, so an adapter is left with what is its framework's own:

- in the child process, what the framework's client does: `client_start(thread)`,
  `client_resume(thread, value)`, `client_recover(thread)`, each returning a line for the
  outcome's detail, or raising an exception listed in `refusals` (what the framework returns to
  its client as an error: the operation is `refused` by the framework), `Refusal` (the client's
  own refusal, before any framework call) or `NotExpressible` (no documented call of the
  variant expresses what was asked); or raising `NoOp` when it has nothing to do and calls
  nothing of the framework (a recovery of a thread that had already ended). An operation with
  two or more variants passes the chosen one's name on as a keyword, `variant=name`
  (`bridge/adapter/protocol.py`);
- in the adapter's own process, the client calls that run no node (`fork`, `update`) and
  `observe()`, read from the framework's store.

Inside the child, the framework's node code calls `execute(stage, state, value, key)` (it runs
the bridge's node code between the before-execute and after-execute crash points and race
window), the framework's store calls `committed(stage, ...)` right after it durably wrote the
result of those stages (the after-commit crash point), and a delivery calls `loaded()` after it
read the thread's head and before it claims the interrupt (the after-load race window).
docs/adapters.md writes a complete adapter with it, step by step.

A framework that runs node kinds of its own (no node code of ours) reports them from its hooks
instead: `node_started(stage, key)` when it is about to run the node of a model stage (the
before-execute crash point; the sink logs the execution), `node_finished(stage)` when the node
ran (after-execute), and `effect_sent(stage, key, state)` from the outlet its effects go through
(a transport, an outbox), which the adapter plugs into the sink. docs/adapters.md, "Frameworks
with built-in node kinds", and examples/kinds_adapter.py.

Warm clients (`warm-clients` in `capabilities`): start, resume, recover and fork given a
`client` id run in that client's long-lived process (`kit.warm`), forked from the adapter's
process when first used and kept until the adapter closes or a crash point kills it, so that
whatever the framework's client keeps in memory between its calls carries over. Each request
hands the warm process the adapter's `threads` memory and takes back what the operation left
there (so keep it JSON: ids, not objects); a fork in a warm client runs the adapter's own
`fork`.

Run-state memory: `self.threads[t]` is a dict per bridge thread, `{"run": ...}` plus whatever
the adapter keeps there (its framework's id for the thread). After an operation `run` is "dead"
when the child was killed, else "free" (`bridge.kit.process.settle`). That is the client's memory,
for frameworks whose store has no run lease; an adapter whose store has one reports the
store's reading in `observe()` instead (see docs/adapters.md, "What 'dead' means").
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from pymc_resume.bridge.adapter import (
    CLIENT,
    FRAMEWORK,
    NOT_EXPRESSIBLE,
    OK,
    REFUSED,
    WARM_CLIENTS,
    CrashPoint,
    FuzzSetup,
    Outcome,
)
from pymc_resume.bridge.adapter.nodes import NodeContext
from pymc_resume.bridge.kit.process import RETURNED, Barrier, ClientControl, run_in_children, settle
from pymc_resume.bridge.kit.warm import WarmClient

RUN = "run"
DELIVERY = "delivery"
RECOVERY = "recovery"


class Refusal(Exception):
    """The adapter's own refusal, raised by a client hook before it asks the framework for
    anything (for instance: the thread is not parked at an interrupt). It is the client's, not
    the framework's: what it refuses is no evidence for a verdict (`Outcome.by` is CLIENT)."""


class NotExpressible(Exception):
    """What was asked (a fork from this checkpoint, with this intent, by this variant) has no
    documented call in the framework: refused with `Outcome.by` NOT_EXPRESSIBLE."""


class NoOp(Exception):
    """The client has nothing to do and calls nothing of the framework (recovering a thread
    that had already ended): an OK outcome with `by` CLIENT, which is no evidence for a verdict.
    Its message says why."""


class ChildProcessAdapter:
    """Client operations in child processes, crash points, race windows, run-state memory.

    Subclasses set `name`, `version` and `capabilities` (`executions` by default: add what
    `observe()` really shows), `framework` (named in errors),
    `refusals` (the exception types the framework raises to its client for a refused
    operation), and implement the client hooks, `fork`, `update` and `observe`. An adapter that
    overrides `open` calls `super().open(setup)` first.
    """

    name = "unnamed"
    version = "unknown"
    # `executions` is true by construction (`execute` hands node code the operation and role);
    # add what `observe()` really shows: recorded-inputs, leases, late-inputs.
    capabilities = frozenset({"executions"})
    framework = "the framework"
    refusals: tuple[type[BaseException], ...] = ()
    abstract = False  # True on an intermediate base class: its client hooks are not checked

    def __init_subclass__(cls, **kwargs) -> None:
        """Refuse, when the class is defined, an adapter that lacks a client hook it needs (the
        bridge would only find out at the first operation): misuse is reported where it is."""
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("abstract", False):
            return
        for name in ("fork", "update"):  # run in this process: refusals become outcomes here
            own = cls.__dict__.get(name)
            if own is not None and not hasattr(own, "refusals_as_outcomes"):
                setattr(cls, name, _refusals_as_outcomes(own))
        own_fork = getattr(cls, "fork", None)
        if WARM_CLIENTS in cls.capabilities and own_fork and not hasattr(own_fork, "serves_warm_clients"):
            cls.own_fork = own_fork
            cls.fork = _fork_in_warm_clients(own_fork)
        unsupported = getattr(cls, "unsupported", None) or {}
        hooks = ["client_start", "client_recover"] + ([] if "resume" in unsupported else ["client_resume"])
        missing = [hook for hook in hooks if getattr(cls, hook) is getattr(ChildProcessAdapter, hook)]
        if missing:
            raise TypeError(
                f"{cls.__name__} (a ChildProcessAdapter) does not define {', '.join(missing)}: "
                "what the framework's client does in the child process (see docs/adapters.md)"
            )

    def __init__(self) -> None:
        self.setup: FuzzSetup | None = None
        self.threads: list[dict] = []
        self.control: ClientControl | None = None  # set in the child process of an operation
        self.warm: dict[str, WarmClient] = {}  # warm client id -> its live process

    def options(self) -> dict:
        """The constructor options this adapter was built with (for repros); none by default."""
        return {}

    def open(self, setup: FuzzSetup) -> None:
        self.setup = setup
        self.threads = [{"run": "new"}]

    def close(self) -> None:
        for client in self.warm.values():
            client.stop()
        self.warm.clear()
        self.threads = []

    @property
    def workflow(self):
        return self.setup.workflow

    def add_thread(self, **memory) -> int:
        """Remember a new bridge thread (a fork the framework made): its number."""
        self.threads.append({"run": "new", **memory})
        return len(self.threads) - 1

    # -- the client hooks: what the framework's client does, in the child process ------------

    def client_start(self, thread: int) -> str:
        raise NotImplementedError(f"{type(self).__name__}.client_start")

    def client_resume(self, thread: int, value: int) -> str:
        raise NotImplementedError(f"{type(self).__name__}.client_resume")

    def client_recover(self, thread: int) -> str:
        raise NotImplementedError(f"{type(self).__name__}.client_recover")

    # -- what the framework calls back, in the child process --------------------------------

    def execute(
        self, stage: int, state: tuple[int, ...], value: int | None, key: str | None
    ) -> tuple[int, ...]:
        """Run the bridge's node code for model stage `stage` on `state`, between the crash
        points (and the after-execute race window); `key` is the stable identity the framework
        handed this execution (None: it hands none). Returns the new state."""
        control = self._control()
        control.at("before-execute", stage)
        state = self.setup.run_node(stage, state, value, self._context(stage, key))
        control.executed.add(stage)
        control.at("after-execute", stage)
        return state

    def node_started(self, stage: int, key: str | None = None) -> None:
        """The framework is about to run its own node for model stage `stage` (a built-in node
        kind: no node code of ours): the before-execute crash point, then the sink logs the
        execution (thread, stage, operation, role), as the bridge's node code would."""
        self._control().at("before-execute", stage)
        self.setup.run_node.record_execution(self._context(stage, key))

    def node_finished(self, stage: int) -> None:
        """The framework's own node for `stage` ran: the after-execute crash point and race
        window."""
        control = self._control()
        control.executed.add(stage)
        control.at("after-execute", stage)

    def effect_sent(self, stage: int, key: str | None, state: tuple[int, ...]) -> bool:
        """The framework's node of `stage` sent its effect through the outlet the adapter plugs
        into the sink: applied once per `key` (the identity the framework hands the outlet, or
        None); `state` is the model's state the node saw (a gated node's with its value): the
        effect's identity is read from it, so translate it as `observe` does."""
        return self.setup.run_node.fire(self._context(stage, key), state)

    def _context(self, stage: int, key: str | None) -> NodeContext:
        control = self._control()
        return NodeContext(
            control.thread, stage, self.workflow.stages[stage].node, control.op, control.role, key
        )

    def loaded(self) -> None:
        """The after-load race window: call it when a delivery has read the thread's head (and
        validated its value) and is about to claim the interrupt."""
        self._control().at("after-load", -1)

    def committed(self, *stages: int) -> None:
        """The framework durably stored the results of `stages`: the after-commit crash point
        of any of them that this process executed."""
        self._control().committed(stages)

    def _control(self) -> ClientControl:
        if self.control is None:
            raise RuntimeError("node code or a store hook ran outside a client operation's child process")
        return self.control

    # -- the operations the bridge calls --------------------------------------------------------

    def start(
        self, thread: int, crash: CrashPoint | None, op: str, client: str | None = None, **variant
    ) -> Outcome:
        if client is not None:
            return self._in_warm(
                client, {"call": "start", "thread": thread, "op": op, "variant": variant}, crash
            )
        return self._one(thread, RUN, crash, op, lambda: self.client_start(thread, **variant))

    def resume(
        self, thread: int, value: int, crash: CrashPoint | None, op: str, client: str | None = None, **variant
    ) -> Outcome:
        if client is not None:
            request = {"call": "resume", "thread": thread, "value": value, "op": op, "variant": variant}
            return self._in_warm(client, request, crash)
        return self._one(thread, DELIVERY, crash, op, lambda: self.client_resume(thread, value, **variant))

    def recover(
        self, thread: int, crash: CrashPoint | None, op: str, client: str | None = None, **variant
    ) -> Outcome:
        if client is not None:
            return self._in_warm(
                client, {"call": "recover", "thread": thread, "op": op, "variant": variant}, crash
            )
        return self._one(thread, RECOVERY, crash, op, lambda: self.client_recover(thread, **variant))

    def resume_together(
        self,
        thread: int,
        values: list[int],
        window: str | None,
        op: str,
        order: list[int] | None = None,
        **variant,
    ) -> list[Outcome]:
        """k deliveries in k children, held at `window` until all got there (or finished),
        then released together, or one at a time in `order` (`ordered-release`)."""
        tasks = [
            self._task(
                thread,
                DELIVERY,
                None,
                f"{op}.{i}",
                window,
                lambda v=v: self.client_resume(thread, v, **variant),
            )
            for i, v in enumerate(values)
        ]
        results = run_in_children(tasks, synchronized=window is not None, order=order)
        return [settle(self.threads[thread], result, self.framework) for result in results]

    def _one(
        self, thread: int, role: str, crash: CrashPoint | None, op: str, client: Callable[[], str]
    ) -> Outcome:
        [result] = run_in_children([self._task(thread, role, crash, op, None, client)])
        return settle(self.threads[thread], result, self.framework)

    # -- warm clients: long-lived client processes (capability `warm-clients`) ---------------

    def _in_warm(self, client: str, request: dict, crash: CrashPoint | None) -> Outcome:
        """Serve `request` in warm client `client` (starting its process if it has none), with
        the adapter's thread memory handed over and taken back."""
        warm = self.warm.get(client)
        if warm is None or not warm.alive:
            warm = self.warm[client] = WarmClient(self._serve_warm)
        thread = request["thread"]
        result = warm.call({**request, "threads": self.threads, "crash": crash and crash.as_json()})
        if result.status == RETURNED:
            self.threads = result.value.pop("threads")
        if request["call"] == "fork" and result.status == RETURNED:
            reply = result.value
            return Outcome(reply["status"], reply["detail"], thread=reply.get("thread"), by=reply.get("by"))
        return settle(self.threads[thread], result, self.framework)

    def _serve_warm(self, request: dict, barrier: Barrier) -> dict:
        """One request, in the warm client's process: the client hook (or `fork`) under the
        request's crash point, as a fresh child runs it; the thread memory goes back with it."""
        self.threads = request["threads"]
        thread, variant, call = request["thread"], request["variant"], request["call"]
        if call == "fork":
            outcome = type(self).own_fork(
                self, thread, request["checkpoint"], request["intent"], request["value"], **variant
            )
            return {**outcome.as_json(), "threads": self.threads}
        crash = CrashPoint(**request["crash"]) if request["crash"] else None
        role = {"start": RUN, "resume": DELIVERY, "recover": RECOVERY}[call]
        hooks = {
            "start": lambda: self.client_start(thread, **variant),
            "resume": lambda: self.client_resume(thread, request["value"], **variant),
            "recover": lambda: self.client_recover(thread, **variant),
        }
        reply = self._task(thread, role, crash, request["op"], None, hooks[call])(barrier)
        return {**reply, "threads": self.threads}

    def _task(
        self,
        thread: int,
        role: str,
        crash: CrashPoint | None,
        op: str,
        window: str | None,
        client: Callable[[], str],
    ):
        """What one child process runs: the client hook under this operation's control."""

        def task(barrier: Barrier) -> dict:
            self.control = ClientControl(thread, op, role, crash, window, barrier)
            try:
                detail = client()
            except NoOp as nothing:
                return {"status": OK, "detail": str(nothing), "by": CLIENT}
            except (Refusal, NotExpressible, *self.refusals) as refusal:
                return {
                    "status": REFUSED,
                    "detail": f"{type(refusal).__name__}: {refusal}",
                    "by": _by(refusal),
                }
            return {"status": OK, "detail": str(detail or "")}

        return task


def _refusals_as_outcomes(method):
    """`method` (the adapter's `fork` or `update`, which run in the adapter's own process, not
    a child), with the kit's `Refusal` and `NotExpressible` and the framework's `refusals`
    turned into refused Outcomes, as the client hooks' are: docs/adapters.md tells an adapter
    to raise them there too (a raise used to end the run as a broken adapter, exit 2)."""

    @functools.wraps(method)
    def call(self, *args, **kwargs) -> Outcome:
        try:
            return method(self, *args, **kwargs)
        except (Refusal, NotExpressible, *self.refusals) as refusal:
            return Outcome(REFUSED, f"{type(refusal).__name__}: {refusal}", by=_by(refusal))

    call.refusals_as_outcomes = True  # type: ignore[attr-defined]
    return call


def _fork_in_warm_clients(own_fork):
    """`own_fork`, the adapter's fork, also taking a warm client's id (`client`): then it runs
    in that client's process (`ChildProcessAdapter._in_warm`)."""

    def fork(self, thread, checkpoint, intent, value, client=None, **variant) -> Outcome:
        if client is None:
            return own_fork(self, thread, checkpoint, intent, value, **variant)
        request = {
            "call": "fork",
            "thread": thread,
            "checkpoint": checkpoint,
            "intent": intent,
            "value": value,
            "variant": variant,
        }
        return self._in_warm(client, request, None)

    fork.__doc__ = own_fork.__doc__
    fork.serves_warm_clients = True  # type: ignore[attr-defined]
    return fork


def _by(refusal: BaseException) -> str:
    """Who refused: the kit's own exceptions say; any other is one the framework raised."""
    if isinstance(refusal, NotExpressible):
        return NOT_EXPRESSIBLE
    if isinstance(refusal, Refusal):
        return CLIENT
    return FRAMEWORK
