"""`pymc-resume fuzz ADAPTER`: Hypothesis stateful fuzzing of a live adapter against the contract."""

from __future__ import annotations

import signal
import sys

import click

from pymc_resume.cli import Terminated, main
from pymc_resume.cli.errors import MAX_NAME, fail, printable
from pymc_resume.cli.options import (
    MAX_STEPS,
    Seconds,
    adapter_option_flag,
    adapter_options,
    budget_flags,
    host_flags,
    jobs_or_cores,
    json_option,
)
from pymc_resume.cli.paths import writable_file, writable_folder
from pymc_resume.cli.tables import table
from pymc_resume.errors import AdapterError
from pymc_resume.files import write_json
from pymc_resume.model.bounds import BoundsError, load_bounds
from pymc_resume.model.contract import CLAUSES, HOLDS, VIOLATED

DEFAULT_EXAMPLES = 100
# --max-seconds without --examples: the time budget is the limit, searched in batches of
# DEFAULT_EXAMPLES (see `fuzz.run_fuzz`'s `batch`).
AS_MANY_AS_TIME_ALLOWS = 10**9


@main.command("fuzz")
@click.argument("adapter")
@click.option(
    "--examples",
    type=click.IntRange(min=1),
    default=None,
    help="Examples (rule sequences) Hypothesis generates  [default: 100; with --max-seconds, "
    "as many as the time allows].",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1, max=MAX_STEPS),
    default=12,
    show_default=True,
    help="Most client steps per example.",
)
@click.option("--seed", type=int, default=None, help="Seed Hypothesis for a reproducible run.")
@click.option(
    "--fault",
    default=None,
    help="The reference runtime's fault switch: a mutant name (see `check --list-mutants`).",
)
@click.option(
    "--bounds",
    "bounds_name",
    default=None,
    help="Bounds whose workflow, values and processes to fuzz with (name or TOML path)  "
    "[default: `fuzz` for the reference runtime, whose every fault it reaches; "
    "`default` for other adapters].",
)
@click.option(
    "--repro-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write repros here and keep Hypothesis's example database here  "
    "[default: ./pymc-resume-repros, no database].",
)
@click.option(
    "--step-timeout",
    type=Seconds(low=0.1),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Stop an adapter that takes longer to build, open or run a step (a hang).",
)
@budget_flags
@json_option("the result", again=True)
@adapter_option_flag
@host_flags
def fuzz_command(
    adapter,
    examples,
    steps,
    seed,
    fault,
    bounds_name,
    repro_dir,
    step_timeout,
    max_seconds,
    shrink_seconds,
    no_shrink,
    json_path,
    adapter_option_pairs,
    jobs,
    fresh_hosts,
):
    """Fuzz ADAPTER (`reference`, or module:Class) with the model's client actions."""
    from pymc_resume.bridge.fuzzing.budget import Budget, stop_on_signal
    from pymc_resume.bridge.fuzzing.fuzz import run_fuzz
    from pymc_resume.bridge.hosting.template import HostTemplates

    try:
        bounds = load_bounds(bounds_name or ("fuzz" if adapter == "reference" else "default"))
    except BoundsError as error:
        fail(f"--bounds: {error}")
    use_database = repro_dir is not None
    repro_dir = repro_dir or "pymc-resume-repros"
    writable_folder(repro_dir, "--repro-dir")
    writable_file(json_path, "--json")
    options = adapter_options(adapter_option_pairs, {"fault": fault} if fault is not None else {})
    batch = None
    if examples is None:  # with --max-seconds: batches of the default size, as long as time allows
        examples, batch = (
            (DEFAULT_EXAMPLES, None) if max_seconds is None else (AS_MANY_AS_TIME_ALLOWS, DEFAULT_EXAMPLES)
        )
    publish = None if json_path is None else (lambda so_far: write_json(json_path, so_far.as_json()))
    budget = Budget(max_seconds, shrink_seconds)
    templates = HostTemplates(
        lambda message: click.echo(printable(message), err=True), enabled=not fresh_hosts
    )
    with stop_on_signal(budget, signal.SIGTERM, Terminated), templates:
        report = run_fuzz(
            adapter,
            options,
            bounds,
            examples=examples,
            steps=steps,
            seed=seed,
            repro_dir=repro_dir,
            use_database=use_database,
            step_timeout=step_timeout,
            shrink=not no_shrink,
            budget=budget,
            publish=publish,
            batch=batch,
            jobs=jobs_or_cores(jobs),
            templates=templates,
        )
    if report.error is not None:
        raise AdapterError(f"adapter {adapter!r}: {report.error}")
    click.echo(fuzz_text(report, shrunk=not no_shrink))
    if report.violated:
        sys.exit(1)


def fuzz_text(report, shrunk: bool = True) -> str:
    from pymc_resume.bridge.fuzzing.fuzz import UNCONFIRMED
    from pymc_resume.bridge.judging.session import describe_step

    fault = report.options.get("fault")
    title = f"adapter {report.adapter!r}" + (f" with fault {fault!r}" if fault else "")
    lines = [
        f"{title} ({report.version}) on workflow {list(report.bounds.nodes)} "
        f"(bounds {printable(repr(report.bounds.name), MAX_NAME)}): {report.examples} examples generated, "
        f"{report.shrink_replays} shrink replays, {report.steps} steps, "
        f"{report.steps_per_second:.1f} steps/s, {report.seconds:.1f}s, seed {report.seed}",
    ]
    if report.stopped is not None:
        lines.append(f"stopped early: {report.stopped}; everything found until then is reported")
    if report.first_failure is not None:
        examples, seconds = report.first_failure
        then = "then shrunk" if shrunk else "not shrunk (--no-shrink)"
        lines.append(f"first failure after {examples} examples ({seconds:.1f}s), {then}")
    rows = []
    for clause in CLAUSES:
        result = report.clauses[clause.id]
        detail = result.reason or ""
        if result.verdict in (VIOLATED, UNCONFIRMED):
            reproduced, of = result.replays or (0, 0)
            detail = f"repro: {result.repro_steps} steps, reproduced in {reproduced} of {of} replays"
        rows.append([clause.id, clause.kind, result.verdict, detail.split(" (at: ")[0]])  # where: below
    lines += ["", table(["id", "kind", "verdict", "detail"], rows), ""]
    for clause in CLAUSES:
        result = report.clauses[clause.id]
        if result.verdict == HOLDS and result.reason and " (at: " in result.reason:
            lines.append(f"{clause.id} exercised at: {_places(result.reason)}")
        lines += [f"{clause.id} note: {note}" for note in result.notes]
    for clause in CLAUSES:
        result = report.clauses[clause.id]
        if result.verdict not in (VIOLATED, UNCONFIRMED):
            continue
        lines += ["", f"{clause.id} {result.verdict}: {printable(result.reason or '')}"]
        lines += [f"  {i}. {printable(describe_step(step))}" for i, step in enumerate(result.steps or [])]
        lines += [f"  repro: {result.repro}", f"  pytest: {result.pytest}"]
    return "\n".join(lines)


def _places(reason: str) -> str:
    """The places a holds reason lists, "(at: ...)", up to the parenthesis that closes it."""
    text = reason.split(" (at: ", 1)[1]
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return text[:index]
    return text
