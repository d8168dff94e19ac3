"""Which cells changed between two profiles, and whether each got worse: the one definition.

A cell is **worse** than its baseline when

- it held and is now `violated` or `unconfirmed` (or was `unconfirmed` and is now `violated`):
  the framework now fails what it passed;
- it was judged (`holds`, `unconfirmed`, `violated`) and is now `not-applicable` or `skipped`:
  nothing checks it any more, and an adapter that declares an operation unsupported must not
  make a failing id disappear from the gate;
- it is newly `skipped` (it was not-applicable, and now nothing checks it), which includes every
  id of a configuration the new run lists as skipped (not installed, an adapter that failed):
  coverage lost is a regression a CI must see;
- it fails in both, and now also under a variant (a documented call of an operation) it did not
  fail under before: a new failure inside an already violated cell.

It is **better** when it moved the other way (`violated` to `unconfirmed` or `holds`,
`skipped` to a judged verdict that is not a violation). Any other change is listed as
**changed**, neither: from `not-applicable` to a verdict, `skipped` to `violated`, and a cell
that fails in both for another reason (the reason's replay counts aside: a race's vary from run
to run, so a different reason is shown, never gated on). `diff` and `profile --baseline` exit 1
when any cell is worse; the report marks every changed cell.

Rows are matched by framework and configuration (`Row.key`), whatever their versions: comparing
two releases of one framework is the point. A configuration the baseline has and the new
document neither profiled nor skipped was not asked for (a run narrowed with `--config`): it is
listed as not compared, never worse. Two documents that share no configuration compare nothing,
which a gate must not take for a pass: `compare` refuses them (BadInput, exit 2). Settings that
make two runs incomparable cell for cell (other bounds, seed, budget, pymc-resume version) and
framework versions or adapter options that differ are listed as warnings (`settings_warnings`).
"""

from __future__ import annotations

import re
from collections.abc import Collection

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.model.contract import CLAUSE_IDS, HOLDS, NOT_APPLICABLE, SKIPPED, UNCONFIRMED, VIOLATED
from pymc_resume.report.profiles import Document, Row

WORSE = "worse"
BETTER = "better"
CHANGED = "changed"
ORDER = (WORSE, CHANGED, BETTER)  # how a comparison lists its changes: worse first

# Judged verdicts, from best to worst: a move down this list is worse.
RANK = {HOLDS: 0, UNCONFIRMED: 1, VIOLATED: 2}
FAILING = (VIOLATED, UNCONFIRMED)
# The replay counts a failing cell's reason ends with (`bridge/fuzzing/fuzz.py`): they vary.
REPLAY_COUNTS = re.compile(r"\s*\((?:the repro reproduced in|not seen again in) \d+ of \d+ replays[^()]*\)")


def change(old: str, new: str) -> str | None:
    """WORSE, BETTER or CHANGED for a cell whose verdict went from `old` to `new`; None when
    it did not change."""
    if old == new:
        return None
    if new == SKIPPED or (old in RANK and new == NOT_APPLICABLE):
        return WORSE
    if old in RANK and new in RANK:
        return WORSE if RANK[new] > RANK[old] else BETTER
    if old == SKIPPED and new in (HOLDS, UNCONFIRMED):
        return BETTER
    return CHANGED


def cell_change(old: dict, new: dict) -> tuple[str, str] | None:
    """(WORSE, BETTER or CHANGED, what changed inside the cell or "") for a cell that went from
    `old` to `new` (cells of a profile's JSON); None when nothing a gate looks at changed."""
    kind = change(old["verdict"], new["verdict"])
    if kind is not None:
        return kind, ""
    if new["verdict"] not in FAILING:
        return None
    added = [v for v in new.get("variants") or [] if v not in (old.get("variants") or [])]
    if added:
        return WORSE, f"now also failing under {', '.join(added)}"
    was, now = failure_text(old.get("reason") or ""), failure_text(new.get("reason") or "")
    if was != now:
        return CHANGED, f"failing another way (was: {was})"
    return None


def failure_text(reason: str) -> str:
    """A failing cell's reason without its replay counts, its whitespace collapsed."""
    return " ".join(REPLAY_COUNTS.sub("", reason).split())


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
    detail: str = ""  # what changed inside a cell that fails in both ("" for a verdict change)

    def as_json(self) -> dict:
        return attrs.asdict(self)


@attrs.frozen
class Comparison:
    changes: tuple[Change, ...]  # worse first (ORDER), then in row and contract order
    compared: tuple[tuple[str, str], ...]  # the configurations found in both
    not_compared: tuple[str, ...]  # one line each: a configuration in one document only
    warnings: tuple[str, ...] = ()  # settings or versions that differ (`settings_warnings`)

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
            "warnings": list(self.warnings),
        }


def cell_changes(old: Row, new: Row) -> list[Change]:
    """The cells of one configuration that changed from `old` to `new`."""
    found = []
    for clause_id in CLAUSE_IDS:
        seen = cell_change(old.cell(clause_id), new.cell(clause_id))
        if seen is not None:
            found.append(
                Change(
                    seen[0],
                    new.adapter,
                    new.config,
                    clause_id,
                    old.verdict(clause_id),
                    new.verdict(clause_id),
                    old.version,
                    new.version,
                    new.cell(clause_id).get("reason") or "",
                    seen[1],
                )
            )
    return found


