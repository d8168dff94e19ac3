"""The pymc-resume adapter for Tinyflow (tutorial_executor.py), written step by step in
docs/adapters.md. Run it:

    pymc-resume profile examples/tutorial_adapter.py:TutorialAdapter --bounds small --examples 2
"""

import json
import sys
from pathlib import Path

from pymc_resume.bridge.adapter import OK, REFUSED, FuzzSetup, Observation, Outcome, ThreadView
from pymc_resume.bridge.kit import ChildProcessAdapter
from pymc_resume.model.state import INITIAL, UPDATE, Checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent))  # Tinyflow lives beside this file
from tutorial_executor import Flow, Refused, Step, alive  # noqa: E402

SOURCES = {"start": INITIAL, "update": UPDATE}  # a checkpoint's source -> the model's stage mark


class TutorialAdapter(ChildProcessAdapter):
    name = "tinyflow"
    version = "tutorial"
    framework = "Tinyflow"
    # What observe() shows: recorded inputs and claims (the inputs table), run leases (the runs
    # table), and node executions with their operation and role (the kit's NodeContext).
    capabilities = frozenset({"recorded-inputs", "leases", "executions"})
    refusals = (Refused,)  # what Tinyflow raises to a client whose request it refuses

    # -- step 1: the bridge's workflow as a Tinyflow flow ------------------------------------

    def open(self, setup: FuzzSetup) -> None:
        super().open(setup)
        self.fields = [f"n{node}" for node in range(len(setup.workflow.nodes))] + ["note"]
        steps = [Step(f"s{s}", self._step(s), waits=stage.consumes) for s, stage in enumerate(setup.workflow.stages)]
        self.flow = Flow(setup.workdir / "tinyflow.db", steps,
                         valid=lambda state: all(value >= 0 for value in state.values()),
                         valid_value=lambda value: value >= 0,
                         on_commit=lambda run, step: self.committed(step))  # the after-commit crash point
        self.threads[0]["run_id"] = self.flow.create(self._state(setup.workflow.initial_state()))

    def _step(self, stage: int):
        """Tinyflow's step function for model stage `stage`: the bridge's node code, keyed by
        the key Tinyflow hands the step."""
        def run(state: dict, value, key: str) -> dict:
            return self._state(self.execute(stage, self._app(state), value, key))
        return run

    def _state(self, app: tuple[int, ...]) -> dict:
        return dict(zip(self.fields, app))

    def _app(self, state: dict) -> tuple[int, ...]:
        return tuple(state[field] for field in self.fields)

    def _run(self, thread: int) -> int:
        return self.threads[thread]["run_id"]

    # -- step 2: the client operations that run steps (each in a child process) ---------------

    def client_start(self, thread: int) -> str:
        self.flow.start(self._run(thread))
        return "started"

    def client_resume(self, thread: int, value: int) -> str:
        # Tinyflow loads the head and claims in one call: the race window goes right before it.
        self.loaded()
        self.flow.resume(self._run(thread), value)
        return "resumed"

    def client_recover(self, thread: int) -> str:
        self.flow.recover(self._run(thread))
        return "recovered"

    # -- step 3: the client calls that run no step ---------------------------------------------

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome:
        try:
            run = self.flow.fork(self._run(thread), checkpoint, value if intent == "edit" else None)
        except Refused as refusal:
            return Outcome(REFUSED, str(refusal))
        return Outcome(OK, f"forked as run {run}", thread=self.add_thread(run_id=run))

    def update(self, thread: int, note: int) -> Outcome:
        try:
            self.flow.update(self._run(thread), {"note": note})
        except Refused as refusal:
            return Outcome(REFUSED, str(refusal))
        return Outcome(OK, "updated")

    # -- step 4: what the store shows, in the model's words --------------------------------------

    def observe(self) -> Observation:
        with self.flow.db() as db:
            return Observation(tuple(self._view(db, memory["run_id"]) for memory in self.threads))

    def _view(self, db, run: int) -> ThreadView:
        (status, _, lease), _, inputs = self.flow.read(db, run)
        rows = db.execute("SELECT position, source, state FROM checkpoints WHERE run = ? ORDER BY seq", (run,))
        chain = tuple(Checkpoint(position, self._app(json.loads(state)), SOURCES.get(source, position - 1))
                      for position, source, state in rows)
        return ThreadView(chain, _run_state(status, lease), inputs)


def _run_state(status: str, lease: str | None) -> str:
    """The bridge's run state from Tinyflow's own: "dead" only when a lease is held by a process
    that is gone (recovery has something to take over), never merely because a process died."""
    if status in ("new", "failed"):
        return status
    if lease is None:
        return "free"
    return "live" if alive(lease) else "dead"
