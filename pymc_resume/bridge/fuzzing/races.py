"""Which failing steps can race: their replays may differ, so their repros allow more replays
(`fuzz.replays_allowed`) and a finding that cannot race is preferred (`Recorder.shortest`)."""

from __future__ import annotations


def may_race(steps: list[dict]) -> bool:
    """Whether replays of `steps` can differ: a SIGKILL races the framework's background
    threads (LangGraph writes a delivered resume value from one), and processes run together
    race each other wherever no window holds them, unless they are released one at a time in
    a recorded order."""
    return any(
        step.get("crash") or (step["action"] == "resume-together" and not step.get("order")) for step in steps
    )
