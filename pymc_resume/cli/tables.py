"""Plain, aligned text tables: every command's terminal output is made of them."""

from __future__ import annotations

from pymc_resume.cli.errors import printable


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain, aligned text table. A cell may hold text that came from a file (a repro's
    steps and options, a profile's names): every cell is printed escaped and cut (`printable`),
    so that none can move the cursor, clear the screen or break the table's lines."""
    headers = [printable(str(cell)) for cell in headers]
    rows = [[printable(str(cell)) for cell in row] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])
