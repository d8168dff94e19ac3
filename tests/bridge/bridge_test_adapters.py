"""Adapters that misbehave, for the bridge's bad-input tests (loaded as module:Class)."""

import time

from pymc_resume.bridge.reference_adapter import ReferenceAdapter


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
    builds, as a race would show a violation on some replays and not others."""

    built = 0

    def __init__(self, fault=None):
        EveryOtherTimeAdapter.built += 1
        super().__init__(fault="persist-unvalidated" if EveryOtherTimeAdapter.built % 2 == 0 else None)
