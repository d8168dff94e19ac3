"""The reference semantics of checkpoint, interrupt, resume, crash, recovery and fork.

`ResumeModel` is a transition system for the explorer. Clients start threads, deliver resume
values (several processes may deliver at once), crash processes, recover threads, fork from a
checkpoint with a declared intent and send invalid updates, within the budget of the bounds.
A process works on one stage at a time in atomic actions (claim, execute, commit), so crashes and
races fall between any two of them.

The reference is a correct layer: a per-thread run lease, validation before claim, claim before
execute, compare-and-set commits, effects keyed by their identity, forks by copy with declared
intent, claims recovered after a crash. A mutant (see `mutants`) switches one fault on.
"""

from __future__ import annotations

from collections.abc import Iterator

from pymc_resume.explore import AlwaysReachable, Invariant
from pymc_resume.model import mutants as m
from pymc_resume.model.bounds import Bounds
from pymc_resume.model.clauses import (
    CHECKS,
    THREAD_ONLY,
    effect_exactly_once,
    effect_identity,
    is_quiescent,
)
from pymc_resume.model.codec import WorldCodec
from pymc_resume.model.contract import LIVENESS
from pymc_resume.model.state import (
    DEAD,
    EDIT,
    EXECUTED,
    FAILED,
    FREE,
    IDLE,
    IDLE_PROCESS,
    INITIAL,
    INTENT_NAMES,
    LIVE,
    LOADED,
    NEW,
    NO_VALUE,
    READY,
    REPLAY,
    ROOT,
    STARTED,
    STUCK,
    UPDATE,
    Budget,
    Checkpoint,
    Process,
    Thread,
    World,
)
from pymc_resume.model.workflow import APPROVE, DONE, INVALID, NodeKind, StageKind, value_name

Successor = tuple[str, World]


def replace_at(items: tuple, index: int, value) -> tuple:
    return items[:index] + (value,) + items[index + 1 :]


def committed_upto(thread: Thread) -> int:
    """One past the last stage the thread has committed (its ancestry's, for a fork).

    In the reference this is the head's position; a mutant that rewinds a thread (re-runs
    committed stages) can have recorded inputs, and checkpoints, past its head.
    """
    return max((entry.stage + 1 for entry in thread.chain if entry.stage >= 0), default=0)


