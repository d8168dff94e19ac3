"""How every command reports bad input: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import sys

import click

BAD_INPUT = 2


def fail(message: str) -> None:
    """Stop with a one-line error and exit code 2."""
    click.echo(f"pymc-resume: error: {message}", err=True)
    sys.exit(BAD_INPUT)
