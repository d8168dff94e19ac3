"""`pymc-resume check`: explore the reference semantics (or a mutant) and judge every clause."""

from __future__ import annotations

import math
import resource
from collections.abc import Callable

import attrs

from pymc_resume.explore import ExplorationResult, explore
from pymc_resume.explore.engines.simulate import SimulationResult, simulate
from pymc_resume.explore.search import SnapshotSchedule
from pymc_resume.explore.snapshots.snapshot import Snapshot, SnapshotError, shown
from pymc_resume.explore.store.memory import peak_bytes
from pymc_resume.model.bounds import Bounds, BoundsError, bounds_from_mapping
from pymc_resume.model.clauses import CHECKS
from pymc_resume.model.contract import CLAUSE_IDS, HOLDS, SKIPPED, VIOLATED
from pymc_resume.model.mutants import MUTANTS
from pymc_resume.model.narrate import split_action, store_changes
from pymc_resume.model.semantics import ResumeModel


@attrs.frozen
class Verdict:
    verdict: str
    reason: str | None = None
    trace: tuple[dict, ...] | None = None

    def as_json(self) -> dict:
        trace = list(self.trace) if self.trace is not None else None
        return {"verdict": self.verdict, "reason": self.reason, "trace": trace, "repro": None}


@attrs.frozen
class CheckReport:
    bounds: Bounds
    mutant: str | None
    symmetry: bool
    workers: int
    result: ExplorationResult | SimulationResult
    verdicts: dict[str, Verdict]
    # What ran the partitions (`explore.search.ENGINES`); None for a simulation (one process).
    engine: str | None = "multiprocess"

    @property
    def violated(self) -> list[str]:
        return [cid for cid, v in self.verdicts.items() if v.verdict == VIOLATED]

    def as_json(self) -> dict:
        r = self.result
        return {
            "bounds": self.bounds.as_json(),
            "mutant": self.mutant,
            "symmetry": self.symmetry,
            "workers": self.workers,
            "engine": self.engine,
            **r.counts_json(),
            "peak_rss_mib": peak_rss_mib(r),
            "clauses": {cid: verdict.as_json() for cid, verdict in self.verdicts.items()},
        }


def peak_rss_mib(result: ExplorationResult) -> dict:
    """Peak resident memory: this process's, each worker's (as they reported it), and their sum
    (an upper bound of the run's peak: the processes need not peak at the same moment)."""
    mib = 1024 * 1024
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a run started from a large
    # process (a test runner) would report that process's peak as its own.
    coordinator = (peak_bytes() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024) / 2**20
    workers = [round(rss / mib, 1) for rss in result.worker_peak_rss]
    return {
        "coordinator": round(coordinator, 1),
        "workers": workers,
        "total": round(coordinator + sum(workers), 1),
    }


def trace_table(model: ResumeModel, steps) -> tuple[dict, ...]:
    """A violation's trace as rows: step number, actor, action, what changed."""
    rows = []
    before = None
    for number, step in enumerate(steps):
        actor, action = split_action(step.action)
        changes = store_changes(model.workflow, before, step.state)
        rows.append({"step": number, "actor": actor, "action": action, "changes": changes})
        before = step.state
    return tuple(rows)


def why_violated(model: ResumeModel, clause_id: str, last_state) -> str:
    """What the last state of a counterexample shows, in words."""
    check = CHECKS.get(clause_id)
    if check is None:  # liveness, a graph property
        return "no quiescent state is reachable from the last state"
    return check(model.workflow, last_state)


def judge(model: ResumeModel, result: ExplorationResult) -> dict[str, Verdict]:
    """One verdict per contract id: violated with its trace, holds, or skipped if unproved."""
    verdicts = {}
    for clause_id in CLAUSE_IDS:
        violation = result.violations.get(clause_id)
        if violation is not None:
            verdicts[clause_id] = Verdict(
                VIOLATED,
                reason=why_violated(model, clause_id, violation.trace[-1].state),
                trace=trace_table(model, violation.trace),
            )
        elif result.complete:
            verdicts[clause_id] = Verdict(HOLDS)
        else:
            graph_property = clause_id not in CHECKS  # liveness, decided on the explored graph
            verdicts[clause_id] = Verdict(SKIPPED, reason=result.unproved(graph_property))
    return verdicts


def run_description(
    bounds: Bounds,
    mutant: str | None,
    symmetry: bool,
    workers: int,
    *,
    checkpoint_every: float = 60.0,
    max_states: int | None = None,
    max_memory: int | None = None,
    exact: bool = False,
) -> dict:
    """What a checkpoint records about the run, so that `--recover` can redo exactly it: what is
    checked, and the options it runs with (a recovery keeps them unless given again)."""
    return {
        "bounds": bounds.as_json(),
        "mutant": mutant,
        "symmetry": symmetry,
        "workers": workers,
        "checkpoint_every": checkpoint_every,
        "max_states": max_states,
        "max_memory": max_memory,
        "exact": exact,
    }


