"""The bridge adapter for the reference runtime (`pymc_resume.runtime`).

Operations that run nodes (start, resume, recover) run in a forked child process, so a crash
point is a real SIGKILL of that process and a lease it held is left to recovery; concurrent
resumes are k children held at a race window and released together or one at a time in a
drawn order (`ordered-release`). Forks and updates are client calls that run no node, made
from the bridge's own process. With a `client` id (`warm-clients`), start, resume, recover and
fork are served instead by that warm client: a long-lived process with its own `Runtime`
object, whose memory (`Runtime.parked_at`) carries over between its operations. `fault`
switches the runtime's fault (a mutant name, see `pymc_resume.runtime.faults`).
"""

from __future__ import annotations

from pymc_resume import __version__
from pymc_resume.bridge.adapter import (
    CAPABILITIES,
    CRASHED,
    FRAMEWORK,
    OK,
    ORDERED_RELEASE,
    REFUSED,
    WARM_CLIENTS,
    CrashPoint,
    FuzzSetup,
    Observation,
    Outcome,
    ThreadView,
)
from pymc_resume.bridge.kit.preload import preloading
from pymc_resume.bridge.kit.process import KILLED, RETURNED, Barrier, ControlledPoints, run_in_children
from pymc_resume.bridge.kit.warm import WarmClient
from pymc_resume.model.state import Checkpoint
from pymc_resume.model.workflow import INVALID
from pymc_resume.runtime import Refused, Runtime, RuntimeWorkflow, faults_for


def _valid_state(app: tuple[int, ...]) -> bool:
    return INVALID not in app


def _valid_value(value: int) -> bool:
    return value != INVALID


# The reference runtime's own public calls (`pymc_resume.runtime.Runtime`), per contract operation.
FRAMEWORK_CALLS = {
    "start": "Runtime.start(thread, op) in a fresh process (or a warm client's Runtime)",
    "resume": "Runtime.resume(thread, v, op) (validate, claim, execute, commit)",
    "resume-together": "k processes, each Runtime.resume(thread, v, op), released from a barrier",
    "crash": "SIGKILL of the process running the Runtime at a probe point (before or after a stage's "
    "code, or after its commit)",
    "recover": "Runtime.recover(thread, op) in a fresh process (takes over a dead lease, continues a claim)",
    "fork": "Runtime.fork(thread, checkpoint, intent, value) (a new thread: the checkpoint's ancestry "
    "copied, with the declared intent)",
    "update": "Runtime.update(thread, note) (validated before it is persisted)",
}


