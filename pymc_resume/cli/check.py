"""`pymc-resume check`: the main job."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import attrs
import click

from pymc_resume.checking.check import RecoveredRun, recovered_run, run_check, simulate_check
from pymc_resume.cli import main
from pymc_resume.cli.check_report import check_text
from pymc_resume.cli.errors import fail
from pymc_resume.cli.options import (
    MAX_WORKERS,
    Seconds,
    engine_flags,
    exact_flag,
    json_option,
    quiet_flag,
    refuse_for_simulation,
    refuse_lone_address,
    simulation_flags,
    snapshot_flags,
)
from pymc_resume.cli.paths import writable_file, writable_folder
from pymc_resume.explore.engines.progress import ProgressPrinter, WalkPrinter
from pymc_resume.explore.engines.simulate import DEFAULT_DEPTH
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.explore.snapshots.snapshot import shown
from pymc_resume.files import write_json
from pymc_resume.model.bounds import Bounds, BoundsError, load_bounds
from pymc_resume.model.mutants import MUTANTS


@main.command("check")
@click.option(
    "--bounds",
    "bounds_name",
    default=None,
    help="A bundled bound name (small, default, paper) or a path to a TOML file  [default: default].",
)
@click.option("--mutant", default=None, help="Switch one fault on (see --list-mutants).")
@click.option("--list-mutants", is_flag=True, help="List the mutants and exit.")
@click.option(
    "--no-symmetry",
    is_flag=True,
    help="Do not reduce interchangeable processes (reports the unreduced counts).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_WORKERS),
    default=None,
    help="Worker processes, each owning a hash partition  [default: number of cores].",
)
@exact_flag
@snapshot_flags("symmetry, store and workers (give --bounds and --mutant as the run had them)")
@json_option()
@quiet_flag
@engine_flags
@simulation_flags
@click.option(
    "--max-seconds",
    type=Seconds(low=0.001),
    default=None,
    help="With --simulate: stop taking walks after this many seconds.",
)
def check_command(
    bounds_name,
    mutant,
    list_mutants,
    max_states,
    no_symmetry,
    exact,
    workers,
    max_memory,
    checkpoint_dir,
    checkpoint_every,
    recover_dir,
    json_path,
    quiet,
    engine,
    address,
    simulate,
    seed,
    depth,
    walks,
    max_seconds,
):
    """Explore every interleaving of the reference semantics and judge the nine contract ids
    (or, with --simulate, take random walks through it and judge what they visit)."""
    if list_mutants:
        _bounds(bounds_name, mutant)  # bounds or a mutant that cannot load are an error here too
        click.echo("\n".join(f"{m.name:32} breaks {m.target}: {m.fault}" for m in MUTANTS.values()))
        return
    writable_file(json_path, "--json")
    refuse_for_simulation(
        simulate,
        {"--seed": seed, "--depth": depth, "--walks": walks, "--max-seconds": max_seconds},
        {
            "--max-states": max_states,
            "--no-symmetry": no_symmetry,
            "--exact": exact,
            "--workers": workers,
            "--max-memory": max_memory,
            "--checkpoint-dir": checkpoint_dir,
            "--checkpoint-every": checkpoint_every,
            "--recover": recover_dir,
            "--engine ray": engine == "ray" or None,
        },
    )
    refuse_lone_address(engine, address)
    if simulate:
        _finish(_walks(bounds_name, mutant, seed, depth, walks, max_seconds, quiet), json_path)
        return
    given = Search(
        _bounds(bounds_name, mutant),
        symmetry=not no_symmetry,
        workers=workers,
        exact=exact,
        max_states=max_states,
        max_memory=max_memory * 2**20 if max_memory else None,
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
    )
    if recover_dir is not None:
        search = _recovered(recover_dir, given, mutant, no_symmetry or workers or exact)
    else:
        writable_folder(checkpoint_dir, "--checkpoint-dir")
        search = given
    report = run_check(
        search.bounds,
        mutant,
        symmetry=search.symmetry,
        workers=search.workers or os.cpu_count() or 1,
        max_states=search.max_states,
        max_memory=search.max_memory,
        progress=None if quiet else ProgressPrinter(),
        checkpoint_dir=search.checkpoint_dir,
        checkpoint_every=60.0 if search.checkpoint_every is None else search.checkpoint_every,
        from_snapshot=search.from_snapshot,
        engine=engine,
        address=address,
        exact=search.exact,
    )
    _finish(report, json_path)


def _walks(bounds_name, mutant, seed, depth, walks, max_seconds, quiet):
    """`--simulate`: random walks through the reference semantics, judged on what they visit."""
    return simulate_check(
        _bounds(bounds_name, mutant),
        mutant,
        seed=seed or 0,
        depth=depth or DEFAULT_DEPTH,
        walks=walks,
        max_seconds=max_seconds,
        progress=None if quiet else WalkPrinter(),
    )


@attrs.frozen
class Search:
    """How one exhaustive check runs: from the command line, or from the run it recovers."""

    bounds: Bounds
    symmetry: bool
    workers: int | None
    exact: bool
    max_states: int | None
    max_memory: int | None  # bytes
    checkpoint_dir: str | None
    checkpoint_every: float | None
    from_snapshot: snapshot.Snapshot | None = None


def _recovered(recover_dir: str, given: Search, mutant: str | None, search_options: object) -> Search:
    """The search `--recover` continues: the checkpointed run's symmetry, store and workers
    (never given again), its bounds and mutant as given (and refused unless they are the
    run's), its interval and limits unless given again, checkpointing into its own folder."""
    if search_options:
        fail(
            "--recover: the run's symmetry, store and workers come from the checkpoint; "
            "do not pass them again"
        )
    if given.checkpoint_dir is not None:
        fail(
            "--recover: the recovered run keeps checkpointing into its own folder; "
            + "do not pass --checkpoint-dir"
        )
    writable_folder(recover_dir, "--recover")
    from_snapshot = snapshot.load(recover_dir, given.max_memory)
    run = recovered_run(from_snapshot.run, str(Path(from_snapshot.files[0]).parent / snapshot.MANIFEST))
    _same_run(recover_dir, run, given.bounds, mutant)
    if len(from_snapshot.partitions) != run.workers:
        raise snapshot.SnapshotError(
            f"{recover_dir}: its run had {run.workers} workers, but "
            f"it holds {len(from_snapshot.partitions)} partitions"
        )
    return Search(
        given.bounds,
        symmetry=run.symmetry,
        workers=run.workers,
        exact=run.exact,
        max_states=run.max_states if given.max_states is None else given.max_states,
        max_memory=run.max_memory if given.max_memory is None else given.max_memory,
        checkpoint_dir=recover_dir,
        checkpoint_every=run.checkpoint_every if given.checkpoint_every is None else given.checkpoint_every,
        from_snapshot=from_snapshot,
    )


def _bounds(bounds_name: str | None, mutant: str | None) -> Bounds:
    """The bounds to check (one line, exit 2, for unknown ones or an unknown mutant)."""
    if mutant is not None and mutant not in MUTANTS:
        fail(f"--mutant: unknown mutant {mutant!r} (known: {', '.join(MUTANTS)})")
    try:
        return load_bounds("default" if bounds_name is None else bounds_name)
    except BoundsError as error:
        fail(f"--bounds: {error}")


def _same_run(folder: str, run: RecoveredRun, bounds: Bounds, mutant: str | None) -> None:
    """What is checked comes from the command line, never from the folder: a recovery whose
    bounds or mutant differ from the checkpointed run's is refused (an edited manifest would
    otherwise judge one run's states by another's semantics)."""
    if run.bounds.as_json() != bounds.as_json() or run.mutant != mutant:
        recorded = f"bounds {shown(run.bounds.name)}, mutant {shown(run.mutant)}"
        given = f"bounds {bounds.name!r}, mutant {mutant!r}"
        fail(
            f"--recover: {folder} is a checkpoint of {recorded}, not of {given}; "
            "pass the run's own --bounds and --mutant"
        )


def _finish(report, json_path: str | None) -> None:
    """Print the report, write its JSON, exit with its code: 1 for a violation; 2 for an
    exhaustive run a limit cut short (nothing proved); 0 otherwise (a simulation that found
    nothing proves nothing, and says so in its table, but is not an error)."""
    click.echo(check_text(report))
    if json_path:
        write_json(json_path, report.as_json())
    if report.violated:
        sys.exit(1)
    if not report.result.complete and report.result.mode != "simulate":
        fail(f"check incomplete, nothing proved: {report.result.stopped_because}")
