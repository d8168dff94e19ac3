"""Steps for the tests of the live framework adapters, and a runner that applies them to a
session: the violated clause ids, and the session to look at afterwards."""

from pymc_resume.bridge.judging.session import Violation
from pymc_resume.bridge.repro.replay import replay_repro
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


def reproduces_again(document: dict, runs: int = 3) -> bool:
    """Whether a repro reproduces: in one replay run, or, for a race's repro (it allows more
    than one replay), in one of `runs` replay runs. A race shows again at its rate, so one run
    of its allowed replays can miss it (a CI run: seen in 2 of 15 replays, missed in 10)."""
    racy = (document.get("replay_attempts") or 1) > 1
    return any(replay_repro(document).reproduces for _ in range(runs if racy else 1))