def compare(old: Document, new: Document) -> Comparison:
    """Every cell of `new` that changed from `old` (the baseline), worse first. Raises
    BadInput for a document with two profiles of one configuration (which to compare?) and for
    two documents that share no configuration (nothing compared is no pass)."""
    for document in (old, new):
        one_row_per_configuration(document)
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
        reason = f"the configuration was skipped: {entry.get('reason') or ''}"
        found += [
            Change(WORSE, row.adapter, row.config, cid, row.verdict(cid), SKIPPED, row.version, "-", reason)
            for cid in CLAUSE_IDS
            if row.verdict(cid) != SKIPPED
        ]
    if not compared:
        raise BadInput(_nothing_compared(old, new))
    not_compared += [
        f"{row.adapter} {row.config}: in {new.source} only (no baseline)"
        for row in new.rows
        if row.key not in old_keys
    ]
    found.sort(key=lambda c: ORDER.index(c.kind))  # stable: row and contract order within a kind
    warnings = settings_warnings(
        old, new, [(row, new_rows[row.key]) for row in old.rows if row.key in new_rows]
    )
    return Comparison(tuple(found), tuple(compared), tuple(not_compared), tuple(warnings))


def require_common_configuration(baseline: Document, planned: Collection[tuple[str, str]], run: str) -> None:
    """Refuse (BadInput) a baseline that has no configuration among `planned` (framework,
    configuration) pairs: checked before a run, so that a gate that would compare nothing
    stops before any work."""
    if not {row.key for row in baseline.rows} & set(planned):
        raise BadInput(
            f"--baseline: {baseline.source} has no configuration {run} profiles, so nothing would be "
            f"compared (it has: {_keys_text(baseline)}; the run: {_keys_text(planned)})"
        )


def one_row_per_configuration(document: Document) -> None:
    """Refuse (BadInput) a document with two profiles of one configuration: which to compare?"""
    seen = set()
    for row in document.rows:
        if row.key in seen:
            raise BadInput(
                f"{document.source} has two profiles of {row.adapter} {row.config}: compare one against one"
            )
        seen.add(row.key)


def settings_warnings(old: Document, new: Document, pairs: list[tuple[Row, Row]]) -> list[str]:
    """One line for each setting of the two runs that differs (a verdict under other bounds,
    another seed or another budget is not the same check) or that one of them did not record,
    and for each compared configuration whose framework version or adapter options differ or whose
    run stopped early, failed or was unfinished."""
    found = []
    was, now = settings_of(old), settings_of(new)
    for what in dict.fromkeys([*was, *now]):
        if what in was and what in now and was[what] != now[what]:
            before, after = _difference(was[what], now[what])
            found.append(f"{what} differs: {before} in {old.source}, {after} in {new.source}")
    for document, mine, other in ((old, was, now), (new, now, was)):
        missing = [what for what in other if what not in mine]
        if missing:
            found.append(f"not recorded in {document.source}, so not compared: {', '.join(missing)}")
    return found + _row_warnings(old, new, pairs)


def _row_warnings(old: Document, new: Document, pairs: list[tuple[Row, Row]]) -> list[str]:
    found = []
    for old_row, new_row in pairs:
        if old_row.version != new_row.version:
            versions = f"{old_row.version} -> {new_row.version}"
            found.append(f"{new_row.adapter} {new_row.config}: framework version {versions}")
        if old_row.options != new_row.options:
            before, after = _difference(old_row.options, new_row.options)
            found.append(f"{new_row.adapter} {new_row.config}: adapter options {before} -> {after}")
        for row, source in ((old_row, old.source), (new_row, new.source)):
            name = f"{row.adapter} {row.config} in {source}"
            if row.data.get("error"):
                found.append(f"{name}: the adapter failed, verdicts incomplete")
            elif row.data.get("stopped"):
                found.append(f"{name}: stopped early ({row.data['stopped']})")
            elif row.data.get("finished") is False:
                found.append(f"{name}: unfinished (written during the run)")
    return found


def settings_of(document: Document) -> dict[str, object]:
    """The settings that decide a run's verdicts, those `document` records: its bounds, seed,
    budget (fuzzed examples, steps, time limits, shrinking) and the pymc-resume that ran it."""
    settings: dict[str, object] = {
        "bounds": document.bounds,
        "seed": document.seed,
        "examples": document.examples,
        "pymc-resume version": document.tool_version,
    }
    recorded: dict[str, object] = {what: value for what, value in settings.items() if value is not None}
    recorded.update(document.budget or {})  # the budget's keys, null (no limit) included
    return recorded


def _difference(was: object, now: object) -> tuple[str, str]:
    """Two values of a setting as text; of two mappings (bounds), only the keys that differ."""
    if not (isinstance(was, dict) and isinstance(now, dict)):
        return str(was), str(now)
    keys = [key for key in dict.fromkeys([*was, *now]) if was.get(key) != now.get(key)]
    return tuple(", ".join(f"{key}={side.get(key)}" for key in keys) for side in (was, now))  # type: ignore[return-value]


def _keys_text(keys) -> str:
    pairs = [row.key for row in keys.rows] if isinstance(keys, Document) else list(keys)
    text = ", ".join(f"{adapter} {config}" for adapter, config in pairs[:8])
    return (text + (f" and {len(pairs) - 8} more" if len(pairs) > 8 else "")) or "none"


def _nothing_compared(old: Document, new: Document) -> str:
    return (
        f"{old.source} and {new.source} share no configuration, so nothing was compared "
        f"({old.source}: {_keys_text(old)}; {new.source}: {_keys_text(new)})"
    )


def _skipped_entry(document: Document, row: Row) -> dict | None:
    """The entry of `document`'s skipped list that covers `row`'s configuration (an entry
    without a config covers the whole framework), or None."""
    for entry in document.skipped:
        if entry.get("adapter") == row.adapter and entry.get("config") in (None, row.config):
            return entry
    return None
