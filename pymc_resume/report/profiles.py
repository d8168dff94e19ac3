"""Profile documents read back from JSON, checked before anything in them is used.

A document is what `profile --json` writes: `{"bounds", "seed", "examples", "profiles": [...],
"skipped": [...]}`. Each profile is one row of the matrix: a configuration of a framework at one
version, with a cell per contract id. A file that is not such a document is refused with one
line naming the file and what is wrong (`BadInput`, exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.model.contract import CLAUSE_IDS, VERDICTS

MAX_BYTES = 64 * 2**20  # a profile of every framework with its repros' stories is far smaller


@attrs.frozen
class Row:
    """One configuration's profile: a row of the matrix."""

    adapter: str  # the framework, as rows name it ("langgraph")
    version: str
    config: str
    source: str  # the file it was read from (or what produced it)
    data: dict  # the profile's JSON as written

    @property
    def key(self) -> tuple[str, str]:
        """What a row is matched by across documents: the framework and its configuration."""
        return (self.adapter, self.config)

    @property
    def options(self) -> dict:
        return dict(self.data.get("adapter_options") or {})

    def cell(self, clause_id: str) -> dict:
        return self.data["clauses"][clause_id]

    def verdict(self, clause_id: str) -> str:
        return self.cell(clause_id)["verdict"]

    @property
    def name(self) -> str:
        """ "langgraph sqlite/sync (langgraph 1.2.9)", with non-default options."""
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.options.items()) if v not in (None, False))
        extra = f" [{options}]" if options else ""
        return f"{self.adapter} {self.config} ({self.version}){extra}"


@attrs.frozen
class Document:
    source: str
    rows: tuple[Row, ...]
    skipped: tuple[dict, ...]
    bounds: str | None
    seed: int | None
    examples: int | None


def read_document(path: str | Path) -> Document:
    """Read and check one profile JSON file."""
    where = str(path)
    try:
        with open(path, "rb") as stream:
            raw = stream.read(MAX_BYTES + 1)
    except OSError as error:
        raise BadInput(f"{where}: cannot read it: {error.strerror or error}") from None
    if len(raw) > MAX_BYTES:
        raise BadInput(f"{where}: larger than {MAX_BYTES // 2**20} MiB, not a profile")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BadInput(f"{where} is not JSON: {error}") from None
    except RecursionError:
        raise BadInput(f"{where}: JSON nested too deeply") from None
    return document_of(data, Path(where).name)


def document_of(data: object, source: str) -> Document:
    """A document from its parsed JSON (`source` names it in errors and in the report)."""
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), list):
        raise BadInput(
            f"{source}: not a profile document (no 'profiles' list; write one with profile --json)"
        )
    rows = tuple(_row(profile, source, i) for i, profile in enumerate(data["profiles"]))
    skipped = data.get("skipped") or []
    if not isinstance(skipped, list) or not all(isinstance(e, dict) and "adapter" in e for e in skipped):
        raise BadInput(f"{source}: 'skipped' must be a list of entries naming an adapter")
    bounds = data.get("bounds")
    return Document(
        source,
        rows,
        tuple(skipped),
        bounds.get("name") if isinstance(bounds, dict) else None,
        data.get("seed"),
        data.get("examples"),
    )


def _row(profile: object, source: str, index: int) -> Row:
    where = f"{source}: profiles[{index}]"
    if not isinstance(profile, dict):
        raise BadInput(f"{where} is not an object")
    for key in ("adapter", "version", "config"):
        if not isinstance(profile.get(key), str):
            raise BadInput(f"{where} has no {key!r} string")
    clauses = profile.get("clauses")
    if clauses is None:
        raise BadInput(
            f"{where} ({profile['adapter']} {profile['config']}) judged nothing: an operations table only"
        )
    if not isinstance(clauses, dict) or set(clauses) != set(CLAUSE_IDS):
        raise BadInput(f"{where}: 'clauses' must have a cell for each of the {len(CLAUSE_IDS)} contract ids")
    for clause_id, cell in clauses.items():
        if not isinstance(cell, dict) or cell.get("verdict") not in VERDICTS:
            raise BadInput(f"{where}: {clause_id} has no verdict among {', '.join(VERDICTS)}")
        if not isinstance(cell.get("reason") or "", str):
            raise BadInput(f"{where}: {clause_id}'s reason is not text")
    return Row(profile["adapter"], profile["version"], profile["config"], source, profile)


def rows_of(documents: list[Document]) -> list[Row]:
    """Every row of every document, in order."""
    return [row for document in documents for row in document.rows]


def grouped(rows: list[Row]) -> list[list[Row]]:
    """Rows of the same framework and configuration side by side (versions, runs), in the
    order each configuration first appears."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault(row.key, []).append(row)
    return list(groups.values())
