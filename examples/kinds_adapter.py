"""The pymc-resume adapter for Kindflow (kinds_executor.py), a framework that runs node kinds of
its own: no node code of ours runs (docs/adapters.md, "Frameworks with built-in node kinds").

The mapping, one Kindflow node per model stage: a step is a `Sum` of the answers before it, read
back as the model's output 1 + sum % 2 once the node has run; an effect node a `Send`; an
interrupt an `Ask`; a gated node an `Approve`; an effect-then-interrupt node a `Send` (into a
field of its own, not the model's) then an `Ask`. Executions and crash points come from
Kindflow's callbacks, effects from its transport, which hands each message to the sink keyed by
the message id Kindflow gives it. Run it:

    pymc-resume profile examples/kinds_adapter.py:KindsAdapter --bounds small --examples 2
"""

import json
import sys
from pathlib import Path

from pymc_resume.bridge.adapter import OK, REFUSED, FuzzSetup, Observation, Outcome, ThreadView
from pymc_resume.bridge.kit import ChildProcessAdapter
from pymc_resume.model.state import INITIAL, UPDATE, Checkpoint
from pymc_resume.model.workflow import NodeKind, StageKind

sys.path.insert(0, str(Path(__file__).resolve().parent))  # Kindflow lives beside this file
from kinds_executor import Approve, Ask, Kindflow, Refused, Schema, Send, Sum, alive

SOURCES = {"start": INITIAL, "update": UPDATE}  # a checkpoint's source -> the model's stage mark


class KindsAdapter(ChildProcessAdapter):
    name = "kindflow"
    version = "example"
    framework = "Kindflow"
    capabilities = frozenset({"recorded-inputs", "leases", "executions"})
    refusals = (Refused,)  # what Kindflow raises to a client whose request it refuses
    effect_key = {
        "key": "the id Kindflow gives each message its transport sends (lineage, node, answers so far)",
        "why": "Kindflow derives it from the run's lineage, the node and the answers before it, so a "
        "node that runs again on the same answers (after a crash, in a replay fork) sends the same id",
    }

    # -- the bridge's workflow as Kindflow nodes; the schema with its size bounds ---------------

    def open(self, setup: FuzzSetup) -> None:
        super().open(setup)
        workflow, top = setup.workflow, setup.values
        if NodeKind.OVERFLOW in workflow.nodes:
            raise ValueError("Kindflow has no node kind whose output can break its schema (overflow)")
        self.fields = [f"n{node}" for node in range(len(workflow.nodes))] + ["note"]
        answers = [f"n{stage.node}" for stage in workflow.stages if stage.consumes]
        nodes, bounds = [], {"note": (0, top)}
        for stage in workflow.stages:
            field, kind = f"n{stage.node}", stage.kind
            if kind is StageKind.STEP:  # the answers before it: at most `top` each
                before = [f for f in answers if int(f[1:]) < stage.node]
                nodes.append(Sum(field, before))
                bounds[field] = (0, top * len(before))
            elif kind is StageKind.EFFECT:
                sent = field if workflow.nodes[stage.node] is NodeKind.EFFECT else f"{field}.sent"
                nodes.append(Send(sent, "effects"))
                bounds.setdefault(sent, (0, 1))
            else:
                nodes.append(Ask(field) if kind is StageKind.WAIT else Approve(field, "effects"))
                bounds[field] = (0, top)
        self.steps = [stage for stage, node in enumerate(nodes) if isinstance(node, Sum)]
        self.flow = Kindflow(
            setup.workdir / "kindflow.db",
            nodes,
            Schema(bounds, (1, top)),
            self._transport,
            on_start=self.node_started,
            on_finish=self.node_finished,
            on_commit=lambda run, node: self.committed(node),
        )
        self.threads[0]["run_id"] = self.flow.create(dict.fromkeys(bounds, 0))

    def _app(self, state: dict, pc: int) -> tuple[int, ...]:
        """The model's state from Kindflow's at position `pc`: a `Sum` that has run reads as the
        model's step output; every other field is what Kindflow stored."""
        app = [state[field] for field in self.fields]
        for stage in self.steps:
            if stage < pc:
                node = self.workflow.stages[stage].node
                app[node] = 1 + app[node] % 2
        return tuple(app)

    def _transport(self, message: dict) -> None:
        """Kindflow's transport: every message goes to the sink, keyed by Kindflow's id."""
        self.effect_sent(message["node"], message["id"], self._app(message["state"], message["node"]))

    def _run(self, thread: int) -> int:
        return self.threads[thread]["run_id"]

    # -- the client operations that run nodes (each in a child process) -------------------------

    def client_start(self, thread: int) -> str:
        self.flow.start(self._run(thread))
        return "started"

    def client_resume(self, thread: int, value: int) -> str:
        self.loaded()  # Kindflow loads the head and claims in one call: the race window is before it
        self.flow.resume(self._run(thread), value)
        return "resumed"

    def client_recover(self, thread: int) -> str:
        self.flow.recover(self._run(thread))
        return "recovered"

    # -- the client calls that run no node -------------------------------------------------------

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

    # -- what the store shows, in the model's words ------------------------------------------------

    def observe(self) -> Observation:
        with self.flow.db() as db:
            return Observation(tuple(self._view(db, memory["run_id"]) for memory in self.threads))

    def _view(self, db, run: int) -> ThreadView:
        (status, _, lease), _, inputs = self.flow.read(db, run)
        rows = db.execute(
            "SELECT position, source, state FROM checkpoints WHERE run = ? ORDER BY seq", (run,)
        )
        chain = tuple(
            Checkpoint(pc, self._app(json.loads(state), pc), SOURCES.get(source, pc - 1))
            for pc, source, state in rows
        )
        run_state = (
            status
            if status in ("new", "failed")
            else "free"
            if lease is None
            else "live"
            if alive(lease)
            else "dead"
        )
        return ThreadView(chain, run_state, inputs)
