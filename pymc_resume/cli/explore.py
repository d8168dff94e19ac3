"""`pymc-resume explore`: check your own model exhaustively, as `check` checks the reference."""

from __future__ import annotations

import os
import sys

import attrs
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
from pymc_resume.explore.engines.progress import ProgressPrinter, WalkPrinter
from pymc_resume.explore.engines.raised import model_traceback
from pymc_resume.explore.engines.simulate import DEFAULT_DEPTH
from pymc_resume.explore.target import absolute, load_model
from pymc_resume.explore.traces.graph_dump import LIMIT as GRAPH_LIMIT
from pymc_resume.explore.traces.graph_dump import dot, state_graph
from pymc_resume.explore.traces.state_json import ModelClasses
from pymc_resume.explore.traces.trace_replay import Replay, read_trace, replay
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
def explore_command(**given):
    """Explore every state of the model TARGET (module:factory or path/to/file.py:factory,
    a callable returning the model) and judge its invariants, reachability properties and
    deadlocks. Exit 0 when every property holds, 1 when any is violated, 2 on bad input or
    when a limit stopped the run before it proved anything. With --simulate, random walks
    instead: exit 1 when a walk violates a property, else 0 (which proves nothing)."""
    options = ExploreOptions(**given)
    if options.replay_file is not None or options.property_name is not None:
        _replay_command(options)
        return
    _refuse_misplaced(options)
    recorded = None
    if options.recover_dir is not None:
        recorded = _recovered(options)
        options = _as_recorded(options, recorded)
    elif options.target is None:
        fail("missing TARGET (module:factory or path/to/file.py:factory)")
    target = absolute(options.target)
    model = _loaded(target, options.deadlock, options.max_seconds)
    try:
        if recorded is not None:
            valid = guarded(target, lambda: validated(model, options.deadlock))
            check_deadlock_matches(recorded, valid.deadlock_is_error, options.recover_dir)
        if options.graph_path is not None:
            _dump_graph(target, model, options.graph_path, options.deadlock, not options.no_symmetry)
        report = _walks(target, model, options) if options.simulate else _explore(target, model, options)
    except PymcResumeError as error:
        if options.show_traceback:
            _print_traceback(error)
        _report_fault(target, model, error, options.json_path)
        raise
    except Exception as error:
        if os.environ.get("PYMC_RESUME_DEBUG") == "1":
            raise
        if options.show_traceback:
            _print_traceback(error)
        raise BadInput(
            f"{target}: the model raised {type(error).__name__}: {error} while "
            "being explored (--traceback shows where)"
        ) from None
    _finish(report, options)


@attrs.frozen
class ExploreOptions:
    """The command line of `explore`, as click hands it over."""

    target: str | None
    workers: int | None
    max_states: int | None
    max_seconds: float | None
    max_memory: int | None  # MiB
    stop_at_first: bool
    deadlock: bool | None
    no_symmetry: bool
    exact: bool
    coverage: bool
    checkpoint_dir: str | None
    checkpoint_every: float | None
    recover_dir: str | None
    json_path: str | None
    quiet: bool
    show_traceback: bool
    graph_path: str | None
    replay_file: str | None
    property_name: str | None
    engine: str
    address: str | None
    simulate: bool
    seed: int | None
    depth: int | None
    walks: int | None
    from_snapshot: object = None  # not an option: the checkpoint a recovery continues

    def search_options(self) -> dict[str, object]:
        """The options only a search (not a replay) uses, by flag, with their values."""
        return {
            "--workers": self.workers,
            "--max-states": self.max_states,
            "--max-seconds": self.max_seconds,
            "--max-memory": self.max_memory,
            "--stop-at-first": self.stop_at_first,
            "--checkpoint-dir": self.checkpoint_dir,
            "--checkpoint-every": self.checkpoint_every,
            "--recover": self.recover_dir,
            "--json": self.json_path,
            "--engine ray": self.engine == "ray" or None,
            "--simulate": self.simulate,
            "--seed": self.seed,
            "--depth": self.depth,
            "--walks": self.walks,
            "--dump-graph": self.graph_path,
        }


def _refuse_misplaced(options: ExploreOptions) -> None:
    """Paths that cannot be written, and options that do not apply to this kind of run."""
    writable_file(options.json_path, "--json")
    writable_file(options.graph_path, "--dump-graph")
    if options.graph_path is not None and (options.simulate or options.recover_dir is not None):
        fail(f"--dump-graph: not with {'--simulate' if options.simulate else '--recover'}")
    refuse_for_simulation(
        options.simulate,
        {"--seed": options.seed, "--depth": options.depth, "--walks": options.walks},
        {
            "--workers": options.workers,
            "--no-symmetry": options.no_symmetry,
            "--exact": options.exact,
            "--coverage": options.coverage,
            "--max-states": options.max_states,
            "--max-memory": options.max_memory,
            "--checkpoint-dir": options.checkpoint_dir,
            "--checkpoint-every": options.checkpoint_every,
            "--recover": options.recover_dir,
            "--engine ray": options.engine == "ray" or None,
        },
    )
    refuse_lone_address(options.engine, options.address)
    writable_folder(options.checkpoint_dir, "--checkpoint-dir")


