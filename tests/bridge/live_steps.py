"""Steps for the tests of the live framework adapters, and a runner that applies them to a
session: the violated clause ids, and the session to look at afterwards."""

from pymc_resume.bridge.session import Violation
from pymc_resume.model.bounds import load_bounds

DEFAULT = load_bounds("default")  # step, effect, effect-then-interrupt, gated, step
START = {"action": "start", "thread": 0, "crash": None}


def resume(value, crash=None, thread=0):
    return {"action": "resume", "thread": thread, "value": value, "crash": crash}


def crash(stage, when):
    return {"stage": stage, "when": when}


def apply_steps(session, steps, drain=True):
    """Apply steps (then the drain, unless `drain` is false); (violated clause ids, the session)."""
    try:
        for step in steps:
            session.apply(step)
        if drain:
            session.finish()
    except Violation as violation:
        return set(violation.clauses), session
    finally:
        if not session.drained:
            session.close()
    return set(), session
