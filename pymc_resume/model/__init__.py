"""The reference semantics of the resume contract, as a transition system for the explorer.

- `contract`: the nine ids and their one-line definitions (docs/contract.md has the text);
- `bounds`: the bound files (`small`, `default`, `paper`, `fuzz`, or a TOML path);
- `semantics`: `ResumeModel`, the reference (and, with a mutant's name, the reference with
  one fault switched on);
- `mutants`: the catalogue of faults; `clauses`: the clauses as state predicates.

Names are imported on first use.
"""

from __future__ import annotations

import importlib

_PUBLIC = {
    "CLAUSES": "pymc_resume.model.contract",
    "CLAUSE_IDS": "pymc_resume.model.contract",
    "Bounds": "pymc_resume.model.bounds",
    "BoundsError": "pymc_resume.model.bounds",
    "load_bounds": "pymc_resume.model.bounds",
    "ResumeModel": "pymc_resume.model.semantics",
    "MUTANTS": "pymc_resume.model.mutants",
    "CHECKS": "pymc_resume.model.clauses",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pymc_resume.model' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
