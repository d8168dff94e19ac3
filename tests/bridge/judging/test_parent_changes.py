"""What counts as a change a fork made to its parent (`judging.observe.parent_changes`)."""

import pytest
from live_steps import DEFAULT, START, apply_steps, resume

from pymc_resume.bridge.adapters.reference import ReferenceAdapter
from pymc_resume.bridge.judging.session import Session
from pymc_resume.model import mutants as m


def test_a_parents_own_invalid_resume_after_a_fork_is_its_own_record_not_the_forks():
    # The fault records a schema-invalid value before refusing it. The parent was parked at the
    # fork point when the fork was made; the record its own resume leaves there is
    # checkpoint-validity's fault, not a change the fork made (a DBOS profile reported it as
    # fork-determinism until the judge counted invalid values among the parent's own).
    fork = {"action": "fork", "thread": 0, "checkpoint": 3, "intent": "replay", "value": None}
    session = Session(ReferenceAdapter(m.PERSIST_UNVALIDATED), DEFAULT.workflow, DEFAULT.values)
    violated, _session = apply_steps(session, [START, fork, resume(-1)], drain=False)
    assert violated == {"checkpoint-validity"}


def test_a_parent_whose_later_checkpoints_hold_its_forks_values_violates_fork_determinism():
    """The parent's future after a fork must be what it would have been without the fork: a
    step the parent commits after an edit fork, holding the fork's output where the parent's own
    inputs give another, is fork-determinism's (no other clause sees it)."""
    from bridge_test_adapters import ForkLeakingAdapter

    from pymc_resume.bridge.judging.session import Session, Violation
    from pymc_resume.model.bounds import load_bounds

    default = load_bounds("default")  # ..., a wait, the gated interrupt, then a step fed by both
    session = Session(ForkLeakingAdapter, default.workflow, default.values)
    steps = [
        {"action": "start", "thread": 0, "crash": None},
        {"action": "resume", "thread": 0, "value": 1, "crash": None},  # parks at the gated node
        {"action": "fork", "thread": 0, "checkpoint": 3, "intent": "edit", "value": 2},  # the wait
        {"action": "start", "thread": 1, "crash": None},  # the fork parks at the gated node
        {"action": "resume", "thread": 1, "value": 1, "crash": None},  # its last step: inputs 2, 1
        {"action": "resume", "thread": 0, "value": 1, "crash": None},  # the parent's: inputs 1, 1
    ]
    with pytest.raises(Violation) as seen:
        for step in steps:
            session.apply(step)
    session.close()
    assert list(seen.value.clauses) == ["fork-determinism"], seen.value.clauses
    assert "committed after fork t1 was made" in seen.value.clauses["fork-determinism"]
    assert "a value of its fork" in seen.value.clauses["fork-determinism"]
