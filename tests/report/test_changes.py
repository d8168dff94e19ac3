"""What "worse" is (`pymc_resume/report/changes.py`), and comparisons of profile documents: the
rules the issue states, each on a pair of verdicts, then whole documents."""

import copy
import json
from pathlib import Path

import pytest

from pymc_resume.errors import BadInput
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.report.changes import BETTER, CHANGED, WORSE, change, compare
from pymc_resume.report.profiles import document_of

PROFILES = Path(__file__).parent / "profiles"


@pytest.mark.parametrize(
    "old, new, kind",
    [
        ("holds", "violated", WORSE),
        ("holds", "unconfirmed", WORSE),
        ("unconfirmed", "violated", WORSE),
        ("holds", "skipped", WORSE),  # newly skipped: nothing checks it any more
        ("violated", "skipped", WORSE),
        ("not-applicable", "skipped", WORSE),
        ("violated", "holds", BETTER),
        ("violated", "unconfirmed", BETTER),
        ("skipped", "holds", BETTER),
        ("skipped", "violated", CHANGED),  # checked again, and failing: not a regression
        ("holds", "not-applicable", CHANGED),
        ("not-applicable", "holds", CHANGED),
        ("holds", "holds", None),
        ("skipped", "skipped", None),
    ],
)
def test_worse_better_and_changed(old, new, kind):
    assert change(old, new) == kind


def document(name: str, **edits) -> dict:
    data = json.loads((PROFILES / name).read_text())
    for clause_id, verdict in edits.items():
        data["profiles"][0]["clauses"][clause_id.replace("_", "-")]["verdict"] = verdict
    return data


def test_a_fault_is_worse_than_the_holding_baseline_and_the_fix_is_better():
    holding = document_of(document("reference.json"), "old.json")
    faulty = document_of(document("reference-no-claim.json"), "new.json")
    worse = compare(holding, faulty)
    assert [(c.kind, c.clause, c.old, c.new) for c in worse.changes] == [
        (WORSE, "consume-once-consumption", "holds", "violated")
    ]
    assert "2 deliveries executed the interrupt" in worse.worse[0].reason
    fixed = compare(faulty, holding)
    assert fixed.worse == () and [c.clause for c in fixed.better] == ["consume-once-consumption"]
    assert compare(holding, holding).changes == ()


def test_changes_are_listed_worse_first_then_changed_then_better():
    old = document_of(document("reference.json", liveness="skipped", fork_intent="violated"), "old")
    new = document_of(
        document(
            "reference.json",
            prefix_continuation="not-applicable",
            fork_determinism="skipped",
            liveness="holds",
        ),
        "new",
    )
    kinds = [(c.kind, c.clause) for c in compare(old, new).changes]
    assert kinds == [
        (WORSE, "fork-determinism"),
        (CHANGED, "prefix-continuation"),
        (BETTER, "fork-intent"),
        (BETTER, "liveness"),
    ]


def test_a_configuration_the_new_run_skipped_is_worse_on_every_judged_id():
    old = document_of(document("reference.json"), "old")
    skipped_run = {"profiles": [], "skipped": [{"adapter": "reference", "reason": "not installed"}]}
    comparison = compare(old, document_of(skipped_run, "new"))
    assert [c.clause for c in comparison.worse] == list(CLAUSE_IDS)
    assert "not installed" in comparison.worse[0].reason


def test_a_configuration_the_new_run_did_not_run_is_not_compared():
    old = document_of(document("reference.json"), "old.json")
    comparison = compare(old, document_of({"profiles": [], "skipped": []}, "new.json"))
    assert comparison.changes == () and comparison.not_compared == (
        "reference sqlite: in old.json only (not run)",
    )


def test_two_profiles_of_one_configuration_in_a_document_cannot_be_compared():
    data = document("reference.json")
    data["profiles"].append(copy.deepcopy(data["profiles"][0]))
    with pytest.raises(BadInput, match="two profiles of reference sqlite"):
        compare(document_of(data, "twice.json"), document_of(document("reference.json"), "new"))
