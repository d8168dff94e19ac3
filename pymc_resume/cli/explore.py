"""`pymc-resume explore`: check your own model exhaustively, as `check` checks the reference."""

from __future__ import annotations

import os
import sys

import click

from pymc_resume.checking.explore_check import run_explore, simulate_explore, trace_rows
from pymc_resume.cli import main
from pymc_resume.cli.errors import fail, printable
from pymc_resume.cli.explore_recovery import check_deadlock_matches, recorded_run
from pymc_resume.cli.explore_report import explore_text, fault_text
from pymc_resume.cli.model_trial import guarded, tried
from pymc_resume.cli.options import (
    MAX_WORKERS,
    Seconds,
    engine_flags,
    exact_flag,
    refuse_for_simulation,
    refuse_lone_address,
    simulation_flags,
    snapshot_flags,
)
from pymc_resume.cli.paths import writable_file, writable_folder
from pymc_resume.errors import BadInput, PymcResumeError
from pymc_resume.explore.graph_dump import LIMIT as GRAPH_LIMIT
from pymc_resume.explore.graph_dump import dot, state_graph
from pymc_resume.explore.progress import ProgressPrinter, WalkPrinter
from pymc_resume.explore.raised import model_traceback
from pymc_resume.explore.simulate import DEFAULT_DEPTH
from pymc_resume.explore.state_json import ModelClasses
from pymc_resume.explore.target import absolute, load_model
from pymc_resume.explore.trace_replay import Replay, read_trace, replay
from pymc_resume.explore.validate import ModelFault, validated
from pymc_resume.files import write_atomically, write_json


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
@click.option(
    "--coverage",
    is_flag=True,
    help="Count, per action, the successors it generated and the new states it found (one worker).",
)
@exact_flag
@snapshot_flags(
    "workers, symmetry, store and --stop-at-first (give TARGET and deadlock checking as the run had them)"
)
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
@click.option(
    "--dump-graph",
    "graph_path",
    type=click.Path(dir_okay=False),
    default=None,
    help=f"Also write the state graph in Graphviz's DOT language to this path (atomically); "
    f"refused above {GRAPH_LIMIT:,} states.",
)
@click.option(
    "--replay-trace",
    "replay_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Instead of a search: check that a trace in this --json output is a path of the model "
    "and shows its property violated (exit 0; 1 when it does not).",
)
@click.option(
    "--property",
    "property_name",
    metavar="NAME",
    default=None,
    help="With --replay-trace: the property whose trace to replay  [default: the first with one].",
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
    exact,
    coverage,
    checkpoint_dir,
    checkpoint_every,
    recover_dir,
    json_path,
    quiet,
    show_traceback,
    graph_path,
    replay_file,
    property_name,
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
    if replay_file is not None or property_name is not None:
        _replay_command(
            target,
            replay_file,
            property_name,
            no_symmetry,
            deadlock,
            show_traceback,
            {
                "--workers": workers,
                "--max-states": max_states,
                "--max-seconds": max_seconds,
                "--max-memory": max_memory,
                "--stop-at-first": stop_at_first,
                "--checkpoint-dir": checkpoint_dir,
                "--checkpoint-every": checkpoint_every,
                "--recover": recover_dir,
                "--json": json_path,
                "--engine ray": engine == "ray" or None,
                "--simulate": simulate,
                "--seed": seed,
                "--depth": depth,
                "--walks": walks,
                "--dump-graph": graph_path,
            },
        )
        return
    writable_file(json_path, "--json")
    writable_file(graph_path, "--dump-graph")
    if graph_path is not None and (simulate or recover_dir is not None):
        fail(f"--dump-graph: not with {'--simulate' if simulate else '--recover'}")
    refuse_for_simulation(
        simulate,
        {"--seed": seed, "--depth": depth, "--walks": walks},
        {
            "--workers": workers,
            "--no-symmetry": no_symmetry,
            "--exact": exact,
            "--coverage": coverage,
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
    from_snapshot = recorded = None
    if recover_dir is not None:
        recorded = _recovered(
            recover_dir, target, workers, stop_at_first, checkpoint_dir, no_symmetry, exact, max_memory
        )
        from_snapshot, checkpoint_dir = recorded.snapshot, recover_dir
        workers, stop_at_first = recorded.workers, recorded.stop_at_first
        no_symmetry, exact = not recorded.symmetry, recorded.exact
        # The run's own interval and limits, unless given again (max_memory is kept in bytes).
        checkpoint_every = recorded.checkpoint_every if checkpoint_every is None else checkpoint_every
        max_states = recorded.max_states if max_states is None else max_states
        max_seconds = recorded.max_seconds if max_seconds is None else max_seconds
        if max_memory is None and recorded.max_memory is not None:
            max_memory = recorded.max_memory // 2**20
    elif target is None:
        fail("missing TARGET (module:factory or path/to/file.py:factory)")
    if checkpoint_every is None:
        checkpoint_every = 60.0
    target = absolute(target)
    model = _loaded(target, deadlock, max_seconds)
    try:
        if recorded is not None:
            valid = guarded(target, lambda: validated(model, deadlock))
            check_deadlock_matches(recorded, valid.deadlock_is_error, recover_dir)
        if graph_path is not None:
            _dump_graph(target, model, graph_path, deadlock, not no_symmetry)
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
                exact,
                coverage,
            )
    except PymcResumeError as error:
        if show_traceback:
            _print_traceback(error)
        _report_fault(target, model, error, json_path)
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
    exact,
    coverage,
):
    """The exhaustive run, with the command's options (a SystemExit the model raises in this
    process is its failure, one line: `model_trial.guarded`)."""
    return guarded(
        target,
        lambda: run_explore(
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
            exact=exact,
            coverage=coverage,
        ),
        "explored",
    )


def _report_fault(target: str, model, error: BaseException, json_path: str | None) -> None:
    """Where the model raised (`ModelFault`): the path to the state printed as a step table,
    and, with --json, written there with the error line (as TLC prints the behaviour)."""
    if not isinstance(error, ModelFault) or not error.trace:
        return
    rows = trace_rows(error.trace, getattr(model, "state_fields", None), ModelClasses(model))
    click.echo(fault_text(rows))
    if json_path:
        write_json(json_path, {"target": target, "error": str(error), "trace": list(rows)})


def _dump_graph(target, model, path, deadlock, symmetry) -> None:
    """The state graph as DOT, written atomically (nothing when it is refused)."""
    valid = validated(model, deadlock)
    graph = state_graph(valid, valid.view or (valid.canonical if symmetry else None))
    write_atomically(path, dot(graph, target, getattr(model, "state_fields", None)))


def _replay_command(target, replay_file, property_name, no_symmetry, deadlock, show_traceback, others):
    """`--replay-trace FILE`: replay a recorded trace against the model (no search)."""
    if replay_file is None:
        fail("--property: only with --replay-trace")
    given = [name for name, value in others.items() if value]
    if given:
        fail(f"--replay-trace: {given[0]} does not apply (a replay runs no search)")
    if target is None:
        fail("missing TARGET (module:factory or path/to/file.py:factory)")
    target = absolute(target)
    model = _loaded(target, deadlock, None)
    try:
        valid = guarded(target, lambda: validated(model, deadlock))
        outcome = replay(valid, read_trace(replay_file, valid, property_name), symmetry=not no_symmetry)
    except PymcResumeError as error:
        if show_traceback:
            _print_traceback(error)
        raise
    except Exception as error:
        if show_traceback:
            _print_traceback(error)
        raise BadInput(
            f"{target}: the model raised {type(error).__name__}: {error} while the trace was "
            "replayed (--traceback shows where)"
        ) from None
    click.echo(printable(replay_text(target, outcome)))  # (names from the trace file: escaped)
    if not (outcome.path and outcome.violated):
        sys.exit(1)


def replay_text(target: str, outcome: Replay) -> str:
    """One line: whether the trace is a path, and whether it shows its property violated."""
    trace = outcome.trace
    steps = len(trace.states) - 1
    head = f"{target}: the trace of {trace.property} ({steps} step{'s' * (steps != 1)})"
    if not outcome.path:
        action = trace.actions[outcome.step or 0] or "initial state"
        what = "a path" if trace.cycle_start is None else "a fair lasso"
        return f"{head} is not {what} of the model: step {outcome.step} ({action}): {outcome.why}"
    if trace.cycle_start is not None:
        return _lasso_replay_text(head, outcome)
    if outcome.violated:
        return f"{head} replays: a path of the model, and {trace.property} is violated in its last state"
    return f"{head} is a path of the model, but {trace.property} is not violated in its last state"


def _lasso_replay_text(head: str, outcome: Replay) -> str:
    """The line for a replayed lasso (its steps, closing step and fairness checked)."""
    trace = outcome.trace
    shape = f"a fair lasso of the model (prefix to step {trace.cycle_start}, back by {trace.loops_back})"
    if outcome.violated:
        return f"{head} replays: {shape}, and {trace.property} is violated on it"
    return f"{head} is {shape}, but {trace.property} is not violated on it"


def _print_traceback(error: BaseException) -> None:
    """The model's own traceback behind `error`, if there is one, on stderr."""
    text = model_traceback(error)
    if text:
        click.echo(text.rstrip("\n"), err=True)


def _recovered(folder, target, workers, stop_at_first, checkpoint_dir, no_symmetry, exact, max_memory):
    """`--recover FOLDER`: the checkpointed run of TARGET, checked (`explore_recovery`)."""
    if workers or stop_at_first or checkpoint_dir or no_symmetry or exact:
        fail(
            "--recover: the run's workers, symmetry, store, --stop-at-first and checkpoint folder "
            "come from the checkpoint; do not pass them again"
        )
    writable_folder(folder, "--recover")
    return recorded_run(folder, target, max_memory)


def _loaded(target: str, deadlock, max_seconds):
    """The model TARGET names, loaded and validated in a child first (`model_trial`): a model
    that exits or hangs there is one line, exit 2, before this process runs any of it."""
    tried(target, deadlock, max_seconds)
    return guarded(target, lambda: load_model(target))
