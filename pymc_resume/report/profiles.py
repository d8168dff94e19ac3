"""Profile documents read back from JSON, checked before anything in them is used.

A document is what `profile --json` writes: `{"bounds", "seed", "examples", "budget",
"pymc_resume_version", "profiles": [...], "skipped": [...]}`. Each profile is one row of the
matrix: a configuration of a framework at one version, with a cell per contract id.

The files may come from anyone, so they are read as every other input from a file is
(`files.read_bounded`: a regular file only, opened without blocking, so a FIFO or a device is
refused at once), within one size limit for all the files a command reads together and a limit
on the JSON values in them (what parsing costs in memory), and checked against the one schema
(`schema.py`). A file that is not such a document is refused with one line naming the file and
what is wrong (`BadInput`, exit 2), before the command does any work.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.files import UnreadableFile, read_bounded
from pymc_resume.report.schema import SchemaError, validate

# Every profile one command reads, together. A configuration with six violated cells and their
# repros' stories takes 47 KB (tests/report/profiles/langgraph-sqlite-sync.json): 8 MiB hold 175
# such configurations, whose page (1,050 diagrams) is 11 MB.
MAX_TOTAL_BYTES = 8 * 2**20
# JSON values in them together, counted as the commas and opening brackets of the files (an upper
# bound: strings count too, an object twice): what parsing and checking cost in memory, about
# 200 MiB at the limit. A real profile, as `profile --json` indents it, counts one per 34 bytes:
# 8 MiB of it about 250,000.
MAX_TOTAL_VALUES = 1_000_000


@attrs.frozen
class Row:
    """One configuration's profile: a row of the matrix."""

    adapter: str  # the framework, as rows name it ("langgraph")
    version: str
    config: str
    source: str  # the file it was read from (or what produced it)
    data: dict  # the profile's JSON, as the schema cleaned it

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
    """A profile document: its rows and skipped entries, and the settings its run had (None
    where an older pymc-resume did not record them)."""

    source: str
    rows: tuple[Row, ...]
    skipped: tuple[dict, ...]
    bounds: dict | None  # the bounds as the run wrote them (`Bounds.as_json`)
    seed: int | None
    examples: int | None  # fuzzed examples asked per configuration
    budget: dict | None = None  # examples, steps, max_seconds, shrink_seconds, shrink
    tool_version: str | None = None  # the pymc-resume that wrote it

    @property
    def bounds_name(self) -> str | None:
        name = (self.bounds or {}).get("name")
        return name if isinstance(name, str) else None


def read_documents(paths: Iterable[str | Path]) -> list[Document]:
    """Read and check profile JSON files, refused in one line before any is used when one is
    not a regular file, is not a profile document, or all of them together are too large."""
    contents, total, values = [], 0, 0
    for path in paths:
        try:
            raw = read_bounded(path, MAX_TOTAL_BYTES, "a profile")
        except UnreadableFile as error:
            raise BadInput(str(error)) from None
        total += len(raw)
        values += raw.count(b",") + raw.count(b"[") + raw.count(b"{")
        if total > MAX_TOTAL_BYTES:
            raise BadInput(
                f"{path}: the profiles given have more than {MAX_TOTAL_BYTES:,} bytes together "
                "(the limit on the profiles one command reads)"
            )
        if values > MAX_TOTAL_VALUES:
            raise BadInput(
                f"{path}: the profiles given hold more than {MAX_TOTAL_VALUES:,} JSON values together "
                "(the limit on the profiles one command reads)"
            )
        contents.append((str(path), raw))
    return [parse_document(raw, where) for where, raw in contents]


def read_document(path: str | Path) -> Document:
    """Read and check one profile JSON file."""
    return read_documents([path])[0]


def parse_document(raw: bytes, where: str) -> Document:
    """The document in `raw`, the bytes of the file `where` (named in errors and the report)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadInput(f"{where} is not UTF-8 text (byte {error.start})") from None
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise BadInput(f"{where} is not JSON: {error}") from None
    except RecursionError:
        raise BadInput(f"{where}: JSON nested too deeply") from None
    except NotANumber as error:
        raise BadInput(f"{where} is not a profile: {error}") from None
    except ValueError:  # an integer of more digits than Python converts
        raise BadInput(f"{where}: a number has more than {sys.get_int_max_str_digits():,} digits") from None
    return document_of(data, Path(where).name)


class NotANumber(ValueError):
    """NaN, Infinity or -Infinity in a file: JSON has no such numbers, Python's parser takes them."""


def _no_constant(name: str):
    raise NotANumber(f"{name} is not a number a profile holds")


def document_of(data: object, source: str) -> Document:
    """A document from its parsed JSON (`source` names it in errors and in the report)."""
    try:
        clean = validate(data)
    except SchemaError as error:
        raise BadInput(f"{source}: {error}") from None
    rows = tuple(
        Row(profile["adapter"], profile["version"], profile["config"], source, profile)
        for profile in clean["profiles"]
    )
    return Document(
        source,
        rows,
        tuple(clean["skipped"]),
        clean.get("bounds"),
        clean.get("seed"),
        clean.get("examples"),
        clean.get("budget"),
        clean.get("pymc_resume_version"),
    )


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
