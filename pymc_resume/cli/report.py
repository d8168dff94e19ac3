"""`pymc-resume report PROFILE.json... -o report.html`: the HTML conformance report of one or
more profiles (`pymc_resume/report/page.py`), one self-contained page."""

from __future__ import annotations

import click

from pymc_resume.cli import main
from pymc_resume.cli.paths import writable_file
from pymc_resume.files import write_atomically
from pymc_resume.model.contract import CLAUSE_IDS, VIOLATED


@main.command("report")
@click.argument("profiles", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Where to write the page (atomically).",
)
@click.option("--title", default=None, help="The page's title.")
def report_command(profiles, output, title):
    """Write the conformance report of PROFILES (JSON files written by `profile --json`): the
    matrix of configurations by contract id, each cell's verdict, reason, variants and evidence,
    each violated cell's repro as a step table and a sequence diagram; rows of one configuration
    (two versions of a framework) side by side, changed cells marked; the bounds, seed, budget
    and pymc-resume version of each run. The page runs no script and loads nothing."""
    from pymc_resume.report.page import render
    from pymc_resume.report.profiles import read_documents, rows_of

    writable_file(output, "--output")
    documents = read_documents(profiles)
    rows = rows_of(documents)
    write_atomically(output, render(documents, **({"title": title} if title else {})))
    violated = sum(row.verdict(cid) == VIOLATED for row in rows for cid in CLAUSE_IDS)
    click.echo(f"wrote {output}: {len(rows)} configuration(s), {violated} violated cell(s)")
