"""`pymc-resume replay FILE`: replay a JSON repro; exit 1 while it reproduces, 0 once fixed."""

from __future__ import annotations

import sys

import click

from pymc_resume.cli import main
from pymc_resume.cli.errors import fail


@main.command("replay")
@click.argument("repro_file", type=click.Path(dir_okay=False))
@click.option("--fault", default=None,
              help="Replay against the reference runtime with this fault instead of the recorded "
                   "one ('none': the correct runtime).")
@click.option("--step-timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True,
              metavar="SECONDS", help="Stop an adapter step that takes longer (a hang).")
@click.option("--attempts", type=click.IntRange(min=1), default=None,
              help="Replay up to this many times until it reproduces (a race)  "
                   "[default: what the repro records, 1 for most].")
def replay_command(repro_file, fault, step_timeout, attempts):
    """Replay REPRO_FILE (written by `fuzz`) against its adapter, without Hypothesis."""
    from pymc_resume.bridge.registry import AdapterSpecError
    from pymc_resume.bridge.repro import KEEP, ReproError, load_repro, replay_repro

    try:
        document = load_repro(repro_file)
        result = replay_repro(document, fault=KEEP if fault is None else fault, step_timeout=step_timeout,
                              attempts=attempts)
    except (ReproError, AdapterSpecError) as error:
        fail(str(error))
    if result.error is not None:
        fail(result.describe())
    steps = len(document["steps"])
    tries = f", replay {result.attempt} of {result.attempts}" if result.attempts > 1 else ""
    if result.reproduces:
        click.echo(f"reproduces ({steps} steps{tries}): {result.describe()}")
        sys.exit(1)
    replays = f" in {result.attempts} replays" if result.attempts > 1 else ""
    click.echo(f"fixed: {document['clause']} holds on the {steps} replayed steps{replays}")