def _as_recorded(options: ExploreOptions, recorded) -> ExploreOptions:
    """The options of the run `--recover` continues: its workers, stopping rule, symmetry and
    store, checkpointing into its own folder; its interval and limits unless given again."""
    return attrs.evolve(
        options,
        workers=recorded.workers,
        stop_at_first=recorded.stop_at_first,
        no_symmetry=not recorded.symmetry,
        exact=recorded.exact,
        from_snapshot=recorded.snapshot,
        checkpoint_dir=options.recover_dir,
        checkpoint_every=_given_or(options.checkpoint_every, recorded.checkpoint_every),
        max_states=_given_or(options.max_states, recorded.max_states),
        max_seconds=_given_or(options.max_seconds, recorded.max_seconds),
        max_memory=_given_or(
            options.max_memory, None if recorded.max_memory is None else recorded.max_memory // 2**20
        ),  # (kept in bytes, given in MiB)
    )


def _given_or(given, recorded):
    return recorded if given is None else given


def _walks(target: str, model, options: ExploreOptions):
    """`--simulate`: random walks through the model, judged on what they visit."""
    return simulate_explore(
        target,
        model,
        seed=options.seed or 0,
        depth=options.depth or DEFAULT_DEPTH,
        walks=options.walks,
        max_seconds=options.max_seconds,
        stop_at_first=options.stop_at_first,
        check_deadlock=options.deadlock,
        progress=None if options.quiet else WalkPrinter(),
    )


def _explore(target: str, model, options: ExploreOptions):
    """The exhaustive run, with the command's options (a SystemExit the model raises in this
    process is its failure, one line: `model_trial.guarded`)."""
    return guarded(
        target,
        lambda: run_explore(
            target,
            model,
            workers=options.workers or 1,
            max_states=options.max_states,
            max_seconds=options.max_seconds,
            max_memory=options.max_memory * 2**20 if options.max_memory else None,
            stop_at_first=options.stop_at_first,
            check_deadlock=options.deadlock,
            progress=None if options.quiet else ProgressPrinter(),
            checkpoint_dir=options.checkpoint_dir,
            checkpoint_every=60.0 if options.checkpoint_every is None else options.checkpoint_every,
            from_snapshot=options.from_snapshot,
            engine=options.engine,
            address=options.address,
            symmetry=not options.no_symmetry,
            exact=options.exact,
            coverage=options.coverage,
        ),
        "explored",
    )


def _finish(report, options: ExploreOptions) -> None:
    """Print the report, write its JSON, exit 1 for a violation, 2 for a search a limit cut
    short (nothing proved)."""
    click.echo(explore_text(report))
    if options.json_path:
        write_json(options.json_path, report.as_json())
    if report.violated:
        sys.exit(1)
    if not report.result.complete and not options.simulate:
        fail(f"exploration incomplete, nothing proved: {report.result.stopped_because}")


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


def _replay_command(options: ExploreOptions) -> None:
    """`--replay-trace FILE`: replay a recorded trace against the model (no search)."""
    if options.replay_file is None:
        fail("--property: only with --replay-trace")
    given = [name for name, value in options.search_options().items() if value]
    if given:
        fail(f"--replay-trace: {given[0]} does not apply (a replay runs no search)")
    if options.target is None:
        fail("missing TARGET (module:factory or path/to/file.py:factory)")
    target, deadlock = absolute(options.target), options.deadlock
    model = _loaded(target, deadlock, None)
    try:
        valid = guarded(target, lambda: validated(model, deadlock))
        trace = read_trace(options.replay_file, valid, options.property_name)
        outcome = replay(valid, trace, symmetry=not options.no_symmetry)
    except PymcResumeError as error:
        if options.show_traceback:
            _print_traceback(error)
        raise
    except Exception as error:
        if options.show_traceback:
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


def _recovered(options: ExploreOptions):
    """`--recover FOLDER`: the checkpointed run of TARGET, checked (`explore_recovery`)."""
    if (
        options.workers
        or options.stop_at_first
        or options.checkpoint_dir
        or options.no_symmetry
        or options.exact
    ):
        fail(
            "--recover: the run's workers, symmetry, store, --stop-at-first and checkpoint folder "
            "come from the checkpoint; do not pass them again"
        )
    writable_folder(options.recover_dir, "--recover")
    return recorded_run(options.recover_dir, options.target, options.max_memory)


def _loaded(target: str, deadlock, max_seconds):
    """The model TARGET names, loaded and validated in a child first (`model_trial`): a model
    that exits or hangs there is one line, exit 2, before this process runs any of it."""
    tried(target, deadlock, max_seconds)
    return guarded(target, lambda: load_model(target))
