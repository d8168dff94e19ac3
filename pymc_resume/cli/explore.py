"""`pymc-resume explore`: check your own model exhaustively, as `check` checks the reference."""

from __future__ import annotations

import os
import sys

import click

from pymc_resume.checking.explore_check import run_explore, simulate_explore
from pymc_resume.cli import main
from pymc_resume.cli.errors import fail
from pymc_resume.cli.explore_report import explore_text
from pymc_resume.cli.options import (
    MAX_WORKERS,
    Seconds,
    engine_flags,
    refuse_for_simulation,
    refuse_lone_address,
    simulation_flags,
    snapshot_flags,
)
from pymc_resume.cli.paths import writable_file, writable_folder
from pymc_resume.errors import BadInput, PymcResumeError
from pymc_resume.explore import snapshot
from pymc_resume.explore.progress import ProgressPrinter, WalkPrinter
from pymc_resume.explore.raised import model_traceback
from pymc_resume.explore.simulate import DEFAULT_DEPTH
from pymc_resume.explore.target import absolute, load_model
from pymc_resume.files import write_json


@main.command("explore")
@click.argument("target", required=False)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_WORKERS),
    default=None,
    help="Worker processes, each owning a hash partition  [default: 1].",
)
@click.option("--max-seconds", type=Seconds(low=0.001), default=None, help="Stop after this many seconds.")
@click.option(
    "--stop-at-first",
    is_flag=True,
    help="Stop at the first violation (TLC's default; without it, as TLC's -continue).",
)
@click.option(
    "--deadlock/--no-deadlock",
    default=None,
    help="Report states without successors  [default: the model's deadlock_is_error, else yes, as TLC].",
)
@click.option(
    "--no-symmetry",
    is_flag=True,
    help="Do not reduce states by the model's canonical() (reports the unreduced counts).",
)
@snapshot_flags("target, workers, symmetry and deadlock checking")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the result as JSON to this path (atomically).",
)
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option(
    "--traceback",
    "show_traceback",
    is_flag=True,
    help="When the model raises, print its own traceback on stderr before the one-line error.",
)
@engine_flags
@simulation_flags
def explore_command(
    target,
    workers,
    max_states,
    max_seconds,
    max_memory,
    stop_at_first,
    deadlock,
    no_symmetry,
    checkpoint_dir,
    checkpoint_every,
    recover_dir,
    json_path,
    quiet,
    show_traceback,
    engine,
    address,
    simulate,
    seed,
    depth,
    walks,
):
    """Explore every state of the model TARGET (module:factory or path/to/file.py:factory,
    a callable returning the model) and judge its invariants, reachability properties and
    deadlocks. Exit 0 when every property holds, 1 when any is violated, 2 on bad input or
    when a limit stopped the run before it proved anything. With --simulate, random walks
    instead: exit 1 when a walk violates a property, else 0 (which proves nothing)."""
    writable_file(json_path, "--json")
    refuse_for_simulation(
        simulate,
        {"--seed": seed, "--depth": depth, "--walks": walks},
        {
            "--workers": workers,
            "--no-symmetry": no_symmetry,
            "--max-states": max_states,
            "--max-memory": max_memory,
            "--checkpoint-dir": checkpoint_dir,
            "--checkpoint-every": checkpoint_every,
            "--recover": recover_dir,
            "--engine ray": engine == "ray" or None,
        },
    )
    refuse_lone_address(engine, address)
    writable_folder(checkpoint_dir, "--checkpoint-dir")
    from_snapshot = None
    if recover_dir is not None:
        if workers or deadlock is not None or stop_at_first or checkpoint_dir or no_symmetry:
            fail(
                "--recover: the run's workers, symmetry, deadlock checking, --stop-at-first and "
                "checkpoint folder come from the checkpoint; do not pass them again"
            )
        writable_folder(recover_dir, "--recover")
        try:
            from_snapshot = snapshot.load(recover_dir)
        except snapshot.SnapshotError as error:
            fail(f"--recover: {error}")
        run = from_snapshot.run
        if not isinstance(run, dict) or "target" not in run:
            fail(f"--recover: {recover_dir} holds no `pymc-resume explore` run")
        if target is not None and absolute(target) != run["target"]:
            fail(f"--recover: the checkpoint is of {run['target']}, not {absolute(target)}")
        target, workers = run["target"], run["workers"]
        deadlock, stop_at_first = run["deadlock"], run["stop_at_first"]
        no_symmetry = run.get("symmetry") is False  # (runs checkpointed before it was recorded: on)
        checkpoint_dir = recover_dir
        # The run's own interval and limits, unless given again (max_memory is kept in bytes).
        kept = _kept_options(run, recover_dir)
        checkpoint_every = kept["checkpoint_every"] if checkpoint_every is None else checkpoint_every
        max_states = kept["max_states"] if max_states is None else max_states
        max_seconds = kept["max_seconds"] if max_seconds is None else max_seconds
        if max_memory is None and kept["max_memory"] is not None:
            max_memory = kept["max_memory"] // 2**20
    elif target is None:
        fail("missing TARGET (module:factory or path/to/file.py:factory)")
    if checkpoint_every is None:
        checkpoint_every = 60.0
    target = absolute(target)
    model = load_model(target)
    try:
        if simulate:
            report = simulate_explore(
                target,
                model,
                seed=seed or 0,
                depth=depth or DEFAULT_DEPTH,
                walks=walks,
                max_seconds=max_seconds,
                stop_at_first=stop_at_first,
                check_deadlock=deadlock,
                progress=None if quiet else WalkPrinter(),
            )
        else:
            report = _explore(
                target,
                model,
                workers,
                max_states,
                max_seconds,
                max_memory,
                stop_at_first,
                deadlock,
                quiet,
                checkpoint_dir,
                checkpoint_every,
                from_snapshot,
                engine,
                address,
                not no_symmetry,
            )
    except PymcResumeError as error:
        if show_traceback:
            _print_traceback(error)
        raise
    except Exception as error:
        if os.environ.get("PYMC_RESUME_DEBUG") == "1":
            raise
        if show_traceback:
            _print_traceback(error)
        raise BadInput(
            f"{target}: the model raised {type(error).__name__}: {error} while "
            "being explored (--traceback shows where)"
        ) from None
    click.echo(explore_text(report))
    if json_path:
        write_json(json_path, report.as_json())
    if report.violated:
        sys.exit(1)
    if not report.result.complete and not simulate:
        fail(f"exploration incomplete, nothing proved: {report.result.stopped_because}")


def _explore(
    target,
    model,
    workers,
    max_states,
    max_seconds,
    max_memory,
    stop_at_first,
    deadlock,
    quiet,
    checkpoint_dir,
    checkpoint_every,
    from_snapshot,
    engine,
    address,
    symmetry,
):
    """The exhaustive run, with the command's options."""
    return run_explore(
        target,
        model,
        workers=workers or 1,
        max_states=max_states,
        max_seconds=max_seconds,
        max_memory=max_memory * 2**20 if max_memory else None,
        stop_at_first=stop_at_first,
        check_deadlock=deadlock,
        progress=None if quiet else ProgressPrinter(),
        checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every,
        from_snapshot=from_snapshot,
        engine=engine,
        address=address,
        symmetry=symmetry,
    )


def _print_traceback(error: BaseException) -> None:
    """The model's own traceback behind `error`, if there is one, on stderr."""
    text = model_traceback(error)
    if text:
        click.echo(text.rstrip("\n"), err=True)


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
        if value is not None and (isinstance(value, bool) or not isinstance(value, kind) or value < 0):
            fail(f"--recover: {folder}: the recorded {name} {value!r} is not a valid value")
        kept[name] = value
    return kept
