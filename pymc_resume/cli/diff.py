"""`pymc-resume diff OLD.json NEW.json`: the cells whose verdict changed, worse first; exit 1
when any got worse (`pymc_resume/report/changes.py` says what "worse" is), 0 otherwise.
`profile --baseline FILE` prints the same after a run (`comparison_text`)."""

from __future__ import annotations

import sys

import click

from pymc_resume.cli import main
from pymc_resume.cli.errors import printable
from pymc_resume.cli.tables import table
from pymc_resume.files import write_json


@main.command("diff")
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write the changes as JSON."
)
def diff_command(old, new, json_path):
    """The cells of NEW (a profile JSON) whose verdict changed from OLD (the baseline), worse
    first. Exit 1 when a cell is worse (it held and is now violated or unconfirmed, or it is
    newly skipped), 0 otherwise; improvements are listed either way."""
    from pymc_resume.cli.paths import writable_file
    from pymc_resume.report.changes import compare
    from pymc_resume.report.profiles import read_document

    writable_file(json_path, "--json")
    comparison = compare(read_document(old), read_document(new))
    if json_path:
        write_json(json_path, comparison.as_json())
    click.echo(comparison_text(comparison, old))
    if comparison.worse:
        sys.exit(1)


def comparison_text(comparison, baseline: str) -> str:
    """The changed cells as a table (worse first), then one line of counts."""
    lines = []
    if comparison.changes:
        rows = [
            [
                c.kind,
                c.adapter,
                c.config,
                c.clause,
                f"{c.old} ({c.old_version})",
                f"{c.new} ({c.new_version})",
            ]
            for c in comparison.changes
        ]
        lines.append(table(["change", "framework", "config", "id", "was", "now"], rows))
        for c in comparison.worse:
            reason = " ".join(c.reason.split())
            lines.append(printable(f"  worse: {c.adapter} {c.config} {c.clause}: {reason}"))
    # Names and reasons come from the profile files: escaped and cut, as in the table.
    lines += [printable(f"not compared: {line}") for line in comparison.not_compared]
    compared = len(comparison.compared)
    lines.append(
        f"against {baseline}: {len(comparison.worse)} worse, {len(comparison.better)} better, "
        f"{len(comparison.changes) - len(comparison.worse) - len(comparison.better)} otherwise changed "
        f"cell(s) in {compared} configuration(s) compared"
    )
    return "\n".join(lines)
