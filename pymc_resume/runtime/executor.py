"""The reference runtime's operations and its run loop: how a layer gets resume right.

Five client operations, each a few store transactions:

- `start(t)`: take `t`'s run lease (unless it parks at once) and run it.
- `resume(t, v)`: validate `v` *before* anything else; read the head; claim the interrupt in
  one transaction that inserts the claim (unique per interrupt) and takes the run lease. A
  delivery to an interrupt that already has a claim or a recorded input is refused.
- `recover(t)`: take over a run lease whose holder is dead and continue from the head, with
  the claimed value if the head waits on a claim.
- `fork(t, c, intent, v)`: a new thread whose chain is a *copy* of `t`'s checkpoints up to
  `c` (any checkpoint, the head included), with the recorded inputs its intent says (replay:
  the parent's; edit: the new value).
- `update(t, note)`: validate, then append a checkpoint with the new state.

The run loop executes one stage at a time while holding the lease: execute the node (effects
carry their identity as idempotency key), validate its output (an output that breaks the
schema is refused before anything is persisted, and the thread *fails*: it ends there, its
lease released, and only forks of its checkpoints go on), then commit with a
compare-and-set on the head that also records the consumed input and, when the next stage
waits for a value nobody delivered yet (or the thread is done), releases the lease. A crash
anywhere leaves either the old head (the stage runs again, its effect deduplicated by key) or
the new one (the stage never runs again).

A `Runtime` object may serve one operation in a fresh process, or many in a long-lived client
process (a *warm* client, see `bridge/adapters/reference.py`); `parked_at` is the only memory
it keeps across operations: the head it left each thread at, the threads whose state object
a warm client holds. The correct runtime never reads it; the fault warm-fork-shares-state
makes a warm client's fork from the head of such a thread reuse the head's state object.

`faults` switches on the model's mutants (see faults.py); each `if ... in self.faults` below
is the one place a fault acts.
"""

from __future__ import annotations

from pathlib import Path

from pymc_resume.model import mutants as m
from pymc_resume.model.state import INITIAL, UPDATE
from pymc_resume.model.workflow import StageKind
from pymc_resume.runtime.holders import holder_alive, holder_token
from pymc_resume.runtime.store import CheckpointRow, Store, ThreadRow
from pymc_resume.runtime.workflow import NO_PROBE, NodeContext, Probe, RuntimeWorkflow

COMPLETED = "completed"
PARKED = "parked"
FAILED = "failed"  # the thread's status after a node output was refused
RECORDED = "recorded"  # only with the fault record-second-resume

__all__ = ["COMPLETED", "FAILED", "PARKED", "RECORDED", "INITIAL", "UPDATE", "Refused", "Runtime"]


class Refused(Exception):
    """The runtime refuses an operation; the message is the error the client sees."""


