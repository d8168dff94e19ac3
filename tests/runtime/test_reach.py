"""Issue 13's reach, through the bridge: each new kind of fault is found by a short step list
that only the new steps can express, and the correct runtime passes the same steps."""

import pytest

from pymc_resume.bridge.adapters.reference import ReferenceAdapter
from pymc_resume.bridge.judging.session import Session, Violation, describe_step
from pymc_resume.model.bounds import load_bounds

FUZZ = load_bounds("fuzz")  # step, effect, effect-then-interrupt, gated, overflow

# A warm client parks t0, forks it from the head (checkpoint 3: waiting at the
# effect-then-interrupt node), and the fork's first commit writes through to t0's head.
WARM_FORK = [
    {"action": "start", "thread": 0, "crash": None, "client": "w0"},
    {"action": "fork", "thread": 0, "checkpoint": 3, "intent": "replay", "value": None, "client": "w0"},
    {"action": "start", "thread": 1, "crash": None},
    {"action": "resume", "thread": 1, "value": 1, "crash": None},
]
# Inputs v1 then v2: the overflow node's output leaves the schema although both were valid.
OVERFLOW = [
    {"action": "start", "thread": 0, "crash": None},
    {"action": "resume", "thread": 0, "value": 1, "crash": None},
    {"action": "resume", "thread": 0, "value": 2, "crash": None},
]
# Two deliveries held after loading the head, released one at a time: #1 first.
ORDERED_RACE = [
    {"action": "start", "thread": 0, "crash": None},
    {"action": "resume-together", "thread": 0, "values": [1, 2], "window": "after-load", "order": [1, 0]},
]


def violated(fault, steps):
    session = Session(ReferenceAdapter(fault), FUZZ.workflow, FUZZ.values)
    try:
        for step in steps:
            session.apply(step)
        session.finish()
    except Violation as violation:
        session.close()
        return set(violation.clauses)
    return set()


@pytest.mark.parametrize(
    ("steps", "fault", "clause"),
    [
        (WARM_FORK, "warm-fork-shares-state", "fork-determinism"),
        (OVERFLOW, "persist-invalid-output", "checkpoint-validity"),
        (ORDERED_RACE, "no-claim", "consume-once-consumption"),
    ],
)
def test_the_new_steps_reach_their_fault_and_the_reference_passes_them(steps, fault, clause):
    assert violated(None, steps) == set()
    assert violated(fault, steps) == {clause}


def test_the_warm_fault_needs_the_warm_client():
    fresh = [{k: v for k, v in step.items() if k != "client"} for step in WARM_FORK]
    assert violated("warm-fork-shares-state", fresh) == set()


def test_an_ordered_release_has_one_winner_on_every_replay():
    winners = set()
    for _ in range(3):
        session = Session(ReferenceAdapter(), FUZZ.workflow, FUZZ.values)
        for step in ORDERED_RACE:
            session.apply(step)
        winners.add(tuple(o["status"] for o in session.steps[-1]["outcome"]))
        session.close()
    assert winners == {("refused", "ok")}


def test_a_repro_line_says_who_served_a_step_and_whether_timing_decides():
    assert describe_step(WARM_FORK[1]).endswith("by warm client w0")
    assert "released one at a time: #1, #0" in describe_step(ORDERED_RACE[1])
    unordered = {**ORDERED_RACE[1], "order": None}
    assert "timing decides the order" in describe_step(unordered)
