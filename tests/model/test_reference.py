"""The reference semantics satisfies the contract (the mutants: tests/model/test_mutants.py)."""

import pytest

from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.model.semantics import ResumeModel


def test_every_contract_id_is_checked():
    model = ResumeModel(load_bounds("small"))
    names = [i.name for i in model.invariants] + [p.name for p in model.reachability]
    assert sorted(names) == sorted(CLAUSE_IDS)


def test_reference_holds_everywhere_at_small(explored):
    result = explored("small")
    assert result.complete and result.violations == {}
    assert result.distinct_states == 39_413


@pytest.mark.slow
def test_reference_holds_everywhere_at_default(default_exploration):
    result = default_exploration
    assert result.complete and result.violations == {}
    assert result.distinct_states == 434_197


def test_symmetry_reduction_changes_counts_not_verdicts(explored):
    for mutant in (None, "no-claim", "stuck-claim"):
        reduced, full = explored("small", mutant), explored("small", mutant, symmetry=False)
        assert reduced.distinct_states < full.distinct_states
        assert reduced.violations.keys() == full.violations.keys()
        for clause_id in reduced.violations:
            assert len(reduced.violations[clause_id].trace) == len(full.violations[clause_id].trace)
