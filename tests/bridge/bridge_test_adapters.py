"""Adapters that misbehave, for the bridge's bad-input tests (loaded as module:Class)."""

import os
import signal
import time
from pathlib import Path

from pymc_resume.bridge.adapter import Observation, ThreadView
from pymc_resume.bridge.adapters.reference import ReferenceAdapter
from pymc_resume.model.state import Checkpoint
from pymc_resume.model.workflow import UNSET, NodeKind
from pymc_resume.runtime import faults_for


class HangingAdapter(ReferenceAdapter):
    """Never returns from a resume."""

    def resume(self, thread, value, crash, op):
        time.sleep(3600)


class RaisingAdapter(ReferenceAdapter):
    """Raises on a resume, as a broken adapter would."""

    def resume(self, thread, value, crash, op):
        raise RuntimeError("boom")


class BlindAdapter(ReferenceAdapter):
    """Observes only checkpoints: no recorded inputs, leases, executions or late inputs."""

    capabilities = frozenset()

    def observe(self):
        observation = super().observe()
        views = [
            view.__class__(view.chain, "free" if view.run == "dead" else view.run)
            for view in observation.threads
        ]
        return observation.__class__(tuple(views))


class NoInterruptNoForkAdapter(ReferenceAdapter):
    """A framework with neither an interrupt API nor forks: the clauses about them are
    not-applicable, and it runs the workflow without its consuming nodes."""

    unsupported = {"resume": "no interrupt API", "fork": "no way to start a run from an old checkpoint"}


class EveryOtherTimeAdapter(ReferenceAdapter):
    """Persists invalid updates (the `persist-unvalidated` fault) in every second adapter it
    builds, as a race would show a violation on some replays and not others. Adapters are
    built in their own host processes, so the count is kept in a file (`counter`, set by the
    test)."""

    counter: Path | None = None

    def __init__(self, fault=None):
        built = int(self.counter.read_text()) + 1
        self.counter.write_text(str(built))
        super().__init__(fault="persist-unvalidated" if built % 2 == 0 else None)


class HangingConstructorAdapter(ReferenceAdapter):
    """Never finishes building."""

    def __init__(self, fault=None):
        time.sleep(3600)


class HangingOpenAdapter(ReferenceAdapter):
    """Never finishes opening."""

    def open(self, setup):
        time.sleep(3600)


class AlarmBlockingAdapter(ReferenceAdapter):
    """Blocks SIGALRM (which defeats an alarm-based deadline) and hangs in a resume, in a child
    process of its own as the framework adapters run their operations."""

    def resume(self, thread, value, crash, op, **keywords):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM})
        if os.fork() == 0:
            time.sleep(3600)
            os._exit(0)
        time.sleep(3600)


class ExitingAdapter(ReferenceAdapter):
    """Raises SystemExit(0) in a resume: a failure, never a success."""

    def resume(self, thread, value, crash, op, **keywords):
        raise SystemExit(0)


class FailingOpenAdapter(ReferenceAdapter):
    """Writes into its work directory, then fails to open."""

    def open(self, setup):
        (setup.workdir / "half-open.db").write_text("x")
        raise RuntimeError("cannot open the store")


class DyingAdapter(ReferenceAdapter):
    """Its process ends in the middle of a resume (`os._exit`), as a crashing native library would."""

    def resume(self, thread, value, crash, op, **keywords):
        os._exit(3)


class LeasedAdapter(ReferenceAdapter):
    """Declares a lease option and the shortest one it allows (`shortest_lease`): the bridge
    shrinks liveness failures with it. The reference runtime's leases do not expire, so the
    option changes nothing but what the repro records."""

    shortest_lease = {"lease_seconds": 0.1}

    def __init__(self, fault=None, lease_seconds=5.0):
        super().__init__(fault)
        self.lease_seconds = lease_seconds

    def options(self):
        return {**super().options(), "lease_seconds": self.lease_seconds}


class ParentRewritingForkAdapter(ReferenceAdapter):
    """A faulty fork: after forking, it rewrites the parent's recorded input at the fork point
    (the interrupt the fork's checkpoint is parked at) to another value, as a fork that wrote
    through to its parent's record would. The parent's checkpoints are untouched, so only a
    fork-determinism check that snapshots the parent's recorded inputs sees it."""

    def open(self, setup):
        super().open(setup)
        self.values = setup.values

    def fork(self, thread, checkpoint, intent, value, client=None):
        outcome = super().fork(thread, checkpoint, intent, value, client=client)
        if outcome.status != "ok":
            return outcome
        with self.runtime.store.transaction() as db:
            position = self.runtime.store.chain(db, thread)[checkpoint].pc
            where = "WHERE thread = ? AND stage = ?"
            row = db.execute(f"SELECT value FROM inputs {where}", (thread, position)).fetchone()
            if row is not None:
                other = value if intent == "edit" else row[0] % self.values + 1
                db.execute(f"UPDATE inputs SET value = ? {where}", (other, thread, position))
        return outcome


