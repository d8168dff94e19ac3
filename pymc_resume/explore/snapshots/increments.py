"""Snapshots as increments: a partition's piece holds only what is new since the previous
piece of its chain, and a chain's pieces join, in order, into the one whole record of today.

A partition's store only grows between two snapshots of one run: states (their keys or
fingerprints, parents and goal flags) are appended in admission order and never change, the
codec tables only intern new values, and the edges kept for reachability properties are
appended too. So a piece saves, of those columns, only the part past the previous piece's
`Marks`; everything else (the candidates waiting for the next level, the counters, the first
violations, the wire codec's marks and translations, the keys forwarded) is small or changes in
place, and every piece holds it whole. A base is a piece whose marks are all zero (`BASE`):
it holds every column whole, as a snapshot always did.

One exception to "appended": with a fingerprint store, the edges into the states already stored
for the next level are saved as waiting candidates (`snapshot._ahead_as_candidates`), not as
edges, so the edges a piece saves are not a prefix of the next piece's. A piece's marks keep
only the edges before the first one left out (`Marks.edges`): the next piece truncates the
joined edges there and appends its own from that point on.

Each piece records the marks it continues from (`since`), and `join` checks them against the
pieces before it, so a piece missing, repeated or out of order is refused in one line even if
the manifest was edited to match; the joined record is then checked by
`snapshot.restore_partition` exactly as a whole one.
"""

from __future__ import annotations

from array import array
from typing import NoReturn

import attrs

from pymc_resume.explore.store.persisted import SnapshotError

SINCE_KEYS = frozenset({"depth", "states", "edges", "tables"})


@attrs.frozen
class Marks:
    """How much of each growing column of a partition its chain's pieces hold so far: the
    next piece saves the rest (and `since` records these, so the reader can check)."""

    depth: int = 0  # the depth of the piece these marks are at (0: no piece, the next is a base)
    states: int = 0  # states (keys or fingerprints, parents, goal flags)
    edges: int = 0  # leading edges every later piece keeps as they are
    tables: tuple[int, ...] = ()  # entries of each codec table (empty: none yet, or no tables)

    def as_record(self) -> dict:
        return {"depth": self.depth, "states": self.states, "edges": self.edges, "tables": list(self.tables)}

    def table_mark(self, table: int) -> int:
        return self.tables[table] if self.tables else 0


BASE = Marks()


def _fail(where: str, what: str) -> NoReturn:
    raise SnapshotError(f"{where}: {what}")


def _since(record: dict, where: str) -> Marks:
    """The marks a piece says it continues from, checked for shape."""
    since = record.get("since")
    if not isinstance(since, dict) or set(since) != SINCE_KEYS:
        _fail(where, f"'since' must hold exactly {', '.join(sorted(SINCE_KEYS))}")
    numbers = [since["depth"], since["states"], since["edges"]]
    tables = since["tables"]
    if type(tables) is not list or not all(type(n) is int and n >= 0 for n in [*numbers, *tables]):
        _fail(where, "'since' must hold counts")
    return Marks(since["depth"], since["states"], since["edges"], tuple(tables))


def join(whole: dict | None, record: object, where: str) -> dict:
    """The whole record of a chain's pieces so far (`whole`, None before the first) and the
    next piece (`record`, read from `where`): the piece's growing columns appended to the
    chain's, in place, and its other fields taken as they are. SnapshotError if the piece does
    not continue the chain where it stands."""
    if not isinstance(record, dict) or "since" not in record:
        _fail(where, "not a partition's snapshot piece (it has no 'since')")
    since = _since(record, where)
    if whole is None:
        if since != BASE:
            _fail(where, f"continues a piece of depth {since.depth}, but the chain starts here")
        return record
    if record.get("partition") != whole.get("partition"):
        _fail(where, "is a piece of another partition than the pieces before it")
    expected = _marks_of(whole)
    if since.depth != expected.depth:
        _fail(
            where, f"continues a piece of depth {since.depth}, but the one before it is of {expected.depth}"
        )
    if since.states != expected.states or since.edges > expected.edges:
        _fail(where, "continues the pieces before it at another length")
    try:
        _append_columns(whole, record, since)
    except (TypeError, ValueError, AttributeError, KeyError):
        _fail(where, "its columns do not continue the pieces before it (of other kinds)")
    for name, value in record.items():  # the parts every piece holds whole
        if name not in _GROWING:
            whole[name] = value
    return whole


_GROWING = frozenset(
    {"tables", "keys", "fingerprints", "parents", "goal_flags", "edge_sources", "edge_targets"}
)


def _marks_of(whole: dict) -> Marks:
    """Where a joined record stands: its depth, states and edges (for `since` to match)."""
    level_starts, parents = whole.get("level_starts"), whole.get("parents")
    sources = whole.get("edge_sources")
    depth = len(level_starts) if type(level_starts) is list else -1
    states = len(parents) if type(parents) is array else -1
    edges = len(sources) if type(sources) is array else 0
    return Marks(depth, states, edges)


def _append_columns(whole: dict, record: dict, since: Marks) -> None:
    """Extend `whole`'s growing columns by `record`'s (TypeError or ValueError where a column
    is not of the kind its predecessor is: a file that is not this chain's)."""
    _extend(whole["keys"], record["keys"], list)
    if whole["fingerprints"] is not None or record["fingerprints"] is not None:
        fingerprints, more = whole["fingerprints"], record["fingerprints"]
        _extend(fingerprints["values"], more["values"], array)
        fingerprints["hashed"], fingerprints["lookups"] = more["hashed"], more["lookups"]
    _extend(whole["parents"], record["parents"], array)
    flags, more_flags = whole["goal_flags"], record["goal_flags"]
    if type(flags) is not list or type(more_flags) is not list or len(flags) != len(more_flags):
        raise TypeError("goal flags")
    for kept, more in zip(flags, more_flags):
        _extend(kept, more, bytearray)
    for column in ("edge_sources", "edge_targets"):
        kept, more = whole[column], record[column]
        if kept is None and more is None:
            continue
        if type(kept) is not array or len(kept) < since.edges:
            raise TypeError(column)
        del kept[since.edges :]  # (the edges into states saved as candidates then)
        _extend(kept, more, array)
    tables, more_tables = whole["tables"], record["tables"]
    if tables is None and more_tables is None:
        return
    if type(tables) is not list or type(more_tables) is not list or len(tables) != len(more_tables):
        raise TypeError("tables")
    if list(since.tables) != [len(values) for values in tables]:
        raise ValueError("tables")
    for values, more in zip(tables, more_tables):
        _extend(values, more, list)


def _extend(kept: object, more: object, kind: type) -> None:
    """`kept` extended by `more`, both of `kind` (and of one typecode, for arrays)."""
    if type(kept) is not kind or type(more) is not kind:
        raise TypeError(kind.__name__)
    if kind is array and kept.typecode != more.typecode:  # type: ignore[attr-defined]
        raise TypeError("typecode")
    kept.extend(more)  # type: ignore[attr-defined]
