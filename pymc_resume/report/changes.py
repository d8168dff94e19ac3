"""Which cells changed between two profiles, and whether each got worse: the one definition.

A cell is **worse** than its baseline when

- it held and is now `violated` or `unconfirmed` (or was `unconfirmed` and is now `violated`):
  the framework now fails what it passed;
- it is newly `skipped` (it was judged, or not-applicable, and now nothing checks it), which
  includes every id of a configuration the new run lists as skipped (not installed, an adapter
  that failed): coverage lost is a regression a CI must see.

It is **better** when it moved the other way (`violated` to `unconfirmed` or `holds`,
`skipped` to a judged verdict that is not a violation). Any other change (to or from
`not-applicable`, `skipped` to `violated`) is listed as **changed**, neither. `diff` and
`profile --baseline` exit 1 when any cell is worse; the report marks every changed cell.

Rows are matched by framework and configuration (`Row.key`), whatever their versions: comparing
two releases of one framework is the point. A configuration the baseline has and the new
document neither profiled nor skipped was not asked for (a run narrowed with `--config`): it is
listed as not compared, never worse.
"""

from __future__ import annotations

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.model.contract import CLAUSE_IDS, HOLDS, SKIPPED, UNCONFIRMED, VIOLATED
from pymc_resume.report.profiles import Document, Row

WORSE = "worse"
BETTER = "better"
CHANGED = "changed"
ORDER = (WORSE, CHANGED, BETTER)  # how a comparison lists its changes: worse first

# Judged verdicts, from best to worst: a move down this list is worse.
RANK = {HOLDS: 0, UNCONFIRMED: 1, VIOLATED: 2}


def change(old: str, new: str) -> str | None:
    """WORSE, BETTER or CHANGED for a cell whose verdict went from `old` to `new`; None when
    it did not change."""
    if old == new:
        return None
    if new == SKIPPED:
        return WORSE
    if old in RANK and new in RANK:
        return WORSE if RANK[new] > RANK[old] else BETTER
    if old == SKIPPED and new in (HOLDS, UNCONFIRMED):
        return BETTER
    return CHANGED


@attrs.frozen
class Change:
    kind: str  # WORSE, BETTER or CHANGED
    adapter: str
    config: str
    clause: str
    old: str  # the verdicts
    new: str
    old_version: str
    new_version: str
    reason: str  # the new cell's reason (or why the configuration was skipped)

    def as_json(self) -> dict:
        return attrs.asdict(self)


@attrs.frozen
class Comparison:
    changes: tuple[Change, ...]  # worse first (ORDER), then in row and contract order
    compared: tuple[tuple[str, str], ...]  # the configurations found in both
    not_compared: tuple[str, ...]  # one line each: a configuration in one document only

    @property
    def worse(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind == WORSE)

    @property
    def better(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind == BETTER)

    def as_json(self) -> dict:
        return {
            "worse": len(self.worse),
            "better": len(self.better),
            "changes": [c.as_json() for c in self.changes],
            "compared": [list(key) for key in self.compared],
            "not_compared": list(self.not_compared),
        }


def cell_changes(old: Row, new: Row) -> list[Change]:
    """The cells of one configuration whose verdict changed from `old` to `new`."""
    found = []
    for clause_id in CLAUSE_IDS:
        kind = change(old.verdict(clause_id), new.verdict(clause_id))
        if kind is not None:
            found.append(
                Change(
                    kind,
                    new.adapter,
                    new.config,
                    clause_id,
                    old.verdict(clause_id),
                    new.verdict(clause_id),
                    old.version,
                    new.version,
                    new.cell(clause_id).get("reason") or "",
                )
            )
    return found


def compare(old: Document, new: Document) -> Comparison:
    """Every cell of `new` that changed from `old` (the baseline), worse first. Raises
    BadInput for a document with two profiles of one configuration (which to compare?)."""
    for document in (old, new):
        _one_row_per_configuration(document)
    new_rows = {row.key: row for row in new.rows}
    old_keys = {row.key for row in old.rows}
    found: list[Change] = []
    compared, not_compared = [], []
    for row in old.rows:
        if row.key in new_rows:
            compared.append(row.key)
            found += cell_changes(row, new_rows[row.key])
            continue
        entry = _skipped_entry(new, row)
        if entry is None:
            not_compared.append(f"{row.adapter} {row.config}: in {old.source} only (not run)")
            continue
        compared.append(row.key)
        reason = f"the configuration was skipped: {entry.get('reason', '')}"
        found += [
            Change(WORSE, row.adapter, row.config, cid, row.verdict(cid), SKIPPED, row.version, "-", reason)
            for cid in CLAUSE_IDS
            if row.verdict(cid) != SKIPPED
        ]
    not_compared += [
        f"{row.adapter} {row.config}: in {new.source} only (no baseline)"
        for row in new.rows
        if row.key not in old_keys
    ]
    found.sort(key=lambda c: ORDER.index(c.kind))  # stable: row and contract order within a kind
    return Comparison(tuple(found), tuple(compared), tuple(not_compared))


def _one_row_per_configuration(document: Document) -> None:
    seen = set()
    for row in document.rows:
        if row.key in seen:
            raise BadInput(
                f"{document.source} has two profiles of {row.adapter} {row.config}: compare one against one"
            )
        seen.add(row.key)


def _skipped_entry(document: Document, row: Row) -> dict | None:
    """The entry of `document`'s skipped list that covers `row`'s configuration (an entry
    without a config covers the whole framework), or None."""
    for entry in document.skipped:
        if entry.get("adapter") == row.adapter and entry.get("config") in (None, row.config):
            return entry
    return None