class ReferenceAdapter:
    name = "reference"
    preload = preloading("pymc_resume.runtime")  # imported once in the host template
    version = __version__
    capabilities = CAPABILITIES | {WARM_CLIENTS, ORDERED_RELEASE}
    framework_calls = FRAMEWORK_CALLS

    def __init__(self, fault: str | None = None) -> None:
        self.faults = faults_for(fault)  # KeyError on an unknown fault
        self.fault = None if fault in (None, "none") else fault
        self.runtime: Runtime | None = None
        self.warm: dict[str, WarmClient] = {}  # client id -> its live process

    def options(self) -> dict:
        return {"fault": self.fault}

    def open(self, setup: FuzzSetup) -> None:
        workflow = RuntimeWorkflow(setup.workflow, setup.run_node, _valid_state, _valid_value)
        self.runtime = Runtime.create(setup.workdir / "store.db", workflow, faults=self.faults)

    def close(self) -> None:
        for client in self.warm.values():
            client.stop()
        self.warm.clear()
        self.runtime = None

    # -- operations that run nodes: in child processes -------------------------------------

    def start(self, thread: int, crash: CrashPoint | None, op: str, client: str | None = None) -> Outcome:
        if client is not None:
            return self._in_warm(client, {"call": "start", "thread": thread, "op": op}, crash)
        return self._in_child(lambda runtime: runtime.start(thread, op), crash)

    def resume(
        self, thread: int, value: int, crash: CrashPoint | None, op: str, client: str | None = None
    ) -> Outcome:
        if client is not None:
            return self._in_warm(
                client, {"call": "resume", "thread": thread, "value": value, "op": op}, crash
            )
        return self._in_child(lambda runtime: runtime.resume(thread, value, op), crash)

    def recover(self, thread: int, crash: CrashPoint | None, op: str, client: str | None = None) -> Outcome:
        if client is not None:
            return self._in_warm(client, {"call": "recover", "thread": thread, "op": op}, crash)
        return self._in_child(lambda runtime: runtime.recover(thread, op), crash)

    def resume_together(
        self, thread: int, values: list[int], window: str | None, op: str, order: list[int] | None = None
    ) -> list[Outcome]:
        tasks = [
            self._task(lambda runtime, v=v, i=i: runtime.resume(thread, v, f"{op}.{i}"), None, window)
            for i, v in enumerate(values)
        ]
        results = run_in_children(tasks, synchronized=window is not None, order=order)
        return [self._outcome(result) for result in results]

    def _in_child(self, operation, crash: CrashPoint | None) -> Outcome:
        [result] = run_in_children([self._task(operation, crash, None)])
        return self._outcome(result)

    def _in_warm(self, client: str, request: dict, crash: CrashPoint | None) -> Outcome:
        """Serve `request` in warm client `client`, starting its process if it has none."""
        warm = self.warm.get(client)
        if warm is None or not warm.alive:
            warm = self.warm[client] = WarmClient(self._warm_server())
        result = warm.call({**request, "crash": None if crash is None else crash.as_json()})
        outcome = self._outcome(result)
        if result.status == RETURNED and "thread" in result.value:
            outcome = Outcome(outcome.status, outcome.detail, thread=result.value["thread"], by=outcome.by)
        return outcome

    def _warm_server(self):
        """What a warm client process runs per request: one `Runtime` object for its whole life."""
        runtime = self.runtime.with_probe(ControlledPoints(None))

        def serve(request: dict, barrier: Barrier) -> dict:
            crash = CrashPoint(**request["crash"]) if request["crash"] else None
            runtime.probe = ControlledPoints(crash, None, barrier)
            call, thread = request["call"], request["thread"]
            try:
                if call == "fork":
                    new = runtime.fork(thread, request["checkpoint"], request["intent"], request["value"])
                    return {"status": OK, "detail": f"forked as thread {new}", "thread": new}
                if call == "start":
                    detail = runtime.start(thread, request["op"])
                elif call == "resume":
                    detail = runtime.resume(thread, request["value"], request["op"])
                else:
                    detail = runtime.recover(thread, request["op"])
                return {"status": OK, "detail": detail}
            except Refused as error:
                return {"status": REFUSED, "detail": str(error)}

        return serve

    def _task(self, operation, crash: CrashPoint | None, window: str | None):
        runtime = self.runtime

        def task(barrier: Barrier) -> dict:
            probed = runtime.with_probe(ControlledPoints(crash, window, barrier))
            try:
                return {"status": OK, "detail": operation(probed)}
            except Refused as error:
                return {"status": REFUSED, "detail": str(error)}

        return task

    @staticmethod
    def _outcome(result) -> Outcome:
        if result.status == KILLED:
            return Outcome(CRASHED, f"killed by signal {result.signal}")
        if result.status != RETURNED:
            raise RuntimeError(f"the runtime failed in a child process: {result.error}")
        # Every refusal is the runtime's own (`Refused`): the reference runtime is the framework here.
        return Outcome(result.value["status"], result.value["detail"], by=FRAMEWORK)

    # -- client calls that run no node -----------------------------------------------------

    def fork(
        self, thread: int, checkpoint: int, intent: str, value: int | None, client: str | None = None
    ) -> Outcome:
        if client is not None:
            request = {
                "call": "fork",
                "thread": thread,
                "checkpoint": checkpoint,
                "intent": intent,
                "value": value,
            }
            return self._in_warm(client, request, None)
        try:
            new = self.runtime.fork(thread, checkpoint, intent, value)
        except Refused as error:
            return Outcome(REFUSED, str(error), by=FRAMEWORK)
        return Outcome(OK, f"forked as thread {new}", thread=new)

    def update(self, thread: int, note: int) -> Outcome:
        try:
            self.runtime.update(thread, note)
        except Refused as error:
            return Outcome(REFUSED, str(error), by=FRAMEWORK)
        return Outcome(OK, "updated")

    def observe(self) -> Observation:
        views = []
        for thread in self.runtime.describe():
            chain = tuple(Checkpoint(pc, tuple(app), stage) for pc, app, stage in thread["chain"])
            views.append(
                ThreadView(chain, thread["run"], dict(thread["inputs"]), tuple(thread["late_inputs"]))
            )
        return Observation(tuple(views))
