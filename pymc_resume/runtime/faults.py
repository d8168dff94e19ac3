"""Fault switches of the reference runtime, named after the model's mutants.

`--fault NAME` takes a mutant name from `pymc_resume.model.mutants`; the runtime switches on
that mutant's fault switches (`Mutant.faults`), so a mutant that combines switches to mirror a
framework (such as `rerun-effects-on-restart`) is a combination here too. Every switch the
runtime implements is listed in `IMPLEMENTED`; a mutant is applicable when all of its switches
are.
"""

from __future__ import annotations

from pymc_resume.model import mutants as m

# The fault switches the executor honours (see executor.py for where each one acts).
IMPLEMENTED: frozenset[str] = frozenset(
    {
        m.NO_CLAIM,
        m.RERUN_STEP_ON_RECOVERY,
        m.REFIRE_COMMITTED_EFFECT,
        m.FORK_BY_REFERENCE,
        m.PERSIST_UNVALIDATED,
        m.RECORD_SECOND_RESUME,
        m.RECOVERY_NONDETERMINISTIC_STEP,
        m.FORK_WITHOUT_INTENT,
        m.STUCK_CLAIM,
        m.UNKEYED_EFFECTS,
        m.RERUN_NODE_ON_RECOVERY,
        m.RESTART_FROM_FIRST_STAGE,
        m.NO_MID_NODE_RECOVERY,
        m.VALIDATE_AFTER_CLAIM,
        m.PERSIST_INVALID_OUTPUT,
        m.WARM_FORK_SHARES_STATE,  # acts only in a warm client (a long-lived process)
    }
)

# Mutant name -> its fault switches, for every mutant whose switches the runtime implements.
RUNTIME_FAULTS: dict[str, frozenset[str]] = {
    name: frozenset(mutant.faults) for name, mutant in m.MUTANTS.items() if set(mutant.faults) <= IMPLEMENTED
}


def faults_for(name: str | None) -> frozenset[str]:
    """The fault switches for a `--fault` name (None or "none": the correct runtime).

    KeyError names the unknown fault.
    """
    if name is None or name == "none":
        return frozenset()
    if name not in RUNTIME_FAULTS:
        raise KeyError(name)
    return RUNTIME_FAULTS[name]
