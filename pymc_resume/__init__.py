"""pymc_resume: make the resume contract of durable workflow frameworks checkable.

The public surface, by the user it serves (everything else is implementation):

- the contract: `CLAUSES`, `CLAUSE_IDS` (docs/contract.md);
- the explorer, for anyone's model: `explore`, `Model`, `Invariant`, `AlwaysReachable`,
  `ExplorationResult`, `ModelError`;
- the reference semantics: `ResumeModel`, `Bounds`, `load_bounds`, `run_check`;
- live frameworks: `contract_test_case` (the contract in your own test suite), `run_fuzz`,
  `run_profile`;
- errors: `PymcResumeError` and its branches `BadInput`, `AdapterError`, `EnvironmentProblem`.

Names are imported on first use, so `import pymc_resume` imports no framework, no Hypothesis
and no worker machinery.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> the module that defines it
_PUBLIC = {
    "CLAUSES": "pymc_resume.model.contract",
    "CLAUSE_IDS": "pymc_resume.model.contract",
    "explore": "pymc_resume.explore",
    "Model": "pymc_resume.explore",
    "Invariant": "pymc_resume.explore",
    "AlwaysReachable": "pymc_resume.explore",
    "ExplorationResult": "pymc_resume.explore",
    "ModelError": "pymc_resume.explore",
    "ResumeModel": "pymc_resume.model.semantics",
    "Bounds": "pymc_resume.model.bounds",
    "load_bounds": "pymc_resume.model.bounds",
    "run_check": "pymc_resume.checking.check",
    "contract_test_case": "pymc_resume.bridge",
    "run_fuzz": "pymc_resume.bridge.fuzzing.fuzz",
    "run_profile": "pymc_resume.bridge.profile",
    "PymcResumeError": "pymc_resume.errors",
    "BadInput": "pymc_resume.errors",
    "AdapterError": "pymc_resume.errors",
    "EnvironmentProblem": "pymc_resume.errors",
}

__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pymc_resume' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
