"""Plain, aligned text tables: every command's terminal output is made of them."""

from __future__ import annotations


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain, aligned text table."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])
