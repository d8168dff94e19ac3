"""What counts as a change a fork made to its parent (`judging.observe.parent_changes`)."""

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
