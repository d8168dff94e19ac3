"""`pymc-resume replay FILE`: replay a JSON repro; exit 1 while it reproduces, 0 once fixed.

A repro file may come from anyone: it is validated before use (`bridge.repro.format`), and
the adapter it names is resolved only among the built-in and installed adapters and those
given with `--allow-adapter`.
"""

from __future__ import annotations

import sys

import click

from pymc_resume.cli import main
from pymc_resume.cli.errors import fail, printable
from pymc_resume.cli.options import Seconds, host_flags, jobs_or_cores


@main.command("replay")
@click.argument("repro_file", type=click.Path(dir_okay=False))
@click.option(
    "--fault",
    default=None,
    help="Replay against the reference runtime with this fault instead of the recorded "
    "one ('none': the correct runtime).",
)
@click.option(
    "--step-timeout",
    type=Seconds(0.1, 3600),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Stop an adapter step that takes longer (a hang).",
)
@click.option(
    "--attempts",
    type=click.IntRange(min=1, max=20),
    default=None,
    help="Replay up to this many times until it reproduces (a race)  "
    "[default: what the repro records, 1 for most].",
)
@click.option(
    "--allow-adapter",
    "allowed",
    multiple=True,
    metavar="MODULE:CLASS",
    help="Allow the repro's adapter when it is neither built in nor installed "
    "(module:Class or path/to/file.py:Class); repeatable. A repro names code to "
    "run: allow only adapters you trust.",
)
@host_flags
def replay_command(repro_file, fault, step_timeout, attempts, allowed, jobs, fresh_hosts):
    """Replay REPRO_FILE (written by `fuzz` or `profile`) against its adapter, without Hypothesis."""
    from pymc_resume.bridge.hosting.template import HostTemplates
    from pymc_resume.bridge.repro.replay import KEEP, load_repro, replay_repro

    document = load_repro(repro_file)
    with HostTemplates(
        lambda message: click.echo(printable(message), err=True), enabled=not fresh_hosts
    ) as hosts:
        result = replay_repro(
            document,
            fault=KEEP if fault is None else fault,
            step_timeout=step_timeout,
            attempts=attempts,
            allowed=tuple(allowed),
            jobs=jobs_or_cores(jobs),
            templates=hosts,
        )
    if result.error is not None:
        fail(f"{document['adapter']!r}: {result.describe()}")
    steps = len(document["steps"])
    tries = f", replay {result.attempt} of {result.attempts}" if result.attempts > 1 else ""
    if result.reproduces:  # each violation a line, escaped: its text may quote the repro's
        described = "\n".join(printable(line) for line in result.describe().split("\n"))
        click.echo(f"reproduces ({steps} steps{tries}): {described}")
        sys.exit(1)
    replays = f" in {result.attempts} replays" if result.attempts > 1 else ""
    click.echo(f"fixed: {document['clause']} holds on the {steps} replayed steps{replays}")
