"""Runs side by side, results in the tasks' order: never in the order they finished."""

from __future__ import annotations

import threading
import time

import pytest

from pymc_resume.bridge.hosting.jobs import Cancelled, check, in_order


def _sleeper(seconds: float, value, log: list | None = None):
    def task():
        time.sleep(seconds)
        if log is not None:
            log.append(value)
        return value

    return task


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_results_come_in_the_tasks_order_whatever_finishes_first(jobs):
    finished: list = []
    tasks = [
        _sleeper(0.3, "slow", finished),
        _sleeper(0.0, "quick", finished),
        _sleeper(0.1, "mid", finished),
    ]
    assert list(in_order(tasks, jobs)) == ["slow", "quick", "mid"]
    if jobs > 1:
        assert finished[0] == "quick"  # it did run beside the slow one


def test_two_jobs_take_about_half_the_time_of_one():
    tasks = [_sleeper(0.2, i) for i in range(4)]
    started = time.monotonic()
    list(in_order(tasks, 2))
    assert time.monotonic() - started < 0.7  # 0.4 on two jobs; 0.8 on one


def test_an_exception_is_raised_at_its_tasks_turn():
    def failing():
        raise ValueError("third")

    results = []
    with pytest.raises(ValueError, match="third"):
        for value in in_order([_sleeper(0.1, 1), _sleeper(0.0, 2), failing, _sleeper(0.0, 4)], 2):
            results.append(value)
    assert results == [1, 2]


def test_stopping_early_cancels_the_running_tasks_and_waits_for_them():
    cancelled = threading.Event()
    stopped, finished = [], []

    def long_task():
        for _ in range(200):  # a task checks between its steps (2 s if never cancelled)
            try:
                check(cancelled)
            except Cancelled:
                stopped.append(True)
                raise
            time.sleep(0.01)
        finished.append(True)
        return "done"

    for value in in_order([_sleeper(0.0, "first"), long_task, long_task], 2, cancelled):
        assert value == "first"
        break
    assert cancelled.is_set()
    # Every task that had started stopped, and was waited for: one, or both when the second
    # slot freed before the consumer stopped (a loaded machine's timing); none ran to its end.
    assert stopped in ([True], [True, True]) and not finished
