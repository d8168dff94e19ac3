"""`pymc-resume diff OLD.json NEW.json`: the cells that changed, worse first; exit 1 when any got
worse (`pymc_resume/report/changes.py` says what "worse" is), 0 otherwise, 2 when the two share
no configuration (nothing compared is no pass). Settings that differ between the two runs
(bounds, seed, budget, versions) are warned about, in the text and the JSON.
`profile --baseline FILE` prints the same after a run (`comparison_text`)."""

from __future__ import annotations

import sys

import click

from pymc_resume.cli import main
from pymc_resume.cli.errors import printable
from pymc_resume.cli.options import json_option
from pymc_resume.cli.tables import table
from pymc_resume.files import write_json


@main.command("diff")
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
@json_option("the changes")
def diff_command(old, new, json_path):
    """The cells of NEW (a profile JSON) that changed from OLD (the baseline), worse first. Exit
    1 when a cell is worse (it held and is now violated or unconfirmed; it was judged and is now
    not-applicable or skipped; it is newly skipped; it fails under a new variant), 0 otherwise,
    2 when the two share no configuration; improvements are listed either way, and settings
    that differ (bounds, seed, budget, versions) are warned about."""
    from pymc_resume.cli.paths import writable_file
    from pymc_resume.report.changes import compare
    from pymc_resume.report.profiles import read_documents

    writable_file(json_path, "--json")
    baseline, document = read_documents([old, new])
    comparison = compare(baseline, document)
    if json_path:
        write_json(json_path, comparison.as_json())
    click.echo(comparison_text(comparison, old))
    if comparison.worse:
        sys.exit(1)


def comparison_text(comparison, baseline: str) -> str:
    """The changed cells as a table (worse first), each worse cell's reason and each change
    inside a failing cell, the warnings, then one line of counts."""
    from pymc_resume.report.changes import WORSE

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
        for c in comparison.changes:  # a worse cell, or a change inside a cell, with its new reason
            if c.kind == WORSE or c.detail:
                said = [c.detail, f"now: {c.reason}" if c.detail else c.reason]
                text = " ".join("; ".join(part for part in said if part).split())
                lines.append(printable(f"  {c.kind}: {c.adapter} {c.config} {c.clause}: {text}"))
    # Names and reasons come from the profile files: escaped and cut, as in the table.
    lines += [printable(f"not compared: {line}") for line in comparison.not_compared]
    lines += [printable(f"warning: {line}") for line in comparison.warnings]
    compared = len(comparison.compared)
    lines.append(  # the baseline's path may hold anything a file name can
        f"against {printable(baseline)}: {len(comparison.worse)} worse, {len(comparison.better)} better, "
        f"{len(comparison.changes) - len(comparison.worse) - len(comparison.better)} otherwise changed "
        f"cell(s) in {compared} configuration(s) compared"
    )
    return "\n".join(lines)
