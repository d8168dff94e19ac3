"""A user's model loaded and validated once in a child process, before the command loads it.

A model is code: importing its file or calling its factory may call `os._exit`, raise
`SystemExit` or never return. In the command's own process the first two end `explore` with
whatever code the model chose and no word, and the third hangs it before `--max-seconds`
starts counting. So the command first asks a child (`bridge.hosting.child.in_child`: its own
process group, a deadline, killed and reaped however it ends) to load and validate the model;
a model that ends that child, raises `SystemExit`, or outlives the deadline is one line, exit
2. An ordinary exception is left for the command's own load to report, as it always has (with
`--traceback`). The command then loads the model itself, `SystemExit` guarded (`guarded`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pymc_resume.bridge.hosting.child import ChildProblem, in_child
from pymc_resume.errors import BadInput
from pymc_resume.explore.target import load_model
from pymc_resume.explore.validate import validated

_T = TypeVar("_T")

VALIDATION_SECONDS = 60.0  # without --max-seconds: loading and validating a model takes less
_ENDING = ("SystemExit", "KeyboardInterrupt", "GeneratorExit")  # exceptions that end a process


def tried(target: str, deadlock: bool | None, seconds: float | None) -> None:
    """Load and validate the model TARGET names in a child, within `seconds` (default
    `VALIDATION_SECONDS`); BadInput if it ends the child, raises SystemExit or hangs."""
    deadline = VALIDATION_SECONDS if seconds is None else seconds

    def question() -> bool:
        return validated(load_model(target), deadlock).deadlock_is_error

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


def guarded(target: str, step: Callable[[], _T]) -> _T:
    """`step()` (loading or validating the model), a SystemExit it raises made a BadInput."""
    try:
        return step()
    except SystemExit as error:
        raise BadInput(f"{target}: the model raised SystemExit({error.code}) while it was loaded") from None
