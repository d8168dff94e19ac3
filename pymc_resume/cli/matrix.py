"""`pymc-resume matrix`: the fault matrix, reference and every mutant by the nine ids."""

from __future__ import annotations

import sys
import time

import attrs
import click

from pymc_resume.checking.matrix import Row, compute_matrix
from pymc_resume.cli import main
from pymc_resume.cli.errors import fail
from pymc_resume.cli.matrix_report import matrix_text
from pymc_resume.cli.options import MAX_WORKERS, json_option, quiet_flag
from pymc_resume.cli.paths import writable_file
from pymc_resume.files import write_json
from pymc_resume.model.bounds import BoundsError, load_bounds

HEARTBEAT_SECONDS = 30.0


@attrs.define
class RowHeartbeat:
    """The explorer's progress callback for one row: a line on stderr every `interval` s."""

    name: str
    interval: float = HEARTBEAT_SECONDS
    last: float = attrs.field(factory=time.monotonic)

    def __call__(self, snapshot, final: bool = False) -> None:
        now = time.monotonic()
        if final or now - self.last < self.interval:
            return
        self.last = now
        print(
            f"matrix: {self.name}: {snapshot.distinct_states:,} states so far, {snapshot.seconds:.0f}s",
            file=sys.stderr,
            flush=True,
        )


def heartbeat(name: str) -> RowHeartbeat:
    return RowHeartbeat(name)


def report_row(row: Row, done: int, total: int) -> None:
    verdict = f"violates {', '.join(row.violated)}" if row.violated else "holds everywhere"
    click.echo(
        f"matrix: [{done}/{total}] {row.name}: {row.distinct_states:,} states, {row.seconds:.1f}s, {verdict}",
        err=True,
    )


@main.command("matrix")
@click.option(
    "--bounds",
    "bounds_name",
    default="default",
    show_default=True,
    help="A bundled bound name (small, default, paper) or a path to a TOML file.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1, max=MAX_WORKERS),
    default=1,
    show_default=True,
    help="Check this many rows at once, each in its own process (same output).",
)
@json_option("the matrix")
@quiet_flag
def matrix_command(bounds_name, workers, json_path, quiet):
    """Check the reference and every mutant exhaustively: which fault breaks which id.

    Prints a table (rows: the reference and each mutant; columns: the nine ids; cells: holds,
    or violated with the length of the shortest counterexample), then the separating mutants
    of each id (those that violate it and hold on the other eight). Exit 0 when the reference
    holds everywhere and every id has a separating mutant, 1 otherwise, 2 on bad input.
    """
    try:
        bounds = load_bounds(bounds_name)
    except BoundsError as error:
        fail(f"--bounds: {error}")
    writable_file(json_path, "--json")
    if not quiet:
        click.echo(
            f"matrix: checking the reference and every mutant at bounds {bounds.name!r} "
            f"with {workers} worker{'s' if workers != 1 else ''}",
            err=True,
        )
    matrix = compute_matrix(
        bounds,
        workers=workers,
        row_progress=None if quiet else heartbeat,
        on_row=None if quiet else report_row,
    )
    click.echo(matrix_text(matrix, workers))
    if json_path:
        write_json(json_path, matrix.as_json())
    sys.exit(0 if matrix.ok else 1)