class ResumeModel:
    """The reference semantics at given bounds, optionally with one mutant's fault."""

    deadlock_is_error = False

    def __init__(self, bounds: Bounds, mutant: str | None = None) -> None:
        if mutant is not None and mutant not in m.MUTANTS:
            raise KeyError(mutant)
        self.bounds = bounds
        self.workflow = bounds.workflow
        self.mutant = mutant
        self.faults = frozenset(m.MUTANTS[mutant].faults) if mutant is not None else frozenset()
        self.keyed = m.UNKEYED_EFFECTS not in self.faults  # effects carry their identity as key
        self.stages = self.workflow.stages
        self.end = self.workflow.end
        self.consumes = self.workflow.consumes
        # A node output that breaks the schema is refused (the thread fails) unless a fault
        # persists it.
        self.validates_output = not self.faults & {m.PERSIST_UNVALIDATED, m.PERSIST_INVALID_OUTPUT}
        self.invariants = [Invariant(clause_id, self._holds(check)) for clause_id, check in CHECKS.items()]
        self.reachability = [AlwaysReachable(LIVENESS, self._bind(is_quiescent))]
        self._thread_checks = [CHECKS[name] for name in THREAD_ONLY]
        self._threads_hold: dict[tuple, bool] = {}  # memo: threads -> the THREAD_ONLY verdict
        self._spent: dict[tuple[Budget, str], Budget] = {}  # memo of `_spend`

    def _holds(self, check):
        workflow = self.workflow
        return lambda world: check(workflow, world) is None

    def _bind(self, check):
        workflow = self.workflow
        return lambda world: check(workflow, world)

    # At most this many memoized thread tuples (about 150 bytes each) before the memo restarts.
    MEMO_LIMIT = 1 << 18

    def all_hold(self, world: World) -> bool:
        """True only if every invariant holds in `world` (the explorer's fast path; on False it
        asks each invariant). All checks but `effect-exactly-once` read only the threads, and
        a tuple of threads recurs in many worlds (at `default`, 24k tuples in 308k states), so
        their joint verdict is memoized per tuple of threads."""
        threads = world.threads
        holds = self._threads_hold.get(threads)
        if holds is None:
            if len(self._threads_hold) >= self.MEMO_LIMIT:
                self._threads_hold.clear()
            workflow = self.workflow
            holds = all(check(workflow, world) is None for check in self._thread_checks)
            self._threads_hold[threads] = holds
        return holds and effect_exactly_once(self.workflow, world) is None

    def canonical(self, world: World) -> World:
        """Processes are interchangeable: sorting them picks one state per symmetry class."""
        ordered = tuple(sorted(world.processes))
        if ordered == world.processes:
            return world  # already canonical: keep the object (and its parts' identities)
        return World(world.budget, ordered, world.threads, world.sink)

    def codec(self) -> WorldCodec:
        """The compact encoding the explorer stores states in (one per partition)."""
        return WorldCodec()

    # -- initial state -------------------------------------------------------------------

    def initial_states(self) -> Iterator[World]:
        b = self.bounds
        stages = len(self.stages)
        root = Thread(
            chain=(Checkpoint(0, self.workflow.initial_state(), INITIAL),),
            status=NEW,
            runner=FREE,
            claims=(NO_VALUE,) * stages,
            parent=-1,
            base=-1,
            intent=ROOT,
            edit_value=NO_VALUE,
            inherited=0,
            by_reference=False,
            crashed=False,
            crashed_since_fork=False,
            deliveries=(0,) * stages,
            second_records=(),
            ancestry_executed=False,
        )
        yield World(
            Budget(b.resumes, b.crashes, b.forks, b.invalid_updates),
            (IDLE_PROCESS,) * b.processes,
            (root,),
            (),
        )

    # -- successors ----------------------------------------------------------------------

    def successors(self, world: World) -> Iterator[Successor]:
        budget = world.budget
        idle = [i for i, p in enumerate(world.processes) if p.phase == IDLE]
        for i, process in enumerate(world.processes):
            phase = process.phase
            if phase == READY:
                yield self._execute(world, i, process)
            elif phase == EXECUTED:
                yield self._commit(world, i, process)
            elif phase == LOADED:
                step = self._claim(world, i, process)
                if step is not None:
                    yield step
            if phase != IDLE and budget.crashes:
                yield self._crash(world, i, process)
        for t, thread in enumerate(world.threads):
            for i in idle:
                if thread.status == NEW:
                    yield self._run(world, i, t)
                if thread.runner == DEAD:
                    yield self._recover(world, i, t)
                if thread.status == STARTED:
                    yield from self._deliveries(world, i, t)
            if thread.status == STARTED and budget.invalid_updates and thread.runner != LIVE:
                yield self._invalid_update(world, t)
            if thread.status != NEW and budget.forks:  # a failed thread's checkpoints too
                yield from self._forks(world, t)

    # -- helpers that rebuild a world ----------------------------------------------------

    def _spend(self, budget: Budget, what: str) -> Budget:
        """`budget` with one `what` used up. Memoized: budgets are few, and a successor whose
        budget is a shared object is cheaper to build and to encode (see `WorldCodec`)."""
        spent = self._spent.get((budget, what))
        if spent is None:
            spent = budget._replace(**{what: getattr(budget, what) - 1})
            self._spent[budget, what] = spent
        return spent

    @staticmethod
    def _with(world: World, *, process=None, thread=None, budget=None, sink=None) -> World:
        processes, threads = world.processes, world.threads
        if process is not None:
            processes = replace_at(processes, process[0], process[1])
        if thread is not None:
            threads = replace_at(threads, thread[0], thread[1])
        return World(
            budget if budget is not None else world.budget,
            processes,
            threads,
            sink if sink is not None else world.sink,
        )

    def _arrive(self, world: World, i: int, process: Process) -> World:
        """A process holding the lease is positioned at `process.pc`: go on, park or finish."""
        t = process.thread
        thread = world.threads[t]
        pc = process.pc
        if pc == self.end:
            return self._with(world, process=(i, IDLE_PROCESS), thread=(t, thread._replace(runner=FREE)))
        if self.consumes[pc]:
            claimed = thread.claims[pc]
            ignores_claim = m.STUCK_CLAIM in self.faults and process.recovering
            if claimed == NO_VALUE or ignores_claim:  # park: wait for a delivery
                return self._with(world, process=(i, IDLE_PROCESS), thread=(t, thread._replace(runner=FREE)))
            process = process._replace(value=claimed)
        return self._with(world, process=(i, process._replace(phase=READY)))

    def _fire(self, sink: tuple, identity: tuple, keyed: bool = True) -> tuple:
        """Send an effect to the sink, which dedupes applications by idempotency key."""
        applied = dict(sink)
        if keyed and identity in applied:
            return sink
        applied[identity] = applied.get(identity, 0) + 1
        return tuple(sorted(applied.items()))

    # -- process actions -----------------------------------------------------------------

    def _execute(self, world: World, i: int, p: Process) -> Successor:
        t = p.thread
        thread = world.threads[t]
        stage = self.stages[p.pc]
        node = stage.node
        if p.value == INVALID and m.VALIDATE_AFTER_CLAIM in self.faults:
            # Validation at execution, after the claim: refused, but the claim stays.
            thread = thread._replace(runner=FREE) if p.holds_lease else thread
            return (
                f"p{i} execute t{t} stage {p.pc}: refused, {value_name(p.value)} fails the "
                "schema (the claim stays)",
                self._with(world, process=(i, IDLE_PROCESS), thread=(t, thread)),
            )
        app = list(p.app)
        sink = world.sink
        if stage.kind is StageKind.STEP:
            flipped = m.RECOVERY_NONDETERMINISTIC_STEP in self.faults and p.recovering
            app[node] = output = self.workflow.step_output(p.app, node, flipped)
            if output == INVALID and self.validates_output:
                return self._fail(world, i, p)
            what = f"step node {node}"
        elif stage.kind is StageKind.EFFECT:
            if self.workflow.nodes[node] is NodeKind.EFFECT:
                app[node] = DONE
            identity = effect_identity(self.workflow, world.threads, t, p.pc, p.app)
            sink = self._fire(sink, identity, self.keyed)
            what = f"effect node {node} (fires)"
        else:
            app[node] = p.value
            what = f"interrupt node {node} with {value_name(p.value)}"
            if stage.kind is StageKind.GATED:
                if p.value == APPROVE:
                    identity = effect_identity(self.workflow, world.threads, t, p.pc, tuple(app))
                    sink = self._fire(sink, identity, self.keyed)
                    what = f"gated node {node} with {value_name(p.value)} (fires)"
                else:
                    what = f"gated node {node} with {value_name(p.value)} (does not fire)"
        if p.delivery and stage.consumes:
            deliveries = replace_at(thread.deliveries, p.pc, thread.deliveries[p.pc] + 1)
            thread = thread._replace(deliveries=deliveries)
            p = p._replace(delivery=False)
        if thread.parent >= 0 and p.pc < thread.chain[thread.base].pc:
            thread = thread._replace(ancestry_executed=True)
        p = p._replace(phase=EXECUTED, app=tuple(app))
        return (
            f"p{i} execute t{t} stage {p.pc}: {what}",
            self._with(world, process=(i, p), thread=(t, thread), sink=sink),
        )

    def _fail(self, world: World, i: int, p: Process) -> Successor:
        """A node's output broke the schema: refused before anything is persisted. The thread
        fails (its lease released, nothing more runs on it): a quiescent end, so that liveness
        holds. Its checkpoints can still be forked (an edit fork may take another input)."""
        t = p.thread
        thread = world.threads[t]._replace(status=FAILED, runner=FREE)
        return (
            f"p{i} execute t{t} stage {p.pc}: output of node {self.stages[p.pc].node} fails the "
            f"schema, refused; t{t} failed",
            self._with(world, process=(i, IDLE_PROCESS), thread=(t, thread)),
        )

    def _commit(self, world: World, i: int, p: Process) -> Successor:
        t = p.thread
        thread = world.threads[t]
        if len(thread.chain) != p.loaded:  # compare-and-set refused: the head moved
            if not p.holds_lease:
                return f"p{i} commit t{t} stage {p.pc} refused", self._with(world, process=(i, IDLE_PROCESS))
            head = thread.head
            reloaded = p._replace(pc=head.pc, loaded=len(thread.chain), app=head.app, value=NO_VALUE)
            return f"p{i} commit t{t} stage {p.pc} refused, reloads", self._arrive(world, i, reloaded)
        claims = thread.claims
        if self.consumes[p.pc] and claims[p.pc] == NO_VALUE:
            claims = replace_at(claims, p.pc, p.value)  # the commit records the consumed input
        chain = thread.chain + (Checkpoint(p.pc + 1, p.app, p.pc),)
        runner = thread.runner
        if not p.holds_lease and runner == FREE:  # an unclaimed delivery takes the lease here
            runner = LIVE
            p = p._replace(holds_lease=True)
        thread = thread._replace(chain=chain, claims=claims, runner=runner)
        world = self._with(world, thread=(t, thread))
        if thread.by_reference:
            world = self._clobber_parent(world, thread, p.app)
        moved = p._replace(pc=p.pc + 1, loaded=len(chain), value=NO_VALUE, recovering=p.recovering)
        label = f"p{i} commit t{t} stage {p.pc}"
        if not moved.holds_lease:
            return label, self._with(world, process=(i, IDLE_PROCESS))
        return label, self._arrive(world, i, moved)

    def _clobber_parent(self, world: World, fork: Thread, app: tuple) -> World:
        """Fault fork-by-reference: the parent's checkpoint and the fork share one state."""
        parent = world.threads[fork.parent]
        shared = parent.chain[fork.base]._replace(app=app)
        parent = parent._replace(chain=replace_at(parent.chain, fork.base, shared))
        return self._with(world, thread=(fork.parent, parent))

    def _claim(self, world: World, i: int, p: Process) -> Successor | None:
        t = p.thread
        thread = world.threads[t]
        j = p.pc
        if thread.claims[j] != NO_VALUE or thread.head.pc != j:
            return self._refuse_consumed(world, i, t, j, p.value, f"p{i} claim t{t} stage {j}")
        if thread.runner != FREE:
            return None  # waits for the run lease
        head = thread.head
        thread = thread._replace(claims=replace_at(thread.claims, j, p.value), runner=LIVE)
        p = p._replace(phase=READY, loaded=len(thread.chain), app=head.app, holds_lease=True)
        return (
            f"p{i} claim t{t} stage {j} with {value_name(p.value)}",
            self._with(world, process=(i, p), thread=(t, thread)),
        )

    def _refuse_consumed(self, world: World, i: int, t: int, j: int, value: int, label: str) -> Successor:
        """A delivery to an interrupt that is already consumed (or claimed)."""
        world = self._with(world, process=(i, IDLE_PROCESS))
        if m.RECORD_SECOND_RESUME not in self.faults:
            return f"{label} refused: already consumed", world
        thread = world.threads[t]
        thread = thread._replace(second_records=thread.second_records + ((j, value),))
        return f"{label}: recorded and ignored", self._with(world, thread=(t, thread))

    def _crash(self, world: World, i: int, p: Process) -> Successor:
        t = p.thread
        thread = world.threads[t]
        runner = thread.runner
        if p.holds_lease:
            mid_node = p.phase == EXECUTED and m.NO_MID_NODE_RECOVERY in self.faults
            runner = STUCK if mid_node else DEAD
        thread = thread._replace(crashed=True, crashed_since_fork=True, runner=runner)
        budget = self._spend(world.budget, "crashes")
        return (
            f"p{i} crash (was working on t{t})",
            self._with(world, process=(i, IDLE_PROCESS), thread=(t, thread), budget=budget),
        )

    # -- client actions ------------------------------------------------------------------

    def _run(self, world: World, i: int, t: int) -> Successor:
        thread = world.threads[t]._replace(status=STARTED, runner=LIVE)
        head = thread.head
        p = Process(READY, t, head.pc, len(thread.chain), head.app, NO_VALUE, True, False, False)
        return f"p{i} run t{t}", self._arrive(self._with(world, thread=(t, thread)), i, p)

    def _recover(self, world: World, i: int, t: int) -> Successor:
        thread = world.threads[t]._replace(runner=LIVE)
        head = thread.head
        sink = world.sink
        own = thread.chain[thread.base + 1 :] if thread.parent >= 0 else thread.chain
        if m.REFIRE_COMMITTED_EFFECT in self.faults:
            for entry in reversed(own):
                if entry.stage >= 0 and self.stages[entry.stage].kind is StageKind.EFFECT:
                    identity = effect_identity(self.workflow, world.threads, t, entry.stage, entry.app)
                    sink = self._fire(sink, identity, keyed=False)
                    break
        p = Process(READY, t, head.pc, len(thread.chain), head.app, NO_VALUE, True, True, False)
        world = self._with(world, thread=(t, thread), sink=sink)
        last = own[-1] if own else None
        if (
            m.RERUN_STEP_ON_RECOVERY in self.faults
            and last is not None
            and last.stage >= 0
            and self.stages[last.stage].kind is StageKind.STEP
        ):
            return f"p{i} recover t{t}", self._with(world, process=(i, p._replace(pc=last.stage)))
        if m.RERUN_NODE_ON_RECOVERY in self.faults and last is not None and last.stage >= 0:
            # Re-execute the last committed stage (with its recorded input if it consumes one).
            label = f"p{i} recover t{t} (re-runs stage {last.stage})"
            return label, self._arrive(world, i, p._replace(pc=last.stage))
        if m.RESTART_FROM_FIRST_STAGE in self.faults:
            # Restart the thread from its own first stage, with the restored (head) state.
            first = thread.chain[thread.base].pc if thread.parent >= 0 else 0
            label = f"p{i} recover t{t} (restarts from stage {first})"
            return label, self._arrive(world, i, p._replace(pc=first))
        return f"p{i} recover t{t}", self._arrive(world, i, p)

    def _deliveries(self, world: World, i: int, t: int) -> Iterator[Successor]:
        thread = world.threads[t]
        reached = [s for s in self.workflow.consuming if s <= thread.head.pc]
        if not reached:
            return
        j = reached[-1]
        budget = world.budget
        if budget.resumes:
            spent = self._spend(budget, "resumes")
            for value in range(1, self.bounds.values + 1):
                yield self._deliver(world, i, t, j, value, spent)
        if budget.invalid_updates:
            spent = self._spend(budget, "invalid_updates")
            yield self._deliver(world, i, t, j, INVALID, spent)

    def _deliver(self, world: World, i: int, t: int, j: int, value: int, budget: Budget) -> Successor:
        world = World(budget, world.processes, world.threads, world.sink)
        label = f"p{i} deliver({value_name(value)}) to t{t} stage {j}"
        validates = not self.faults & {m.PERSIST_UNVALIDATED, m.VALIDATE_AFTER_CLAIM}
        if value == INVALID and validates:
            return f"{label} refused: fails the schema", world
        thread = world.threads[t]
        if thread.claims[j] != NO_VALUE or thread.head.pc != j:
            return self._refuse_consumed(world, i, t, j, value, label)
        head = thread.head
        if m.NO_CLAIM in self.faults:
            p = Process(READY, t, j, len(thread.chain), head.app, value, False, False, True)
        else:
            p = Process(LOADED, t, j, len(thread.chain), head.app, value, False, False, True)
        return label, self._with(world, process=(i, p))

    def _invalid_update(self, world: World, t: int) -> Successor:
        budget = self._spend(world.budget, "invalid_updates")
        label = f"client update t{t} with an invalid state"
        if m.PERSIST_UNVALIDATED not in self.faults:
            return f"{label}: refused", World(budget, world.processes, world.threads, world.sink)
        thread = world.threads[t]
        head = thread.head
        app = replace_at(head.app, self.workflow.note, INVALID)
        thread = thread._replace(chain=thread.chain + (Checkpoint(head.pc, app, UPDATE),))
        return f"{label}: persisted", self._with(world, thread=(t, thread), budget=budget)

    def _forks(self, world: World, t: int) -> Iterator[Successor]:
        parent = world.threads[t]
        budget = self._spend(world.budget, "forks")
        for c in range(len(parent.chain)):  # any checkpoint, the head included
            yield self._fork(world, t, c, REPLAY, NO_VALUE, budget)
            pos = parent.chain[c].pc
            if pos < committed_upto(parent) and self.consumes[pos]:
                recorded = parent.claims[pos]
                for value in range(1, self.bounds.values + 1):
                    if value != recorded:
                        yield self._fork(world, t, c, EDIT, value, budget)

    def _shares_state(self, parent: Thread, c: int) -> bool:
        """Whether a fork from checkpoint `c` shares the parent's state instead of a copy: every
        fork under fork-by-reference; a fork from the head under warm-fork-shares-state (the
        warm client that parked the parent still holds the head's state in memory; the model
        abstracts which client forks, so every fork from the head is such a fork)."""
        if m.FORK_BY_REFERENCE in self.faults:
            return True
        return m.WARM_FORK_SHARES_STATE in self.faults and c == len(parent.chain) - 1

    def _fork(self, world: World, t: int, c: int, intent: int, value: int, budget: Budget) -> Successor:
        parent = world.threads[t]
        pos = parent.chain[c].pc
        inherited = pos if intent == EDIT else committed_upto(parent)
        claims = tuple(v if s < inherited else NO_VALUE for s, v in enumerate(parent.claims))
        if intent == EDIT:
            used = parent.claims[pos] if m.FORK_WITHOUT_INTENT in self.faults else value
            claims = replace_at(claims, pos, used)
        fork = Thread(
            chain=parent.chain[: c + 1],
            status=NEW,
            runner=FREE,
            claims=claims,
            parent=t,
            base=c,
            intent=intent,
            edit_value=value,
            inherited=inherited,
            by_reference=self._shares_state(parent, c),
            crashed=parent.crashed,
            crashed_since_fork=False,
            deliveries=(0,) * len(self.stages),
            second_records=(),
            ancestry_executed=False,
        )
        f = len(world.threads)
        detail = f", new input {value_name(value)}" if intent == EDIT else ""
        label = f"client fork t{t} at checkpoint {c} ({INTENT_NAMES[intent]}{detail}) as t{f}"
        return label, World(budget, world.processes, world.threads + (fork,), world.sink)
