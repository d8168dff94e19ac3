"""What "worse" is (`pymc_resume/report/changes.py`), and comparisons of profile documents: the
rules the issue states, each on a pair of verdicts, then whole documents."""

import copy
import json
from pathlib import Path

import pytest

from pymc_resume.errors import BadInput
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.report.changes import BETTER, CHANGED, WORSE, cell_change, change, compare
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
        ("holds", "not-applicable", WORSE),  # declared away: nothing checks it any more
        ("violated", "not-applicable", WORSE),  # an adapter change must not hide a failing id
        ("unconfirmed", "not-applicable", WORSE),
        ("violated", "holds", BETTER),
        ("violated", "unconfirmed", BETTER),
        ("skipped", "holds", BETTER),
        ("skipped", "violated", CHANGED),  # checked again, and failing: not a regression
        ("not-applicable", "holds", CHANGED),
        ("not-applicable", "violated", CHANGED),
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
    old = document_of(
        document(
            "reference.json", liveness="skipped", fork_intent="violated", prefix_continuation="not-applicable"
        ),
        "old",
    )
    new = document_of(
        document(
            "reference.json",
            checkpoint_validity="not-applicable",
            fork_determinism="skipped",
            liveness="holds",
        ),
        "new",
    )
    kinds = [(c.kind, c.clause) for c in compare(old, new).changes]
    assert kinds == [
        (WORSE, "fork-determinism"),
        (WORSE, "checkpoint-validity"),
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
    data = document("reference.json")
    data["profiles"].append({**copy.deepcopy(data["profiles"][0]), "config": "postgres"})
    old = document_of(data, "old.json")
    comparison = compare(old, document_of(document("reference.json"), "new.json"))
    assert comparison.changes == () and comparison.compared == (("reference", "sqlite"),)
    assert comparison.not_compared == ("reference postgres: in old.json only (not run)",)


def test_documents_that_share_no_configuration_compare_nothing_and_are_refused():
    """Nothing compared is no pass: a gate that compares nothing must not exit 0."""
    old = document_of(document("reference.json"), "old.json")
    with pytest.raises(BadInput, match="old.json and new.json share no configuration"):
        compare(old, document_of({"profiles": [], "skipped": []}, "new.json"))
    with pytest.raises(BadInput, match="share no configuration"):
        compare(old, document_of(document("langgraph-sqlite-sync.json"), "new.json"))


def failing(cell: dict, reason: str, variants: list[str]) -> dict:
    return {**cell, "verdict": "violated", "reason": reason, "variants": variants}


def test_a_new_failure_inside_a_violated_cell_is_worse_and_another_reason_is_changed():
    cell = document("reference.json")["profiles"][0]["clauses"]["fork-intent"]
    was = failing(cell, "edit fork t1 consumed v1 (the repro reproduced in 3 of 3 replays)", ["fork: a"])
    # The replay counts of a race vary from run to run: the same failure.
    same = failing(
        cell, "edit fork t1 consumed v1 (the repro reproduced in 1 of 3 replays; a race)", ["fork: a"]
    )
    assert cell_change(was, same) is None
    assert cell_change(was, failing(cell, was["reason"], ["fork: a", "fork: b"])) == (
        WORSE,
        "now also failing under fork: b",
    )
    kind, detail = cell_change(was, failing(cell, "edit fork t2 consumed v2", ["fork: a"]))
    assert kind == CHANGED and detail == "failing another way (was: edit fork t1 consumed v1)"
    assert cell_change(was, {**was, "verdict": "holds"}) == (BETTER, "")


def test_runs_with_other_settings_are_compared_with_a_warning():
    old = document("reference.json")
    new = document("reference.json")
    old |= {"pymc_resume_version": "0.1.0", "budget": {"examples": 0, "steps": 12, "shrink": True}}
    new |= {"pymc_resume_version": "0.2.0", "budget": {"examples": 0, "steps": 6, "shrink": True}, "seed": 7}
    new["bounds"] = {**old["bounds"], "values": 3}
    new["profiles"][0]["version"] = "0.2.0"
    comparison = compare(document_of(old, "old.json"), document_of(new, "new.json"))
    assert comparison.changes == ()
    assert comparison.warnings == (
        "bounds differs: values=2 in old.json, values=3 in new.json",
        "seed differs: 0 in old.json, 7 in new.json",
        "pymc-resume version differs: 0.1.0 in old.json, 0.2.0 in new.json",
        "steps differs: 12 in old.json, 6 in new.json",
        "reference sqlite: framework version 0.1.0 -> 0.2.0",
    )
    assert comparison.as_json()["warnings"] == list(comparison.warnings)
    del old["budget"]
    comparison = compare(document_of(old, "old.json"), document_of(new, "new.json"))
    assert "not recorded in old.json, so not compared: steps, shrink" in comparison.warnings


def test_two_profiles_of_one_configuration_in_a_document_cannot_be_compared():
    data = document("reference.json")
    data["profiles"].append(copy.deepcopy(data["profiles"][0]))
    with pytest.raises(BadInput, match="two profiles of reference sqlite"):
        compare(document_of(data, "twice.json"), document_of(document("reference.json"), "new"))


def test_a_configuration_run_with_other_adapter_options_is_compared_with_a_warning():
    old, new = document("reference.json"), document("reference.json")
    new["profiles"][0]["adapter_options"] = {"fault": "no-claim"}
    comparison = compare(document_of(old, "old.json"), document_of(new, "new.json"))
    assert comparison.warnings == ("reference sqlite: adapter options fault=None -> fault=no-claim",)