class Runtime:
    """One store file, one workflow, optional fault switches, an optional probe."""

    def __init__(
        self,
        store_path: str | Path,
        workflow: RuntimeWorkflow,
        faults: frozenset[str] = frozenset(),
        probe: Probe = NO_PROBE,
    ) -> None:
        self.store = Store(store_path)
        self.workflow = workflow
        self.shape = workflow.shape
        self.stages = workflow.shape.stages
        self.faults = frozenset(faults)
        self.probe = probe
        # thread -> the head (checkpoint seq) this object's run loop left it at: what a warm
        # client process still holds in memory.
        self.parked_at: dict[int, int] = {}
        # Fault warm-fork-shares-state: thread -> the state row of its head that this client
        # shares with a fork it made from there (its in-memory object, see `fork`).
        self.shared_head: dict[int, int] = {}

    @classmethod
    def create(cls, store_path: str | Path, workflow: RuntimeWorkflow, **kwargs) -> Runtime:
        """A runtime on a new store holding the root thread 0."""
        Store.create(store_path, workflow.shape.initial_state())
        return cls(store_path, workflow, **kwargs)

    def with_probe(self, probe: Probe) -> Runtime:
        return Runtime(self.store.path, self.workflow, self.faults, probe)

    # -- client operations ---------------------------------------------------------------

    def start(self, thread: int, op: str = "run") -> str:
        """Run a new thread (the root or a fork) until it parks or completes."""
        me = holder_token()
        with self.store.transaction() as db:
            row = self._thread(db, thread)
            if row.status != "new":
                raise Refused(f"thread {thread} is already started")
            head = self.store.head(db, thread)
            parks = self._parks_at(db, thread, head.pc, recovering=False)
            db.execute(
                "UPDATE threads SET status = 'started', lease = ? WHERE id = ?",
                (None if parks else me, thread),
            )
        if parks:
            self.parked_at[thread] = head.seq
            return PARKED
        return self._run(thread, head, head.pc, me, op, "run", recovering=False)

    def resume(self, thread: int, value: int, op: str = "delivery") -> str:
        """Deliver `value` to the interrupt `thread` waits on; run on until it parks or ends."""
        validates = not self.faults & {m.PERSIST_UNVALIDATED, m.VALIDATE_AFTER_CLAIM}
        if validates and not self.workflow.value_schema(value):
            raise Refused(f"resume value {value} fails the state schema")
        with self.store.snapshot() as db:
            row = self._thread(db, thread)
            if row.status != "started":
                raise Refused(f"thread {thread} is {'not started' if row.status == 'new' else row.status}")
            head = self.store.head(db, thread)
            target = self._latest_interrupt(head.pc)
            if target is None:
                raise Refused(f"thread {thread} has not reached an interrupt")
            consumed = self._consumed(db, thread, target, head)
        if consumed:
            return self._refuse_consumed(thread, target, value)
        self.probe.at("after-load", target)
        if m.NO_CLAIM in self.faults:
            # Fault: no claim and no lease; the compare-and-set commit is the only guard.
            return self._run(thread, head, target, None, op, "delivery", recovering=False, value=value)
        me = holder_token()
        with self.store.transaction() as db:
            head = self.store.head(db, thread)
            if self._consumed(db, thread, target, head):
                consumed = True
            else:
                if self._thread(db, thread).lease is not None:
                    raise Refused(f"thread {thread} is running")
                db.execute(
                    "INSERT INTO inputs (thread, stage, value) VALUES (?, ?, ?)", (thread, target, value)
                )
                self.store.set_lease(db, thread, me)
        if consumed:
            return self._refuse_consumed(thread, target, value)
        return self._run(thread, head, head.pc, me, op, "delivery", recovering=False)

    def recover(self, thread: int, op: str = "recovery") -> str:
        """A fresh process takes over the lease of a crashed holder and continues the thread."""
        me = holder_token()
        with self.store.transaction() as db:
            row = self._thread(db, thread)
            if row.lease is None:
                raise Refused(f"thread {thread} has no lease held by a crashed process")
            if holder_alive(row.lease):
                raise Refused(f"thread {thread} is running")
            if m.NO_MID_NODE_RECOVERY in self.faults and row.mid_node:
                raise Refused(f"thread {thread} is marked as running a node")
            self.store.set_lease(db, thread, me)
            head = self.store.head(db, thread)
            chain = self.store.chain(db, thread)
        own = chain[row.base + 1 :] if row.base is not None else chain  # a fork's own checkpoints
        if m.REFIRE_COMMITTED_EFFECT in self.faults:
            self._refire_last_effect(thread, own, op)
        pc = self._recovery_position(row, chain, own, head)
        return self._run(thread, head, pc, me, op, "recovery", recovering=True)

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None = None) -> int:
        """A new thread from checkpoint `checkpoint` (an index in `thread`'s chain)."""
        if intent not in ("replay", "edit"):
            raise Refused(f"a fork declares intent 'replay' or 'edit', not {intent!r}")
        with self.store.transaction() as db:
            self._thread(db, thread)  # refuses a fork of a thread that does not exist
            chain = self.store.chain(db, thread)
            if not 0 <= checkpoint < len(chain):
                raise Refused(f"thread {thread} has no checkpoint {checkpoint}")
            position = chain[checkpoint].pc
            inputs = self.store.inputs(db, thread)
            committed = max((c.stage + 1 for c in chain if c.stage >= 0), default=0)
            if intent == "edit":
                recorded = inputs.get(position, (None, False))[0]
                if not (position < committed and self.shape.consumes[position]):
                    raise Refused("an edit fork starts at an interrupt whose input is recorded")
                if value is None or not self.workflow.value_schema(value) or value == recorded:
                    raise Refused("an edit fork needs a new, valid input")
            new = db.execute("SELECT MAX(id) + 1 FROM threads").fetchone()[0]
            db.execute(
                "INSERT INTO threads (id, parent, base, intent, edit_value, status, head) "
                "VALUES (?, ?, ?, ?, ?, 'new', ?)",
                (new, thread, checkpoint, intent, value if intent == "edit" else None, chain[checkpoint].seq),
            )
            shares_head = (  # fault warm-fork-shares-state: this client ran the thread
                m.WARM_FORK_SHARES_STATE in self.faults
                and checkpoint == len(chain) - 1
                and thread in self.parked_at
            )
            for index, entry in enumerate(chain[: checkpoint + 1]):
                state = entry.state_id
                shared = m.FORK_BY_REFERENCE in self.faults or (shares_head and index == checkpoint)
                if not shared:
                    state = self.store.insert_state(db, entry.app)  # fork by copy
                elif shares_head:
                    self.shared_head[thread] = state
                db.execute(
                    "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)",
                    (new, entry.seq, entry.pc, entry.stage, state),
                )
            inherited = position if intent == "edit" else committed
            for stage, (recorded_value, _) in inputs.items():
                if stage < inherited:
                    db.execute(
                        "INSERT INTO inputs VALUES (?, ?, ?, ?)",
                        (new, stage, recorded_value, int(stage < position)),
                    )
            if intent == "edit":
                used = value
                if m.FORK_WITHOUT_INTENT in self.faults:
                    used = inputs[position][0]  # fault: reuses the recorded input
                db.execute("INSERT INTO inputs VALUES (?, ?, ?, 0)", (new, position, used))
        return new

    def update(self, thread: int, note: int) -> None:
        """A client writes the `note` field of `thread`'s state."""
        with self.store.transaction() as db:
            row = self._thread(db, thread)
            if row.status != "started":
                raise Refused(f"thread {thread} is {'not started' if row.status == 'new' else row.status}")
            if row.lease is not None and holder_alive(row.lease):
                raise Refused(f"thread {thread} is running")
            head = self.store.head(db, thread)
            app = list(head.app)
            app[self.shape.note] = note
            if m.PERSIST_UNVALIDATED not in self.faults and not self.workflow.schema(tuple(app)):
                raise Refused("the update fails the state schema")
            if not self.store.append_checkpoint(db, thread, head.seq, head.pc, UPDATE, tuple(app), row.lease):
                raise Refused(f"thread {thread} moved on; retry the update")

    # -- the run loop --------------------------------------------------------------------

    def _run(
        self,
        thread: int,
        head: CheckpointRow,
        pc: int,
        holder: str | None,
        op: str,
        role: str,
        *,
        recovering: bool,
        value: int | None = None,
    ) -> str:
        """Execute stages from `pc` on the state of `head` until the thread parks or ends.

        `holder` is this process's lease token (None only for an unclaimed delivery under the
        fault no-claim, which carries its `value` in hand instead of a claim).
        """
        seq, app = head.seq, head.app
        while True:
            if pc == self.shape.end:  # only reachable by a thread with no stages left
                self._release(thread, holder)
                return COMPLETED
            stage = self.stages[pc]
            consumed_value = None
            if stage.consumes:
                if value is not None:
                    consumed_value, value = value, None
                else:
                    with self.store.snapshot() as db:
                        recorded = self.store.inputs(db, thread).get(pc)
                    if recorded is None or (m.STUCK_CLAIM in self.faults and recovering):
                        self._release(thread, holder)
                        return PARKED
                    consumed_value = recorded[0]
                if m.PERSIST_UNVALIDATED not in self.faults and not self.workflow.value_schema(
                    consumed_value
                ):
                    # Reached only with the fault validate-after-claim: refused, the claim stays.
                    self._release(thread, holder)
                    raise Refused(f"resume value {consumed_value} fails the state schema")
            self.probe.at("before-execute", pc)
            new_app = self._execute(thread, pc, app, consumed_value, op, role, recovering)
            validates = not self.faults & {m.PERSIST_UNVALIDATED, m.PERSIST_INVALID_OUTPUT}
            if validates and not self.workflow.schema(new_app):
                self._fail(thread, holder)
                raise Refused(f"node output of stage {pc} fails the state schema: thread {thread} failed")
            if m.NO_MID_NODE_RECOVERY in self.faults and holder is not None:
                with self.store.transaction() as db:
                    db.execute("UPDATE threads SET mid_node = 1 WHERE id = ?", (thread,))
            self.probe.at("after-execute", pc)
            with self.store.transaction() as db:
                committed = self.store.append_checkpoint(db, thread, seq, pc + 1, pc, new_app, holder)
                if not committed:
                    if holder is None:  # the unclaimed delivery lost the race: refused
                        raise Refused(f"commit of stage {pc} refused: thread {thread} moved on")
                    head = self.store.head(db, thread)  # retry under the lease, from the head
                    seq, pc, app = head.seq, head.pc, head.app
                    continue
                if holder is None:  # fault no-claim: the winning delivery takes the lease now
                    holder = holder_token()
                    self.store.set_lease(db, thread, holder)
                done, parks = self._after_commit(db, thread, pc, consumed_value, new_app, recovering)
            self.probe.at("after-commit", pc)
            if done or parks:
                self.parked_at[thread] = seq + 1
                return COMPLETED if done else PARKED
            seq, pc, app = seq + 1, pc + 1, new_app

    def _after_commit(self, db, thread: int, pc: int, consumed_value, new_app, recovering: bool):
        """In the transaction that committed stage `pc`: mark its input consumed, clear the
        mid-node mark, write through where a fault shares state, and release the lease if the
        thread now ends or parks. Returns (ends, parks)."""
        if self.stages[pc].consumes:
            marked = db.execute("UPDATE inputs SET consumed = 1 WHERE thread = ? AND stage = ?", (thread, pc))
            if marked.rowcount == 0:
                db.execute("INSERT INTO inputs VALUES (?, ?, ?, 1)", (thread, pc, consumed_value))
        db.execute("UPDATE threads SET mid_node = 0 WHERE id = ?", (thread,))
        if self.faults & {m.FORK_BY_REFERENCE, m.WARM_FORK_SHARES_STATE}:
            self._write_through_to_parent(db, thread, new_app)
        if thread in self.shared_head:  # this client runs on the object it shares
            self.store.overwrite_state(db, self.shared_head.pop(thread), new_app)
        done = pc + 1 == self.shape.end
        parks = not done and self._parks_at(db, thread, pc + 1, recovering)
        if done or parks:
            self.store.set_lease(db, thread, None)
        return done, parks

    def _execute(self, thread: int, pc: int, app, value, op: str, role: str, recovering: bool):
        stage = self.stages[pc]
        fires = stage.kind in (StageKind.EFFECT, StageKind.GATED)
        key = None
        if fires and m.UNKEYED_EFFECTS not in self.faults:
            key = self._effect_key(thread, pc, app, value)
        context = NodeContext(thread, pc, stage.node, op, role, key, recovering)
        new_app = tuple(self.workflow.run_node(pc, tuple(app), value, context))
        if m.RECOVERY_NONDETERMINISTIC_STEP in self.faults and recovering and stage.kind is StageKind.STEP:
            # Fault: the recovery path computes a step differently (the other output).
            flipped = list(new_app)
            flipped[stage.node] = self.shape.step_output(tuple(app), stage.node, flipped=True)
            new_app = tuple(flipped)
        return new_app

    # -- helpers -------------------------------------------------------------------------

    def _thread(self, db, thread: int) -> ThreadRow:
        row = self.store.thread(db, thread)
        if row is None:
            raise Refused(f"no thread {thread}")
        return row

    def _latest_interrupt(self, pc: int) -> int | None:
        """The latest consuming stage the thread has reached: where a delivery is aimed."""
        reached = [s for s in self.shape.consuming if s <= pc]
        return reached[-1] if reached else None

    def _consumed(self, db, thread: int, target: int, head: CheckpointRow) -> bool:
        return head.pc != target or target in self.store.inputs(db, thread)

    def _refuse_consumed(self, thread: int, target: int, value: int) -> str:
        if m.RECORD_SECOND_RESUME in self.faults:
            with self.store.transaction() as db:  # fault: recorded and silently ignored
                db.execute("INSERT INTO late_inputs VALUES (?, ?, ?)", (thread, target, value))
            return RECORDED
        raise Refused(f"the interrupt at stage {target} of thread {thread} already consumed a value")

    def _parks_at(self, db, thread: int, pc: int, recovering: bool) -> bool:
        """Whether a thread positioned at `pc` waits for a delivery there."""
        if pc == self.shape.end or not self.shape.consumes[pc]:
            return False
        if m.STUCK_CLAIM in self.faults and recovering:
            return True
        return pc not in self.store.inputs(db, thread)

    def _fail(self, thread: int, holder: str | None) -> None:
        """A node's output was refused: the thread fails, its lease released, nothing persisted."""
        with self.store.transaction() as db:
            db.execute("UPDATE threads SET status = 'failed' WHERE id = ?", (thread,))
            if holder is not None:
                db.execute("UPDATE threads SET lease = NULL WHERE id = ? AND lease = ?", (thread, holder))

    def _release(self, thread: int, holder: str | None) -> None:
        if holder is None:
            return
        with self.store.transaction() as db:
            db.execute("UPDATE threads SET lease = NULL WHERE id = ? AND lease = ?", (thread, holder))

    def _effect_key(self, thread: int, pc: int, app, value) -> str:
        """An effect's identity as its idempotency key: (lineage, node, inputs consumed)."""
        node = self.stages[pc].node
        inputs = self.shape.inputs_before(tuple(app), node)
        if self.stages[pc].kind is StageKind.GATED:
            inputs += (value,)
        with self.store.snapshot() as db:
            lineage = self._lineage(db, thread, pc)
        return f"lineage {lineage} node {node} inputs {list(inputs)}"

    def _lineage(self, db, thread: int, pc: int) -> int:
        """The root, or the nearest edit fork whose edited interrupt precedes (or is) `pc`."""
        while True:
            row = self.store.known_thread(db, thread)
            if row.parent is None:
                return thread
            if row.intent == "edit":
                edited = db.execute(
                    "SELECT pc FROM checkpoints WHERE thread = ? AND seq = ?", (thread, row.base)
                ).fetchone()[0]
                if pc >= edited:
                    return thread
            thread = row.parent

    def _recovery_position(self, row: ThreadRow, chain, own, head: CheckpointRow) -> int:
        """Where recovery continues: the head (faults may rewind it)."""
        last = own[-1] if own else None
        if last is not None and last.stage >= 0:
            if m.RERUN_STEP_ON_RECOVERY in self.faults and self.stages[last.stage].kind is StageKind.STEP:
                return last.stage
            if m.RERUN_NODE_ON_RECOVERY in self.faults:
                return last.stage
        if m.RESTART_FROM_FIRST_STAGE in self.faults:
            return chain[row.base].pc if row.parent is not None else 0
        return head.pc

    def _refire_last_effect(self, thread: int, own, op: str) -> None:
        """Fault refire-committed-effect: re-send the last committed plain effect, unkeyed."""
        for entry in reversed(own):
            if entry.stage >= 0 and self.stages[entry.stage].kind is StageKind.EFFECT:
                stage = self.stages[entry.stage]
                context = NodeContext(thread, entry.stage, stage.node, op, "recovery", None, True)
                self.workflow.run_node(entry.stage, entry.app, None, context)
                return

    def _write_through_to_parent(self, db, thread: int, app) -> None:
        """Faults fork-by-reference and warm-fork-shares-state: where the fork's base checkpoint
        state is the parent's object (not a copy), the fork's commit writes through to it."""
        row = self.store.known_thread(db, thread)
        if row.parent is None:
            return
        state_of = "SELECT state FROM checkpoints WHERE thread = ? AND seq = ?"
        state = db.execute(state_of, (thread, row.base)).fetchone()[0]
        if state == db.execute(state_of, (row.parent, row.base)).fetchone()[0]:
            self.store.overwrite_state(db, state, tuple(app))

    # -- observation ---------------------------------------------------------------------

    def describe(self) -> list[dict]:
        """Every thread as stored: chain, recorded inputs, run state, late inputs."""
        with self.store.snapshot() as db:
            threads = []
            for thread in self.store.thread_ids(db):
                row = self.store.known_thread(db, thread)
                if row.status in ("new", FAILED):
                    run = row.status
                elif row.lease is None:
                    run = "free"
                elif holder_alive(row.lease):
                    run = "live"
                else:
                    run = "dead"
                threads.append(
                    {
                        "thread": thread,
                        "chain": [(c.pc, c.app, c.stage) for c in self.store.chain(db, thread)],
                        "inputs": {
                            stage: value for stage, (value, _) in self.store.inputs(db, thread).items()
                        },
                        "run": run,
                        "late_inputs": self.store.late_inputs(db, thread),
                    }
                )
        return threads
