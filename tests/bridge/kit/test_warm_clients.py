"""Warm clients in the adapter kit (`warm-clients`): an operation given a client id runs in that
client's long-lived process, which serves the next operation too, dies at a crash point and is
replaced; a fork made there is a thread the adapter's own process knows."""

import sys
from pathlib import Path

from pymc_resume.bridge.judging.session import Session
from pymc_resume.model.bounds import load_bounds

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
from tutorial_adapter import TutorialAdapter

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages 0..3


class WarmTutorial(TutorialAdapter):
    capabilities = TutorialAdapter.capabilities | {"warm-clients"}


def pids(session, op: str) -> set[int]:
    return {event.pid for event in session.sink.events() if event.op == op}


def test_a_warm_client_serves_operations_in_one_process_until_a_crash_ends_it():
    session = Session(WarmTutorial, SMALL.workflow, SMALL.values)
    try:
        session.apply({"action": "start", "thread": 0, "crash": None, "client": "w0"})
        session.apply({"action": "resume", "thread": 0, "value": 1, "crash": None, "client": "w0"})
        assert pids(session, "s0") == pids(session, "s1")  # one long-lived process
        session.apply(
            {
                "action": "fork",
                "thread": 0,
                "checkpoint": 2,
                "intent": "replay",
                "value": None,
                "client": "w0",
            }
        )
        assert session.steps[-1]["outcome"][0]["thread"] == 1
        crash = {"stage": 3, "when": "after-execute"}  # t1 is parked at the gated stage 3
        session.apply({"action": "start", "thread": 1, "crash": None, "client": "w0"})
        session.apply({"action": "resume", "thread": 1, "value": 2, "crash": crash, "client": "w0"})
        assert session.steps[-1]["outcome"][0]["status"] == "crashed"
        session.apply({"action": "recover", "thread": 1, "crash": None, "client": "w0"})
        assert pids(session, "s5") and pids(session, "s5") != pids(session, "s4")  # a new process
        assert pids(session, "s3") == pids(session, "s0")
        session.finish()  # the drain: every clause judged, nothing left running
    finally:
        if not session.drained:
            session.close()
