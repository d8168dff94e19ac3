"""The model's own traceback, for `pymc-resume explore --traceback`.

An exception raised in the model's code is reported in one line (`partition.model_raised`: the
function, the state, the last action); the traceback it came with is kept as text beside that
line, so that `--traceback` can print it whichever process raised it. In one process the line's
`ModelError` is chained to the model's exception and the text is formatted when asked for; a
worker process formats it where the exception happened and sends it with the line
(`workers._serve`), and the coordinator's `ModelError` carries it (`ModelError.model_traceback`).

The explorer's own frames above the model's are left out (the search loop that called the
model is the same for every model); when every frame is the explorer's (a fault found in what
the model gave rather than raised by it), the whole traceback is kept.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from pymc_resume.errors import PymcResumeError

_OURS = str(Path(__file__).resolve().parents[1])  # the pymc_resume package


def _ours(filename: str) -> bool:
    try:
        return str(Path(filename).resolve()).startswith(_OURS + "/")
    except (OSError, ValueError):
        return False


def formatted(error: BaseException) -> str:
    """`error`'s traceback as Python prints it, from the first frame outside pymc_resume."""
    summary = traceback.TracebackException.from_exception(error)
    frames = list(summary.stack)
    first = next((i for i, frame in enumerate(frames) if not _ours(frame.filename)), None)
    if first:
        summary.stack = traceback.StackSummary.from_list(frames[first:])
    return "".join(summary.format())


def model_traceback(error: BaseException) -> str | None:
    """The traceback of the model's exception behind `error`: the text a worker sent, else the
    chained exception's (a `ModelError` is raised `from` the model's), else `error`'s own (an
    exception that escaped the search unwrapped); None when there is none."""
    sent = getattr(error, "model_traceback", None)
    if isinstance(sent, str):
        return sent
    cause = error.__cause__ if isinstance(error, PymcResumeError) else error
    if cause is None or cause.__traceback__ is None:
        return None
    return formatted(cause)
