"""The project's one exception hierarchy: every error a command reports is a `PymcResumeError`.

Three branches, each exit code 2 with a one-line message (the CLI prints `str(error)`):

- `BadInput`: something the user gave is wrong (a bound file, an option, a repro file, an
  adapter spec, a checkpoint folder, an output path); the message says what and where.
- `AdapterError`: an adapter failed (import, construction, open, a step, a hang); the message
  names the adapter and the step. Not a verdict about the contract.
- `EnvironmentProblem`: the machine cannot run the check (a server unreachable, a framework not
  installed, a worker process lost).

A violation of the contract is not an error: it is a verdict (exit 1). Anything else that
escapes a command is a bug in pymc_resume.
"""

from __future__ import annotations


class PymcResumeError(Exception):
    """The root of every error pymc_resume reports (one line, exit code 2)."""


class BadInput(PymcResumeError, ValueError):
    """Input the user gave cannot be used; the message says what is wrong and where."""


class AdapterError(PymcResumeError):
    """An adapter (the user's or a built-in one) failed: not a verdict about the contract."""


class EnvironmentProblem(PymcResumeError):
    """The environment cannot run the check (a service, a framework, a process is missing)."""


__all__ = ["AdapterError", "BadInput", "EnvironmentProblem", "PymcResumeError"]
