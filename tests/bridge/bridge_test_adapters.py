"""Adapters that misbehave, for the bridge's bad-input tests (loaded as module:Class)."""

import os
import signal
import time
from pathlib import Path

from pymc_resume.bridge.adapters.reference import ReferenceAdapter


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
        views = [view.__class__(view.chain, "free" if view.run == "dead" else view.run)
                 for view in observation.threads]
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
