"""How every command reports bad input: one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import sys

import click

BAD_INPUT = 2
MAX_MESSAGE = 2000  # characters: an error quoting a 1 MiB option says so in one screen
MAX_NAME = 200  # characters of a name read from a file (a bounds name in a checkpoint) in a headline


def fail(message: str) -> None:
    """Stop with a one-line error and exit code 2."""
    click.echo(f"pymc-resume: error: {printable(message)}", err=True)
    sys.exit(BAD_INPUT)


def printable(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` safe for a terminal: control characters (escape sequences, newlines) written as
    escapes, so that a string from a file can neither clear the screen nor break the line; cut
    to `limit` characters, saying how many more there were."""
    safe = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    if len(safe) <= limit:
        return safe
    return f"{safe[:limit]}... ({len(safe) - limit:,} more characters)"
