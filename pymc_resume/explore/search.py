"""Breadth-first exhaustive search, level by level, over one or many hash partitions.

Every violated invariant is reported with a shortest trace; reachability properties are decided
on the explored graph once the search is complete; deadlocks are reported where the model asks;
temporal properties are decided after the search, in this process (`liveness`), on the graph
without symmetry reduction (a lasso through class representatives need not be a behaviour).
Counts, verdicts and shortest-trace lengths do not depend on the number of workers.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Hashable, Iterator

import attrs

from pymc_resume.errors import BadInput, PymcResumeError
from pymc_resume.explore.engines.inprocess import InProcess
from pymc_resume.explore.engines.progress import Snapshot
from pymc_resume.explore.engines.workers import WorkerPool
from pymc_resume.explore.level.partition import MODEL_RAISED
from pymc_resume.explore.properties import liveness
from pymc_resume.explore.properties.reachability import shallowest_unable
from pymc_resume.explore.protocol import Model
from pymc_resume.explore.result import ExplorationResult, Violation
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.explore.store.limits import Limits
from pymc_resume.explore.traces.model_fault import ModelFault, located
from pymc_resume.explore.traces.trace import shortest_trace
from pymc_resume.explore.validate import ModelError, validated

ProgressCallback = Callable[..., None]


def explore(
    model: Model,
    *,
    workers: int = 1,
    max_states: int | None = None,
    max_seconds: float | None = None,
    max_memory: int | None = None,
    canonical: Callable[[Hashable], Hashable] | None = None,
    progress: ProgressCallback | None = None,
    snapshots: SnapshotSchedule | None = None,
    from_snapshot: snapshot.Snapshot | None = None,
    stop_at_first: bool = False,
    check_deadlock: bool | None = None,
    engine: str = "multiprocess",
    address: str | None = None,
    exact: bool = False,
    coverage: bool = False,
) -> ExplorationResult:
    """Enumerate every state reachable in `model` and check its properties.

    `canonical` maps a state to the representative of its symmetry class (symmetry
    reduction); traces are still made of real, unreduced states. `workers` > 1 runs that many
    processes, each owning a hash partition of the states. `checkpoint` saves the explorer's
    own state between levels; `from_snapshot` continues from such a snapshot (same model, same
    number of workers) and reaches the same counts and verdicts as an uninterrupted run.
    `stop_at_first` ends the search at the first violation (TLC without `-continue`);
    `check_deadlock` overrides the model's `deadlock_is_error`. `engine` "ray" runs the
    partitions as Ray actors (`ray_engine`; even one), on the cluster at `address` or on a
    local Ray instance. `exact` stores whole state keys instead of 64-bit fingerprints
    (`fingerprints.py`: no collision is then possible). The model is validated first
    (`validate.ModelError`, one line, for a model the search cannot run). `coverage` counts,
    per action, the successors it generated and the new states it found (one worker).
    """
    _refuse_impossible(workers, max_states, max_seconds, max_memory)
    _refuse_combinations(
        workers, engine, address, coverage, snapshots is not None or from_snapshot is not None
    )
    model = validated(model, check_deadlock)
    canonical = _with_view(model, canonical)
    if from_snapshot is not None and len(from_snapshot.partitions) != workers:
        raise snapshot.SnapshotError(
            f"the checkpoint was taken with {len(from_snapshot.partitions)} workers, not {workers}"
        )
    started = time.monotonic() - (from_snapshot.elapsed if from_snapshot else 0.0)
    limits = Limits(max_states, max_seconds, max_memory)
    with _collector_off(), _faults_reported(model, limits, recovering=from_snapshot is not None):
        level_holder = [0]  # the level running, for progress lines in the middle of a level
        backend = _backend(
            model, workers, canonical, limits, started, stop_at_first, engine, address, progress,
            level_holder, exact, coverage,
        )  # fmt: skip
        result = _explore(
            model, backend, limits, started, canonical, progress, snapshots, from_snapshot,
            level_holder, exact,
        )  # fmt: skip
        if model.temporal:  # decided in this process, after the search (`liveness`)
            # On the unreduced graph, whatever the symmetry: a temporal verdict on class
            # representatives can be wrong both ways (TLC warns; here it is never given).
            result = _decided(model, result, limits, started, exact, stop_at_first)
        return result


@contextlib.contextmanager
def _collector_off() -> Iterator[None]:
    """The cyclic garbage collector off while the search runs: states are long-lived tuples
    that never form cycles, so it only rescans them (it cost 40-60% of the time on the
    reference semantics). Workers fork with it off too."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


@contextlib.contextmanager
def _faults_reported(model, limits: Limits, recovering: bool) -> Iterator[None]:
    """An exception the model raised, located with the path to its state (`model_fault`);
    in a recovered run, an error that says the checkpoint does not fit the model."""
    try:
        yield
    except ModelError as error:
        if isinstance(error, ModelFault) or not str(error).startswith(MODEL_RAISED):
            raise
        raise located(error, model, limits)  # noqa: B904 (its cause is the model's exception)
    except PymcResumeError:
        raise
    except (LookupError, ValueError, TypeError, AttributeError, StopIteration) as error:
        if not recovering:
            raise
        raise _not_this_run(error) from None


