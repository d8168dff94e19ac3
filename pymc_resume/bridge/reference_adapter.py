"""The bridge adapter for the reference runtime (`pymc_resume.runtime`).

Operations that run nodes (start, resume, recover) run in a forked child process, so a crash
point is a real SIGKILL of that process and a lease it held is left to recovery; concurrent
resumes are k children released together at a race window. Forks and updates are client calls
that run no node, made from the bridge's own process. `fault` switches the runtime's fault
(a mutant name, see `pymc_resume.runtime.faults`).
"""

from __future__ import annotations

from pymc_resume import __version__
from pymc_resume.bridge.adapter import (
    CAPABILITIES, CRASHED, OK, REFUSED, CrashPoint, FuzzSetup, Observation, Outcome, ThreadView,
)
from pymc_resume.bridge.process import KILLED, RETURNED, ControlledPoints, Gate, run_in_children
from pymc_resume.model.state import Checkpoint
from pymc_resume.model.workflow import INVALID
from pymc_resume.runtime import Refused, Runtime, RuntimeWorkflow, faults_for


def _valid_state(app: tuple[int, ...]) -> bool:
    return INVALID not in app


def _valid_value(value: int) -> bool:
    return value != INVALID


class ReferenceAdapter:
    name = "reference"
    version = __version__
    capabilities = CAPABILITIES

    def __init__(self, fault: str | None = None) -> None:
        self.faults = faults_for(fault)  # KeyError on an unknown fault
        self.fault = None if fault in (None, "none") else fault
        self.runtime: Runtime | None = None

    def options(self) -> dict:
        return {"fault": self.fault}

    def open(self, setup: FuzzSetup) -> None:
        workflow = RuntimeWorkflow(setup.workflow, setup.run_node, _valid_state, _valid_value)
        self.runtime = Runtime.create(setup.workdir / "store.db", workflow, faults=self.faults)

    def close(self) -> None:
        self.runtime = None

    # -- operations that run nodes: in child processes -------------------------------------

    def start(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._in_child(lambda runtime: runtime.start(thread, op), crash)

    def resume(self, thread: int, value: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._in_child(lambda runtime: runtime.resume(thread, value, op), crash)

    def recover(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome:
        return self._in_child(lambda runtime: runtime.recover(thread, op), crash)

    def resume_together(self, thread: int, values: list[int], window: str | None, op: str) -> list[Outcome]:
        tasks = [self._task(lambda runtime, v=v, i=i: runtime.resume(thread, v, f"{op}.{i}"), None, window)
                 for i, v in enumerate(values)]
        return [self._outcome(result) for result in run_in_children(tasks, synchronized=window is not None)]

    def _in_child(self, operation, crash: CrashPoint | None) -> Outcome:
        [result] = run_in_children([self._task(operation, crash, None)])
        return self._outcome(result)

    def _task(self, operation, crash: CrashPoint | None, window: str | None):
        runtime = self.runtime

        def task(gate: Gate) -> dict:
            probed = runtime.with_probe(ControlledPoints(crash, window, gate))
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
        return Outcome(result.value["status"], result.value["detail"])

    # -- client calls that run no node -----------------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        try:
            new = self.runtime.fork(thread, checkpoint, intent, value)
        except Refused as error:
            return Outcome(REFUSED, str(error))
        return Outcome(OK, f"forked as thread {new}", thread=new)

    def update(self, thread: int, note: int) -> Outcome:
        try:
            self.runtime.update(thread, note)
        except Refused as error:
            return Outcome(REFUSED, str(error))
        return Outcome(OK, "updated")

    def observe(self) -> Observation:
        views = []
        for thread in self.runtime.describe():
            chain = tuple(Checkpoint(pc, tuple(app), stage) for pc, app, stage in thread["chain"])
            views.append(ThreadView(chain, thread["run"], dict(thread["inputs"]), tuple(thread["late_inputs"])))
        return Observation(tuple(views))
