"""The multi-process explorer finds exactly what the in-process one finds."""

import pytest
from run_summary import summary
from two_phase import TwoPhase

from pymc_resume.explore import explore
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel


@pytest.fixture(scope="module")
def two_phase_serial():
    return summary(explore(TwoPhase(4)))


@pytest.mark.parametrize("workers", [2, 3])
def test_two_phase_counts_do_not_depend_on_workers(workers, two_phase_serial):
    assert summary(explore(TwoPhase(4), workers=workers)) == two_phase_serial


@pytest.mark.parametrize("mutant", [None, "no-claim", "stuck-claim", "rerun-step-on-recovery"])
def test_reference_counts_verdicts_and_trace_lengths_do_not_depend_on_workers(mutant, explored):
    assert summary(explored("small", mutant, workers=2)) == summary(explored("small", mutant))


def test_parallel_traces_are_real_paths(explored):
    model = ResumeModel(load_bounds("small"), "no-claim")
    trace = explored("small", "no-claim", workers=2).violations["consume-once-consumption"].trace
    for before, after in zip(trace, trace[1:]):
        assert (after.action, after.state) in list(model.successors(before.state))


def test_limits_stop_parallel_runs_cleanly():
    model = ResumeModel(load_bounds("small"))
    result = explore(model, canonical=model.canonical, workers=2, max_states=1000)
    assert not result.complete and "state limit" in result.stopped_because
    assert result.distinct_states >= 1000
