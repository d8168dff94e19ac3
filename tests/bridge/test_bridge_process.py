"""Child processes for the bridge: the barrier, real SIGKILLs, failures reported."""

import os
import time

from pymc_resume.bridge.adapter import CrashPoint
from pymc_resume.bridge.process import FAILED, KILLED, RETURNED, ControlledPoints, run_in_children


def test_barrier_releases_every_waiting_child_together():
    def task(gate):
        gate.wait()
        return time.monotonic()

    results = run_in_children([task, task, task], synchronized=True)
    assert [r.status for r in results] == [RETURNED] * 3
    times = [r.value for r in results]
    assert max(times) - min(times) < 0.5


def test_a_child_that_finishes_before_its_gate_does_not_block_the_others():
    def early(gate):
        return "refused early"

    def late(gate):
        gate.wait()
        return "released"

    results = run_in_children([early, late], synchronized=True)
    assert [r.value for r in results] == ["refused early", "released"]


def test_crash_point_is_a_real_sigkill_and_exceptions_are_reported():
    def crashing(gate):
        ControlledPoints(CrashPoint(2, "after-commit")).at("after-commit", 2)
        return "unreachable"

    def failing(gate):
        raise ValueError("bad")

    killed, failed = run_in_children([crashing, failing])
    assert killed.status == KILLED and killed.signal == 9
    assert failed.status == FAILED and "ValueError: bad" in failed.error


def test_children_are_separate_processes():
    [result] = run_in_children([lambda gate: os.getpid()])
    assert result.value != os.getpid()