class DeclaringAdapter(ReferenceAdapter):
    """Declares the framework calls of some operations, an unsupported one and its effect key,
    for the operation table and the effects' report."""

    framework_calls = {
        "start": "Runtime.start(thread, op)",
        "resume": "Runtime.resume(thread, value, op)",
        "fork": "Runtime.fork(thread, checkpoint, intent, value)",
    }
    unsupported = {"update": "no client call writes a thread's state"}
    effect_key = {
        "key": "Runtime.effect_key: (lineage, node, inputs consumed)",
        "why": "the runtime derives it from the effect's contract identity, the same on every re-execution",
    }


class OnceFaultyAdapter(ReferenceAdapter):
    """Persists the first schema-invalid update any of its builds receives, then refuses every
    later one, as a fault seen once that no replay shows again. Builds run in their own host
    processes, so "first" is kept in a file (`marker`)."""

    def __init__(self, fault=None, marker=""):
        super().__init__(fault)
        self.marker = Path(marker)

    def options(self):
        return {**super().options(), "marker": str(self.marker)}

    def update(self, thread, note):
        if note != -1 or self.marker.exists():
            return super().update(thread, note)
        self.marker.write_text("seen")
        correct = self.runtime.faults
        self.runtime.faults = faults_for("persist-unvalidated")
        try:
            return super().update(thread, note)
        finally:
            self.runtime.faults = correct


class RaceExitingAdapter(ReferenceAdapter):
    """Ends its process with status 0 in the race's concurrent resume: a failure, never a
    success (`race` once exited 0 with no output on it)."""

    def resume_together(self, *args, **keywords):
        os._exit(0)


class RaceAlarmBlockingAdapter(ReferenceAdapter):
    """Blocks SIGALRM and hangs in the race's concurrent resume, with a child in a session of
    its own that would outlive the command if the race ran adapter code itself."""

    def resume_together(self, *args, **keywords):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        if os.fork() == 0:
            os.setsid()
            time.sleep(3600)
            os._exit(0)
        time.sleep(3600)


class RaceConstructorExits(ReferenceAdapter):
    """Ends its process with status 0 in its constructor: `race` once built it in the command's
    own process and exited 0 printing nothing."""

    def __init__(self, **options):
        os._exit(0)


class RaceConstructorRaisesSystemExit(ReferenceAdapter):
    def __init__(self, **options):
        raise SystemExit(0)


class RaceConstructorSleeps(ReferenceAdapter):
    def __init__(self, **options):
        time.sleep(3600)


class ForkLeakingAdapter(ReferenceAdapter):
    """A parent whose later checkpoints hold its fork's values: after a fork is made from thread
    0, every checkpoint thread 0 commits afterwards shows, at each pure step's node where the
    fork's newest checkpoint holds a value, the fork's value (a client that kept the fork's state
    in memory and committed it as the parent's). The parent's checkpoints from before the fork, its recorded
    inputs and the fork itself are untouched: only the parent's future after the fork differs."""

    def open(self, setup):
        super().open(setup)
        self.nodes = setup.workflow.nodes
        self.forked_at = None  # thread 0's chain length when its first fork was made

    def fork(self, thread, checkpoint, intent, value, client=None):
        outcome = super().fork(thread, checkpoint, intent, value, client=client)
        if outcome.status == "ok" and thread == 0 and self.forked_at is None:
            self.forked_at = len(super().observe().threads[0].chain)
        return outcome

    def observe(self):
        seen = super().observe()
        if self.forked_at is None or len(seen.threads) < 2:
            return seen
        parent, fork = seen.threads[0], seen.threads[1]
        leaked = fork.chain[-1].app
        chain = list(parent.chain)
        for k in range(self.forked_at, len(chain)):
            app = list(chain[k].app)
            for node, kind in enumerate(self.nodes):  # the pure steps': what no input records
                if kind is NodeKind.STEP and leaked[node] != UNSET:
                    app[node] = leaked[node]
            chain[k] = Checkpoint(chain[k].pc, tuple(app), chain[k].stage)
        views = (ThreadView(tuple(chain), parent.run, parent.inputs, parent.late_inputs), *seen.threads[1:])
        return Observation(views)
