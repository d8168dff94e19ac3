"""The mutant catalogue: every mutant is a named, documented fault that breaks its target.

The separation status of each mutant is written down here (EXPECTED): a separating mutant
violates exactly its target; a framework-mirroring mutant may break several clauses.
"""

import re

import pytest

from pymc_resume.checking.matrix import REFERENCE, check_row
from pymc_resume.model import mutants as m
from pymc_resume.model.bounds import load_bounds, parse_bounds
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.model.semantics import ResumeModel

# What each mutant violates at `small` (and, as checked by `pymc-resume matrix`, at `default`).
EXPECTED = {
    m.NO_CLAIM: {"consume-once-consumption"},
    m.RERUN_STEP_ON_RECOVERY: {"prefix-continuation"},
    m.REFIRE_COMMITTED_EFFECT: {"effect-exactly-once"},
    m.FORK_BY_REFERENCE: {"fork-determinism"},
    m.PERSIST_UNVALIDATED: {"checkpoint-validity"},
    m.RECORD_SECOND_RESUME: {"consume-once-value"},
    m.RECOVERY_NONDETERMINISTIC_STEP: {"recovery-determinism"},
    m.FORK_WITHOUT_INTENT: {"fork-intent"},
    m.STUCK_CLAIM: {"liveness"},
    m.UNKEYED_EFFECTS: {"effect-exactly-once"},
    m.RERUN_NODE_ON_RECOVERY: {"prefix-continuation"},
    m.RERUN_EFFECTS_ON_RESTART: {"effect-exactly-once", "prefix-continuation"},
    m.NO_MID_NODE_RECOVERY: {"liveness"},
    m.VALIDATE_AFTER_CLAIM: {"checkpoint-validity", "liveness"},
    m.CONCURRENT_RESUMES_CONSUMED: {"consume-once-consumption", "effect-exactly-once"},
    m.PERSIST_INVALID_OUTPUT: {"checkpoint-validity"},
    m.WARM_FORK_SHARES_STATE: {"fork-determinism"},
}

# `small` with an overflow node: where the mutants whose fault needs one (`Mutant.needs`) are
# checked, since `small` has none (the frameworks' battery runs at `small`, unchanged).
SMALL_OVERFLOW = parse_bounds(
    """
nodes = ["step", "effect-then-interrupt", "gated", "overflow"]
values = 2
processes = 2
resumes = 2
crashes = 1
forks = 1
invalid_updates = 1
""",
    "small-overflow",
    "tests/model/test_mutants.py",
)

# The published framework behaviours the catalogue must mirror (CONTRACT.md, "Where it comes from").
PUBLISHED = {
    m.RECORD_SECOND_RESUME: "LangGraph",  # a second resume value recorded, never read
    m.PERSIST_UNVALIDATED: "LangGraph",  # schema-invalid state persisted silently
    m.RERUN_NODE_ON_RECOVERY: "LangGraph",  # durably recorded work runs again after a crash
    m.RERUN_EFFECTS_ON_RESTART: "CrewAI",  # completed effect-bearing methods run again
    m.NO_MID_NODE_RECOVERY: "pydantic-graph",  # no resume after a crash mid-node
    m.CONCURRENT_RESUMES_CONSUMED: "concurrent",  # concurrent resumes all consumed
}


def test_the_catalogue_is_at_the_papers_scale_and_every_id_is_a_target():
    assert len(m.MUTANTS) >= 13
    assert set(EXPECTED) == set(m.MUTANTS)
    assert {mutant.target for mutant in m.MUTANTS.values()} == set(CLAUSE_IDS)


@pytest.mark.parametrize("name", list(m.MUTANTS))
def test_each_mutant_is_named_and_documented(name):
    mutant = m.MUTANTS[name]
    assert mutant.name == name and re.fullmatch(r"[a-z]+(-[a-z]+)+", name)
    assert name in vars(m).values()  # a named constant, as used by the semantics
    assert mutant.target in CLAUSE_IDS
    assert mutant.fault and "\n" not in mutant.fault and not mutant.fault.endswith(".")
    assert mutant.faults and set(mutant.faults) <= m.FAULTS
    assert mutant.mirrors is None or mutant.mirrors.strip()


def test_the_published_behaviours_are_mirrored():
    for name, framework in PUBLISHED.items():
        assert framework in m.MUTANTS[name].mirrors


def test_an_unknown_mutant_is_refused():
    with pytest.raises(KeyError):
        ResumeModel(load_bounds("small"), "no-such-mutant")


def test_the_reference_is_unchanged_by_the_catalogue(small_matrix):
    reference = small_matrix.rows[REFERENCE]
    assert reference.distinct_states == 39_413
    assert reference.violated == ()


@pytest.mark.parametrize("name", list(m.MUTANTS))
def test_each_mutant_violates_its_target_at_small(name, small_matrix):
    row = small_matrix.rows[name]
    assert row.complete
    if not m.MUTANTS[name].reachable_at(small_matrix.bounds.nodes):
        assert row.violated == () and name in small_matrix.out_of_reach()
        return
    assert m.MUTANTS[name].target in row.violated
    assert set(row.violated) == EXPECTED[name]


@pytest.mark.parametrize("name", [name for name, mutant in m.MUTANTS.items() if mutant.needs])
def test_a_mutant_out_of_reach_at_small_violates_its_target_where_it_is_reached(name):
    row = check_row(SMALL_OVERFLOW, name)
    assert row.complete and set(row.violated) == EXPECTED[name]


def test_the_reference_refuses_an_overflow_and_still_holds_everywhere():
    row = check_row(SMALL_OVERFLOW, REFERENCE)
    assert row.complete and row.violated == ()
    assert row.distinct_states == 52_609


# At `default`, the cheapest new mutant (about 10 s); the whole catalogue at `default` is
# `pymc-resume matrix --bounds default`, which takes many minutes (see docs/matrix.md).
@pytest.mark.slow
@pytest.mark.parametrize("name", [m.NO_MID_NODE_RECOVERY])
def test_new_mutants_keep_their_verdicts_at_default(name):
    row = check_row(load_bounds("default"), name)
    assert row.complete and set(row.violated) == EXPECTED[name]
