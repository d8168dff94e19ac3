"""`explore --recover DIR`: what a checkpoint folder may decide, and what it may not.

The folder is input from anyone. It never names the code to run: the model TARGET comes from
the command line and must be the one the folder records (as TLC's `-recover` needs the spec),
and whether deadlocks are errors, which changes what is checked, comes from the command line
(and the model) and must match too. How the run went on (its workers, symmetry, store and
stopping rule) is taken from the record, each value checked; the workers and the store are
checked again against the partition files. Limits are the run's own unless given again, and
how much of the folder may be read is the command's memory budget (or the memory free), never
the counts the manifest claims (`snapshot.load`).
"""

from __future__ import annotations

import math

import attrs

from pymc_resume.cli.errors import fail
from pymc_resume.cli.options import MAX_WORKERS
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.explore.snapshots.snapshot import shown
from pymc_resume.explore.target import absolute


@attrs.frozen
class RecordedRun:
    """The options of the run a checkpoint folder continues, each checked."""

    snapshot: snapshot.Snapshot
    workers: int
    deadlock: bool
    stop_at_first: bool
    symmetry: bool
    exact: bool
    checkpoint_every: float | None
    max_states: int | None
    max_seconds: float | None
    max_memory: int | None  # bytes


def recorded_run(folder: str, target: str | None, max_memory_mib: int | None) -> RecordedRun:
    """The checkpoint in `folder`, refused in one line unless it is a run of TARGET."""
    if target is None:
        fail(
            f"--recover: give the model TARGET too, the run's own (the folder names no code to run): "
            f"pymc-resume explore TARGET --recover {folder}"
        )
    assert target is not None  # (fail does not return)
    try:
        saved = snapshot.load(folder, max_memory_mib * 2**20 if max_memory_mib else None)
    except snapshot.SnapshotError as error:
        fail(f"--recover: {error}")
    run = saved.run
    if not isinstance(run.get("target"), str):
        fail(f"--recover: {folder} holds no `pymc-resume explore` run")
    if run["target"] != absolute(target):
        fail(f"--recover: {folder} is a checkpoint of {shown(run['target'])}, not of {absolute(target)}")
    flags = {name: _flag(run, name, folder) for name in ("deadlock", "stop_at_first")}
    workers = run.get("workers")
    if type(workers) is not int or not 1 <= workers <= MAX_WORKERS:
        fail(f"--recover: {folder}: the recorded workers {shown(workers)} is not a valid value")
    if workers != len(saved.partitions):
        fail(
            f"--recover: {folder}: its run had {workers} workers, "
            f"but it holds {len(saved.partitions)} partitions"
        )
    kept = _kept_options(run, folder)
    return RecordedRun(
        saved,
        workers,
        flags["deadlock"],
        flags["stop_at_first"],
        # (runs checkpointed before these were recorded: symmetry on, every store exact)
        symmetry=_flag(run, "symmetry", folder, missing=True),
        exact=_flag(run, "exact", folder, missing=True),
        **kept,
    )


def check_deadlock_matches(recorded: RecordedRun, deadlock_is_error: bool, folder: str) -> None:
    """Refuse a recovery that would judge deadlocks otherwise than the run it continues."""
    if deadlock_is_error != recorded.deadlock:
        given = "--deadlock" if recorded.deadlock else "--no-deadlock"
        fail(f"--recover: {folder} is a checkpoint of a run with {given}; pass it again")


def _flag(run: dict, name: str, folder: str, missing: bool | None = None) -> bool:
    value = run.get(name, missing)
    if type(value) is not bool:
        fail(f"--recover: {folder}: the recorded {name} {shown(value)} is not true or false")
    return value


def _kept_options(run: dict, folder: str) -> dict:
    """The interval and limits a checkpointed run was started with, checked (a checkpoint
    written before they were recorded has none)."""
    kept = {}
    for name, kind in (
        ("checkpoint_every", (int, float)),
        ("max_states", int),
        ("max_seconds", (int, float)),
        ("max_memory", int),
    ):
        value = run.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) or value < 0
        ):
            fail(f"--recover: {folder}: the recorded {name} {shown(value)} is not a valid value")
        kept[name] = value
    return kept
