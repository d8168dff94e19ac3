"""`pymc-resume explore`: check anyone's model, and judge each of its properties.

The counterpart of `check.py` for a model the user wrote through `pymc_resume.explore`: one
verdict per property (each invariant, each reachability property, and deadlock when it is
checked), each violation with its shortest trace as rows (step, action, what changed), and the
same JSON shape as `check` (`properties` in place of `clauses`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from pymc_resume.checking.check import peak_rss_mib
from pymc_resume.errors import BadInput
from pymc_resume.explore import ExplorationResult, explore
from pymc_resume.explore.engines.simulate import SimulationResult, simulate
from pymc_resume.explore.result import DEADLOCK, Step
from pymc_resume.explore.search import SnapshotSchedule
from pymc_resume.explore.traces.changes import changes
from pymc_resume.explore.traces.state_json import ModelClasses, encoded
from pymc_resume.explore.validate import ValidModel, validated
from pymc_resume.model.contract import HOLDS, SKIPPED, VIOLATED

INVARIANT, REACHABILITY, TEMPORAL = "invariant", "reachability", "temporal"


@attrs.frozen
class PropertyVerdict:
    name: str
    kind: str
    verdict: str
    reason: str | None = None
    trace: tuple[dict, ...] | None = None
    # A temporal property's lasso: the trace's rows from `cycle_start` on are the cycle, and
    # the action `loops_back` leads from its last state back to the state at `cycle_start`.
    cycle_start: int | None = None
    loops_back: str | None = None

    def as_json(self) -> dict:
        trace = list(self.trace) if self.trace is not None else None
        found = {"kind": self.kind, "verdict": self.verdict, "reason": self.reason, "trace": trace}
        if trace is not None and self.cycle_start is not None:
            found["lasso"] = {
                "prefix": trace[: self.cycle_start],
                "cycle": trace[self.cycle_start :],
                "loops_back_to_step": self.cycle_start,
                "loops_back_by": self.loops_back,
            }
        return found


@attrs.frozen
class ExploreReport:
    target: str
    workers: int
    result: ExplorationResult | SimulationResult
    verdicts: tuple[PropertyVerdict, ...]
    # What ran the partitions (`explore.search.ENGINES`); None for a simulation (one process).
    engine: str | None = "multiprocess"

    @property
    def violated(self) -> list[str]:
        return [v.name for v in self.verdicts if v.verdict == VIOLATED]

    def as_json(self) -> dict:
        r = self.result
        return {
            "target": self.target,
            "workers": self.workers,
            "engine": self.engine,
            **r.counts_json(),
            "peak_rss_mib": peak_rss_mib(r),
            "properties": {v.name: v.as_json() for v in self.verdicts},
            "coverage": coverage_json(r),
        }


def coverage_json(result) -> list[dict] | None:
    """The coverage rows (`ExplorationResult.coverage`) as JSON; None when not counted."""
    rows = getattr(result, "coverage", None)
    if rows is None:
        return None
    return [{"action": action, "taken": taken, "new_states": new} for action, taken, new in rows]


def trace_rows(
    steps: Sequence[Step], state_fields: Sequence[str] | None = None, classes: ModelClasses | None = None
) -> tuple[dict, ...]:
    """A trace as rows: step number, action, what changed, the state's repr and, given the
    model's `classes`, the state as tagged JSON data that loads back exactly (`state_json`;
    None for a state with parts JSON cannot carry)."""
    rows, before = [], None
    for number, step in enumerate(steps):
        rows.append(
            {
                "step": number,
                "action": step.action or "initial state",
                "changes": changes(before, step.state, state_fields),
                "state": repr(step.state),
            }
        )
        if classes is not None:
            rows[-1]["data"] = encoded(step.state, classes)
        before = step.state
    return tuple(rows)


def _properties(model: ValidModel) -> list[tuple[str, str]]:
    found = [(p.name, INVARIANT) for p in model.invariants]
    found += [(p.name, REACHABILITY) for p in model.reachability]
    found += [(p.name, TEMPORAL) for p in model.temporal]
    if model.deadlock_is_error:
        found.append((DEADLOCK, DEADLOCK))
    return found


def _reason(kind: str) -> str:
    return {
        INVARIANT: "false in the last state",
        REACHABILITY: "no goal state is reachable from the last state",
        DEADLOCK: "the last state has no successor",
        TEMPORAL: "a fair behaviour that violates it: a prefix, then a cycle forever",
    }[kind]


def judge(model: ValidModel, result: ExplorationResult) -> tuple[PropertyVerdict, ...]:
    """One verdict per property: violated with its trace, holds, or skipped if unproved."""
    state_fields = getattr(model.model, "state_fields", None)
    classes = ModelClasses(model.model)
    skipped: dict[str, str] = getattr(result, "skipped", {})  # (a simulation skips nothing)
    verdicts = []
    for name, kind in _properties(model):
        violation = result.violations.get(name)
        if violation is not None:
            verdicts.append(
                PropertyVerdict(
                    name,
                    kind,
                    VIOLATED,
                    _reason(kind),
                    trace_rows(violation.trace, state_fields, classes),
                    violation.cycle_start,
                    violation.loops_back,
                )
            )
        elif name in skipped:
            verdicts.append(PropertyVerdict(name, kind, SKIPPED, reason=skipped[name]))
        elif result.complete:
            verdicts.append(PropertyVerdict(name, kind, HOLDS))
        else:
            verdicts.append(
                PropertyVerdict(name, kind, SKIPPED, reason=result.unproved(kind == REACHABILITY))
            )
    return tuple(verdicts)


def run_explore(
    target: str,
    model,
    *,
    workers: int = 1,
    max_states: int | None = None,
    max_seconds: float | None = None,
    max_memory: int | None = None,
    stop_at_first: bool = False,
    check_deadlock: bool | None = None,
    progress: Callable | None = None,
    checkpoint_dir: str | None = None,
    checkpoint_every: float = 60.0,
    from_snapshot=None,
    engine: str = "multiprocess",
    address: str | None = None,
    symmetry: bool = True,
    exact: bool = False,
    coverage: bool = False,
) -> ExploreReport:
    """Explore `model` (what `target` names) and judge its properties; with `symmetry`, states
    are reduced by the model's `canonical`, if it has one (as `check` reduces processes)."""
    valid = validated(model, check_deadlock)
    snapshots = None
    if checkpoint_dir is not None:
        # What a recovery redoes: the run, and the options it keeps unless given again.
        run = {
            "target": target,
            "workers": workers,
            "deadlock": valid.deadlock_is_error,
            "stop_at_first": stop_at_first,
            "checkpoint_every": checkpoint_every,
            "max_states": max_states,
            "max_seconds": max_seconds,
            "max_memory": max_memory,
            "symmetry": symmetry,
            "exact": exact,
        }
        snapshots = SnapshotSchedule(checkpoint_dir, checkpoint_every, run)
    result = explore(
        valid,
        canonical=valid.canonical if symmetry else None,
        workers=workers,
        max_states=max_states,
        max_seconds=max_seconds,
        max_memory=max_memory,
        stop_at_first=stop_at_first,
        progress=progress,
        snapshots=snapshots,
        from_snapshot=from_snapshot,
        engine=engine,
        address=address,
        exact=exact,
        coverage=coverage,
    )
    return ExploreReport(target, workers, result, judge(valid, result), engine)


def simulate_explore(
    target: str,
    model,
    *,
    seed: int = 0,
    depth: int = 100,
    walks: int | None = None,
    max_seconds: float | None = None,
    stop_at_first: bool = False,
    check_deadlock: bool | None = None,
    progress: Callable | None = None,
) -> ExploreReport:
    """Seeded random walks through `model` (what `target` names), judged as `run_explore`
    judges, except that nothing can hold: a property without a violation is `skipped`."""
    valid = validated(model, check_deadlock)
    if valid.temporal:
        raise BadInput(
            "--simulate: the model has temporal properties, which need the whole state graph; "
            "explore it exhaustively"
        )
    result = simulate(
        valid,
        seed=seed,
        depth=depth,
        walks=walks,
        max_seconds=max_seconds,
        stop_at_first=stop_at_first,
        progress=progress,
    )
    return ExploreReport(target, 1, result, judge(valid, result), engine=None)


__all__ = ["ExploreReport", "PropertyVerdict", "run_explore", "simulate_explore"]
