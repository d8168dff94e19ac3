"""A user's model loaded and validated once in a child process, before the command loads it.

A model is code: importing its file, calling its factory, reading its properties or taking its
first states may call `os._exit`, raise `SystemExit` or never return. In the command's own
process the first two end `explore` with whatever code the model chose and no word, and the
third hangs it before `--max-seconds` starts counting. So the command first asks a child
(`bridge.hosting.child.in_child`: its own process group, a deadline, killed and reaped however
it ends) to load and validate the model and take its first states and their successors
(`FIRST_STATES` of each); a model that ends that child, raises `SystemExit`, or outlives the
deadline is one line, exit 2. An ordinary exception is left for the command's own load to
report, as it always has (with `--traceback`). The command then loads the model itself, and a
`SystemExit` the model raises there, or while it is explored, is one line too (`guarded`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from itertools import islice
from typing import TypeVar

from pymc_resume.bridge.hosting.child import ChildProblem, in_child
from pymc_resume.errors import BadInput
from pymc_resume.explore.target import load_model
from pymc_resume.explore.validate import validated

_T = TypeVar("_T")

VALIDATION_SECONDS = 60.0  # without --max-seconds: loading and validating a model takes less
FIRST_STATES = 100  # initial states (and successors of each) the trial also takes
_ENDING = ("SystemExit", "KeyboardInterrupt", "GeneratorExit")  # exceptions that end a process


def tried(target: str, deadlock: bool | None, seconds: float | None) -> None:
    """Load and validate the model TARGET names in a child, within `seconds` (default
    `VALIDATION_SECONDS`); BadInput if it ends the child, raises SystemExit or hangs."""
    deadline = VALIDATION_SECONDS if seconds is None else seconds

    def question() -> bool:
        _silenced()  # (what the model prints, it prints once: when the command loads it)
        valid = validated(load_model(target), deadlock)
        for state in islice(valid.initial_states(), FIRST_STATES):  # the search's first step
            for _ in islice(valid.successors(state), FIRST_STATES):
                pass
        return valid.deadlock_is_error

    try:
        in_child(question, deadline)
    except ChildProblem as problem:
        if problem.error_type is None:
            how = (
                f"did not load and validate within {deadline:g}s (--max-seconds gives it longer)"
                if problem.reason.startswith("did not finish")
                else "ended the process while it was loaded and validated (os._exit?)"
            )
            raise BadInput(f"{target}: the model {how}") from None
        if problem.error_type in _ENDING:
            raise BadInput(
                f"{target}: the model raised {problem.error_type}({problem.reason}) while it was "
                "loaded and validated"
            ) from None
        # Any other exception: the command's own load reports it, with --traceback if asked.


def _silenced() -> None:
    """In the trial child: standard output and error go nowhere, at the descriptors too."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    sys.stdout = sys.stderr = open(null, "w", closefd=False)  # (the child's, until it ends)


def guarded(target: str, step: Callable[[], _T], doing: str = "loaded") -> _T:
    """`step()` (loading, validating or exploring the model), a SystemExit the model raises
    there made a BadInput. (The command's own exits, `fail`'s, are never inside a step.)"""
    try:
        return step()
    except SystemExit as error:
        raise BadInput(f"{target}: the model raised SystemExit({error.code}) while it was {doing}") from None