@attrs.frozen
class RecoveredRun:
    """The run a checkpoint describes (see `run_description`), checked."""

    bounds: Bounds
    mutant: str | None
    symmetry: bool
    workers: int
    checkpoint_every: float
    max_states: int | None
    max_memory: int | None  # bytes
    exact: bool = True  # (a checkpoint from before fingerprints records none: its store was exact)


RUN_FIELDS = ("bounds", "mutant", "symmetry", "workers", "checkpoint_every", "max_states", "max_memory")
MAX_WORKERS = 1024  # far beyond any machine this runs on; a larger count is a damaged file


def recovered_run(run: dict, where: str) -> RecoveredRun:
    """The run recorded in a checkpoint's manifest (at `where`), every field checked: the
    folder is input, so a damaged or crafted one is a SnapshotError, one line."""

    def refuse(what: str):
        raise SnapshotError(f"{where}: the run it records {what}")

    if set(run) - {"exact"} != set(RUN_FIELDS):
        refuse("has unexpected fields (written by another version?)")
    bounds = run["bounds"]
    if not isinstance(bounds, dict) or not isinstance(bounds.get("name"), str):
        refuse("has no named bounds")
    try:
        checked = bounds_from_mapping(bounds, bounds["name"], f"{where}: bounds")
    except BoundsError as error:
        raise SnapshotError(str(error)) from None
    mutant = run["mutant"]
    if mutant is not None and mutant not in MUTANTS:
        refuse(f"names an unknown mutant {str(mutant)[:40]!r}")
    if type(run["symmetry"]) is not bool:
        refuse("has a 'symmetry' that is not true or false")
    workers = run["workers"]
    if type(workers) is not int or not 1 <= workers <= MAX_WORKERS:
        refuse(f"has {shown(workers)} workers")
    every = run["checkpoint_every"]
    if type(every) not in (int, float) or not math.isfinite(every) or every < 0:
        refuse(f"has a checkpoint interval of {shown(every)}")
    for name, low in (("max_states", 1), ("max_memory", 64 * 2**20)):
        value = run[name]
        if value is not None and (type(value) is not int or value < low):
            refuse(f"has {name} {shown(value)}")
    exact = run.get("exact", True)
    if type(exact) is not bool:
        refuse("has an 'exact' that is not true or false")
    return RecoveredRun(
        checked, mutant, run["symmetry"], workers, float(every), run["max_states"], run["max_memory"], exact
    )


def run_check(
    bounds: Bounds,
    mutant: str | None = None,
    *,
    symmetry: bool = True,
    workers: int = 1,
    max_states: int | None = None,
    max_memory: int | None = None,
    progress: Callable | None = None,
    checkpoint_dir: str | None = None,
    checkpoint_every: float = 60.0,
    from_snapshot: Snapshot | None = None,
    engine: str = "multiprocess",
    address: str | None = None,
    exact: bool = False,
) -> CheckReport:
    model = ResumeModel(bounds, mutant)
    snapshots = None
    if checkpoint_dir is not None:
        run = run_description(
            bounds,
            mutant,
            symmetry,
            workers,
            checkpoint_every=checkpoint_every,
            max_states=max_states,
            max_memory=max_memory,
            exact=exact,
        )
        snapshots = SnapshotSchedule(checkpoint_dir, checkpoint_every, run)
    result = explore(
        model,
        workers=workers,
        max_states=max_states,
        max_memory=max_memory,
        canonical=model.canonical if symmetry else None,
        progress=progress,
        snapshots=snapshots,
        from_snapshot=from_snapshot,
        engine=engine,
        address=address,
        exact=exact,
    )
    return CheckReport(bounds, mutant, symmetry, workers, result, judge(model, result), engine)


def simulate_check(
    bounds: Bounds,
    mutant: str | None = None,
    *,
    seed: int = 0,
    depth: int = 100,
    walks: int | None = None,
    max_seconds: float | None = None,
    progress: Callable | None = None,
) -> CheckReport:
    """Seeded random walks through the reference semantics (or a mutant), for bounds too large
    to enumerate: judged as `run_check` judges, except that nothing can hold (a clause without
    a violation is `skipped`, and `liveness` is not checked). One process, no symmetry
    reduction (a walk's states are real states)."""
    model = ResumeModel(bounds, mutant)
    result = simulate(model, seed=seed, depth=depth, walks=walks, max_seconds=max_seconds, progress=progress)
    return CheckReport(bounds, mutant, False, 1, result, judge(model, result), engine=None)