def _refuse_combinations(workers, engine, address, coverage, snapshotting: bool) -> None:
    """Engine options and coverage where they cannot apply are refused."""
    if engine not in ENGINES:
        raise BadInput(f"engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    if address is not None and engine != "ray":
        raise BadInput("address: only with the ray engine")
    if coverage and (workers > 1 or engine == "ray"):
        raise BadInput("coverage: counted in one process; run it with one worker and no Ray")
    if coverage and snapshotting:
        raise BadInput("coverage: its counts are not kept in checkpoints; run it without them")


def _not_this_run(error: Exception) -> snapshot.SnapshotError:
    """A recovered run that failed: a checkpoint can pass every check and still not be this
    run's (keys swapped by hand), and then a level or a trace replay does not fit the model."""
    return snapshot.SnapshotError(
        f"the recovered run failed ({type(error).__name__}: {error}): the checkpoint does "
        "not fit the model (was its folder altered?)"
    )


def _decided(model, result, limits, started, exact, stop_at_first) -> ExplorationResult:
    """`result` with the temporal properties decided; an exception the model raises in the
    pass is reported with the path to the state (`model_fault`)."""
    try:
        return liveness.decide(model, result, model.view, limits, started, exact, stop_at_first)
    except PymcResumeError:
        raise
    except Exception as error:
        fault = located(error, model, limits)
        if fault is error:
            raise
        raise fault  # noqa: B904 (its cause is the model's exception)


def _with_view(model, canonical):
    """The key states are stored by: the model's view (TLC's VIEW), which no run turns off,
    else the symmetry asked for."""
    if model.view is None:
        return canonical
    if canonical is not None and canonical != model.view:
        raise BadInput("canonical: the model has a view (TLC's VIEW); a symmetry besides it is not supported")
    return model.view


def _refuse_impossible(workers, max_states, max_seconds, max_memory) -> None:
    """Options that would explore nothing and report it complete are refused."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise BadInput(f"workers: must be a whole number of at least 1, got {workers!r}")
    for name, value in (("max_states", max_states), ("max_seconds", max_seconds), ("max_memory", max_memory)):
        if value is not None and not value > 0:
            raise BadInput(f"{name}: must be positive, got {value!r}")


ENGINES = ("multiprocess", "ray")


def _backend(
    model,
    workers,
    canonical,
    limits,
    started,
    stop_at_first,
    engine,
    address,
    progress,
    level_holder,
    exact,
    coverage,
):
    """The engine that runs the partitions: in this process (one worker), worker processes,
    or Ray actors."""
    if engine == "ray":
        from pymc_resume.explore.engines.ray_engine import RayEngine  # the optional extra

        return RayEngine(
            model,
            workers,
            canonical,
            limits,
            started,
            stop_at_first=stop_at_first,
            address=address,
            exact=exact,
        )
    if workers > 1:
        return WorkerPool(
            model, workers, canonical, limits, started, stop_at_first=stop_at_first, exact=exact
        )

    def on_tick(size: int, generated: int, queue: int) -> None:
        if progress:
            progress(Snapshot(size, generated, queue, level_holder[0], time.monotonic() - started))

    return InProcess(model, canonical, limits, started, on_tick, stop_at_first, exact, coverage)


def _explore(
    model, backend, limits, started, canonical, progress, snapshots, from_snapshot, level_holder, exact
):
    with backend:
        if from_snapshot is not None:
            backend.load_state(from_snapshot)
            if not exact:
                _check_recovered_violations(model, backend, canonical, from_snapshot)
        depth, stopped_because = _run_levels(
            backend, limits, started, level_holder, progress, snapshots, from_snapshot
        )
        complete = stopped_because is None
        # property -> (gid, successor index): see `Partition.first_bad`
        first_bad = {name: (gid, position) for name, (_level, gid, position) in backend.first_bad().items()}
        if complete and model.reachability:
            found = shallowest_unable(backend, len(model.reachability))
            for prop, gid in zip(model.reachability, found):
                if gid is not None:
                    first_bad[prop.name] = (gid, -1)
        violations = {
            name: Violation(
                name, shortest_trace(model, gid, backend.parent_of, backend.id_of, canonical, then=position)
            )
            for name, (gid, position) in first_bad.items()
        }
        size, generated = backend.size(), backend.generated()
        worker_peak_rss = backend.worker_peak_rss()
        worker_load = backend.worker_load()
        collision = backend.collision_probability()
        counted = backend.coverage() if isinstance(backend, InProcess) else None  # (one worker)
        covered = None if counted is None else _coverage(model, counted, size, generated)
    seconds = time.monotonic() - started
    if progress:
        progress(Snapshot(size, generated, 0, depth, seconds), final=True)
    return ExplorationResult(
        distinct_states=size,
        states_generated=generated,
        depth=depth,
        seconds=seconds,
        complete=complete,
        violations=violations,
        stopped_because=stopped_because,
        worker_peak_rss=worker_peak_rss,
        worker_load=worker_load,
        collision_probability=collision,
        coverage=covered,
    )


def _coverage(model, counted, distinct: int, generated: int) -> tuple[tuple[str, int, int], ...]:
    """The coverage rows: the initial states (what the actions do not account for), then each
    action label taken, then each declared action never taken."""
    taken, found = counted
    rows = [("(initial states)", generated - sum(taken.values()), distinct - sum(found.values()))]
    rows += [(action, taken[action], found[action]) for action in sorted(taken)]
    rows += [
        (name, 0, 0)
        for name in model.actions
        if not any(label == name or label.startswith(name + "(") for label in taken)
    ]
    return tuple(rows)


def _check_recovered_violations(model, backend, canonical, from_snapshot: snapshot.Snapshot) -> None:
    """Every violation of an invariant a checkpoint records is one: the state it names fails
    that invariant. A fingerprint names no state, so the state is rebuilt by re-running the
    model along its trace, as the trace printed at the end will be; without this check, a
    crafted file could name any state of the right level and have its trace reported."""
    invariants = {invariant.name: invariant for invariant in model.invariants}
    count = len(from_snapshot.partitions)
    for name, (_level, gid, position) in backend.first_bad().items():
        if position != -1 or name not in invariants:
            continue  # a successor named by its parent, or a deadlock: checked when rebuilt
        trace = shortest_trace(model, gid, backend.parent_of, backend.id_of, canonical)
        if invariants[name].holds(trace[-1].state):
            where = from_snapshot.files[gid % count] if from_snapshot.files else "the checkpoint"
            raise snapshot.SnapshotError(f"{where}: first_bad[{name!r}] names a state on which {name} holds")


def _run_levels(
    backend, limits: Limits, started: float, level_holder, progress, snapshots, from_snapshot
) -> tuple[int, str | None]:
    """Step every partition one level at a time until no new state appears or a limit hits.

    Returns the depth (levels that admitted a state; initial states are level 1, as in TLC) and
    why the search stopped early, if it did.
    """
    if from_snapshot is None:
        backend.seed()
        depth = 0
    else:
        depth = from_snapshot.depth  # (loaded by `_explore`)
        if snapshots:
            snapshot.remove_stale(snapshots.directory)  # what the killed run left half-written
    taken = 0 if from_snapshot is None else 1  # snapshots so far (the recovered one counts)
    last_saved = time.monotonic()
    last_cost = 0.0  # seconds the last snapshot took
    chain = None  # this run's snapshots since the last base (a recovered run starts its own)
    while backend.pending():
        level_holder[0] = depth + 1
        added = backend.step(depth + 1)
        if added:
            depth += 1
        if backend.stopped_because:
            return depth, backend.stopped_because
        reason = limits.exceeded(backend.size(), started, backend.memory())
        if reason:
            return depth, reason
        if progress:
            progress(
                Snapshot(
                    backend.size(), backend.generated(), backend.pending(), depth, time.monotonic() - started
                )
            )
        if not added:
            break
        if snapshots and time.monotonic() - last_saved >= snapshots.wait_after(taken, last_cost):
            saving = time.monotonic()
            chain = snapshot.save(
                snapshots.directory, snapshots.run, depth, saving - started, backend.save_state, chain
            )
            taken += 1
            last_saved = time.monotonic()
            last_cost = last_saved - saving
    return depth, None


FIRST_WAIT = 1.0  # seconds between the first two snapshots of a run
# A base snapshot rewrites the whole store, so its cost grows with the run (an increment's does
# not, `snapshots.increments`): the wait after one is at least this many times what it took,
# which keeps snapshots within a tenth of the run's time.
SPACING = 9.0


@attrs.frozen
class SnapshotSchedule:
    """Save the explorer's state into `directory` between levels; `run` describes what is
    being checked, so a recovery can check it matches (and redo exactly it).

    The first snapshot follows the first level, so a run killed early has something to recover;
    then the wait between snapshots doubles from `FIRST_WAIT` up to `every` seconds, and is
    never less than `SPACING` times what the last snapshot took, so that snapshots stay at
    most about a tenth of the run at any size and any interval (a recovery then redoes at most
    that wait). `every` 0 snapshots every level, whatever it costs.
    """

    directory: str
    every: float = 60.0
    run: dict = attrs.Factory(dict)

    def wait_after(self, taken: int, last_cost: float = 0.0) -> float:
        """Seconds to wait, after the last snapshot, before the next when `taken` were taken
        and the last took `last_cost` seconds."""
        if taken == 0 or self.every == 0:
            return 0.0
        return max(min(self.every, FIRST_WAIT * 2.0 ** min(taken - 1, 30)), SPACING * last_cost)
