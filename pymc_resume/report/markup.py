"""The one place the report writes HTML: every value that goes into the page, text or number,
is escaped here, so no field of a profile can become markup whatever its type or content.

The page's code writes its markup as literal templates with `{}` for each value (`html`), and
joins parts with `join`: both escape every value that is not already `Markup` (the result of an
earlier `html` or `join`), quotes included, since values go into attributes as well as text.
Characters a reader cannot see but that change what they see (controls, bidirectional
overrides, zero-width marks) are written as visible escapes, as the terminal output does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape

# Controls (C0 but tab and newline, DEL, C1), zero-width and bidirectional marks, separators,
# the byte-order mark and the interlinear annotation characters.
INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]"
)


class Markup(str):
    """Text that is HTML already: made only by `html` and `join` from the page's own templates."""

    __slots__ = ()


def escaped(value: object) -> Markup:
    """`value` as HTML text: `Markup` as it is, anything else (a number too) by its `str`,
    escaped."""
    if isinstance(value, Markup):
        return value
    if type(value) is int:  # a coordinate, a count: digits and a sign, nothing to escape
        return Markup(value)
    text = escape(str(value), quote=True)
    return Markup(INVISIBLE.sub(lambda match: match.group(0).encode("unicode_escape").decode("ascii"), text))


def html(template: str, /, *values: object) -> Markup:
    """`template`, a literal of the page's code with a bare `{}` for each value, filled with the
    values escaped (no format specs: a number is formatted before it is passed)."""
    return Markup(template.format(*(escaped(value) for value in values)))


def join(parts: Iterable[object], separator: str = "") -> Markup:
    """The parts, each escaped unless it is `Markup`, joined by `separator` (a literal)."""
    return Markup(separator.join(escaped(part) for part in parts))
