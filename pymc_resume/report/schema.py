"""The profile document's schema: every key `report`, `diff` and `profile --baseline` read, with
its type, its range and its size, checked before anything in a document is used.

A profile JSON may come from anyone (a baseline kept in a repository, a file attached to a bug
report), so it is read as data from a stranger: `validate` returns a clean copy in which every
value has the type and the size the readers expect, or raises `SchemaError` naming the first
value that breaks a rule by its path (`profiles[0].clauses.liveness.replays.of`).

Unknown keys are tolerated and dropped: a profile written by a newer pymc-resume (which may
record more) can still be read and compared by an older one, and nothing the schema does not
name ever reaches the page or a comparison. What the readers do rely on is refused when it is
wrong; in particular a cell for an id this version's contract does not have is refused, never
dropped, since dropping it would hide a verdict. `hosting` (where a profile's time went) is
known and not read.

The schema is written with a few combinators (`record`, `list_of`, `map_of`, `text`, `count`,
...): each is a function `check(value, where) -> clean value`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from pymc_resume.model.contract import CLAUSE_IDS, VERDICTS

MAX_TEXT = 50_000  # characters of a reason, a note, a framework call
MAX_NAME = 500  # characters of a name: a framework, a version, a configuration, a variant
MAX_ROWS = 2_000  # profiles (and skipped entries) in one document
MAX_STEPS = 1_000  # steps of a repro's trace (a repro file allows 200)
MAX_THREADS = 64  # threads in one store summary (as a repro allows)
MAX_EVENTS = 100_000  # sink events observed over one repro
MAX_NOTES = 10_000
MAX_ENTRIES = 256  # operations, variants of one operation, adapter options, bounds keys
MAX_COUNT = 10**15  # examples, scenarios, fires, replays
MAX_SECONDS = 10.0**9
MAX_SEED_DIGITS = 40
SURROGATE = re.compile("[\ud800-\udfff]")  # JSON's \ud800 escapes: not text, cannot be written
STAGE_KEY = re.compile(r"-?[0-9]{1,9}")

Check = Callable[[Any, str], Any]


class SchemaError(ValueError):
    """A document that breaks a rule: `where` is the path of the value, the message says why."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}" if where else problem)


def shown(value: object) -> str:
    """A short description of a value for an error message."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "...")
    text = repr(value)
    return text if len(text) <= 40 else f"a number of {len(text)} digits"


def _at(where: str, key: object) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    name = str(key)
    if not re.fullmatch(r"[\w.:/+-]{1,64}", name):
        name = shown(name)
    return f"{where}.{name}" if where else name


# -- scalars -----------------------------------------------------------------------------------


def text(limit: int = MAX_TEXT) -> Check:
    def check(value, where):
        if not isinstance(value, str):
            raise SchemaError(where, f"expected text, got {shown(value)}")
        if len(value) > limit:
            raise SchemaError(where, f"text of {len(value):,} characters, more than the {limit:,} allowed")
        if SURROGATE.search(value):
            raise SchemaError(where, "text with a lone surrogate (\\ud800-\\udfff), which no file can hold")
        return value

    return check


def integer(low: int, high: int) -> Check:
    def check(value, where):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(where, f"expected a whole number, got {shown(value)}")
        if not low <= value <= high:
            raise SchemaError(where, f"{shown(value)} is out of range ({low:,} to {high:,})")
        return value

    return check


def count(limit: int = MAX_COUNT) -> Check:
    return integer(0, limit)


def seconds() -> Check:
    def check(value, where):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(where, f"expected a number of seconds, got {shown(value)}")
        if not (math.isfinite(value) and 0 <= value <= MAX_SECONDS):
            raise SchemaError(where, f"{shown(value)} is out of range (0 to {MAX_SECONDS:,.0f} seconds)")
        return value

    return check


def seed() -> Check:
    bound = 10**MAX_SEED_DIGITS
    return integer(-bound, bound)


def boolean() -> Check:
    def check(value, where):
        if not isinstance(value, bool):
            raise SchemaError(where, f"expected true or false, got {shown(value)}")
        return value

    return check


def one_of(*choices: str) -> Check:
    def check(value, where):
        if not isinstance(value, str) or value not in choices:
            raise SchemaError(where, f"expected one of {', '.join(choices)}, got {shown(value)}")
        return value

    return check


def scalar() -> Check:
    """A JSON scalar as a value of the workflow or an adapter option: text, a number, true or
    false, null."""
    words, whole = text(MAX_NAME), integer(-MAX_COUNT, MAX_COUNT)

    def check(value, where):
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            return whole(value, where)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise SchemaError(where, f"{shown(value)} is not a finite number")
            return value
        if isinstance(value, str):
            return words(value, where)
        raise SchemaError(where, f"expected text, a number, true, false or null, got {shown(value)}")

    return check


def stage_key() -> Check:
    """A key that names a stage: a whole number written as text (JSON keys are text)."""

    def check(value, where):
        if not isinstance(value, str) or not STAGE_KEY.fullmatch(value):
            raise SchemaError(where, f"expected a stage number as a key, got {shown(value)}")
        return value

    return check


# -- combinators -------------------------------------------------------------------------------


def nullable(inner: Check) -> Check:
    return lambda value, where: None if value is None else inner(value, where)


def either(*checks: Check) -> Check:
    """The first of `checks` the value passes (the error of the last one otherwise)."""

    def check(value, where):
        for i, inner in enumerate(checks):
            try:
                return inner(value, where)
            except SchemaError:
                if i == len(checks) - 1:
                    raise
        raise AssertionError("either() needs a check")

    return check


def ignored(value, where):
    """A key the schema knows and no reader reads: accepted as it is, never kept."""
    return None


def list_of(item: Check, limit: int) -> Check:
    def check(value, where):
        if not isinstance(value, list):
            raise SchemaError(where, f"expected a list, got {shown(value)}")
        if len(value) > limit:
            raise SchemaError(where, f"a list of {len(value):,} entries, more than the {limit:,} allowed")
        return [item(entry, _at(where, i)) for i, entry in enumerate(value)]

    return check


def map_of(key: Check, item: Check, limit: int = MAX_ENTRIES) -> Check:
    def check(value, where):
        if not isinstance(value, dict):
            raise SchemaError(where, f"expected an object, got {shown(value)}")
        if len(value) > limit:
            raise SchemaError(where, f"an object of {len(value):,} keys, more than the {limit:,} allowed")
        return {key(k, where): item(v, _at(where, k)) for k, v in value.items()}

    return check


REQUIRED = object()  # a field's default: the key must be there
ABSENT = object()  # a field's default: left out of the clean record when missing


def field(check: Check, default: object = ABSENT) -> tuple[Check, object]:
    """A key of a record: its check and, when it may be missing, what the clean record holds
    then (`ABSENT`: nothing; a list or dict type: a new empty one; else the value)."""
    return check, default


def required(check: Check) -> tuple[Check, object]:
    return check, REQUIRED


def record(**fields: tuple[Check, object]) -> Check:
    """An object with these keys, each checked; unknown keys are dropped."""

    def check(value, where):
        if not isinstance(value, dict):
            raise SchemaError(where, f"expected an object, got {shown(value)}")
        clean = {}
        for name, (inner, default) in fields.items():
            if name in value:
                kept = inner(value[name], _at(where, name))
                if inner is not ignored:
                    clean[name] = kept
            elif default is REQUIRED:
                raise SchemaError(where, f"missing key {name!r}")
            elif default in (list, dict):
                clean[name] = default()  # type: ignore[operator]
            elif default is not ABSENT:
                clean[name] = default
        return clean

    return check


# -- the profile document ----------------------------------------------------------------------

NAME, WORDS = text(MAX_NAME), text()
STAGE = integer(-10, 10**6)
STEP_NUMBER = integer(0, MAX_STEPS)

STEP = record(
    action=required(NAME),
    thread=field(integer(0, 10**6)),
    crash=field(nullable(record(stage=required(STAGE), when=required(NAME)))),
    client=field(nullable(scalar())),
    value=field(scalar()),
    values=field(nullable(list_of(scalar(), MAX_THREADS))),
    window=field(nullable(scalar())),
    order=field(nullable(list_of(integer(0, MAX_THREADS), MAX_THREADS))),
    checkpoint=field(nullable(scalar())),
    intent=field(nullable(NAME)),
    variant=field(nullable(NAME)),
)
OUTCOME = record(
    status=field(NAME, "?"), detail=field(nullable(either(scalar(), WORDS))), by=field(nullable(NAME))
)
STORE = record(  # a thread's store after a step (`bridge/judging/session.py` store_summary)
    checkpoints=required(count()),
    pc=required(nullable(STAGE)),  # null: no checkpoint yet
    stage=required(nullable(STAGE)),
    run=required(NAME),
    inputs=field(nullable(map_of(stage_key(), scalar(), MAX_ENTRIES)), dict),
)
EVENT = record(
    op=field(nullable(NAME)),
    kind=field(NAME, ""),
    thread=required(integer(0, 10**6)),
    stage=required(STAGE),
    role=field(nullable(NAME)),
    key=field(nullable(either(scalar(), WORDS))),
    applied=field(boolean(), False),
)
OBSERVED = record(
    stores=field(list_of(list_of(STORE, MAX_THREADS), MAX_STEPS + 1), list),
    events=field(list_of(EVENT, MAX_EVENTS), list),
    threads=field(ignored),  # the end state: what the judge read, not drawn
    sink=field(ignored),
)
CELL = record(
    verdict=required(one_of(*VERDICTS)),
    reason=field(nullable(WORDS), ""),
    trace=field(nullable(list_of(STEP, MAX_STEPS))),
    repro=field(nullable(WORDS)),
    pytest=field(nullable(WORDS)),
    notes=field(list_of(WORDS, MAX_NOTES), list),
    variants=field(list_of(NAME, MAX_ENTRIES), list),
    repro_steps=field(nullable(count())),
    first_failure=field(nullable(record(examples=required(count()), seconds=required(seconds())))),
    replays=field(nullable(record(reproduced=required(count()), of=required(count())))),
    outcomes=field(nullable(list_of(nullable(list_of(OUTCOME, MAX_THREADS)), MAX_STEPS))),
    violated_at=field(nullable(either(STEP_NUMBER, one_of("drain")))),
    observed=field(nullable(OBSERVED)),
)


def clauses(value, where):
    """A cell for every contract id and for nothing else; null is an operations table alone."""
    if value is None:
        raise SchemaError(where, "null: the profile judged nothing (an operations table only)")
    if not isinstance(value, dict):
        raise SchemaError(where, f"expected an object, got {shown(value)}")
    unknown = [key for key in value if key not in CLAUSE_IDS]
    if unknown:
        raise SchemaError(_at(where, unknown[0]), "not an id of this pymc-resume's contract")
    missing = [cid for cid in CLAUSE_IDS if cid not in value]
    if missing:
        raise SchemaError(
            where, f"no cell for {missing[0]} (a cell is needed for each of {len(CLAUSE_IDS)} ids)"
        )
    return {cid: CELL(value[cid], _at(where, cid)) for cid in CLAUSE_IDS}


VARIANT = record(
    name=required(NAME),
    call=field(WORDS, ""),
    docs=field(WORDS, ""),
    intents=field(list_of(NAME, MAX_ENTRIES)),
)
EFFECTS = record(
    fires=field(count()),
    applications=field(count()),
    keyed_fires=field(count()),
    keyed_applications=field(count()),
    hidden_refires=field(count()),
    hidden_refire_examples=field(list_of(WORDS, MAX_NOTES), list),
    example_keys=field(list_of(WORDS, MAX_NOTES), list),
    key=field(nullable(WORDS)),
    why=field(nullable(WORDS)),
)
PROFILE = record(
    adapter=required(NAME),
    version=required(NAME),
    config=required(NAME),
    adapter_spec=field(nullable(WORDS)),
    adapter_options=field(nullable(map_of(NAME, scalar())), dict),
    operations=field(map_of(NAME, WORDS), dict),
    variants=field(map_of(NAME, list_of(VARIANT, MAX_ENTRIES)), dict),
    clauses=required(clauses),
    notes=field(list_of(WORDS, MAX_NOTES), list),
    effects=field(nullable(EFFECTS)),
    scenarios=field(count(), 0),
    examples=field(count(), 0),
    seconds=field(seconds(), 0),
    error=field(nullable(WORDS)),
    stopped=field(nullable(WORDS)),
    finished=field(boolean(), True),
    hosting=field(ignored),  # hosts started, calls, the bridge's CPU: where the time went
)
SKIPPED = record(
    adapter=required(NAME),
    config=field(nullable(NAME)),
    reason=field(nullable(WORDS), ""),
    install=field(nullable(WORDS)),
)
BOUNDS = map_of(NAME, either(scalar(), list_of(scalar(), MAX_ENTRIES)))
BUDGET = record(
    examples=field(count()),
    steps=field(count()),
    max_seconds=field(nullable(seconds())),
    shrink_seconds=field(nullable(seconds())),
    shrink=field(boolean()),
)
DOCUMENT = record(
    profiles=required(list_of(PROFILE, MAX_ROWS)),
    skipped=field(nullable(list_of(SKIPPED, MAX_ROWS)), list),
    bounds=field(nullable(BOUNDS)),
    seed=field(nullable(seed())),
    examples=field(nullable(count())),
    budget=field(nullable(BUDGET)),
    pymc_resume_version=field(nullable(NAME)),
)


def validate(data: object) -> dict:
    """A clean copy of a profile document (see the module docstring); SchemaError otherwise."""
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), list):
        raise SchemaError("", "not a profile document (no 'profiles' list; write one with profile --json)")
    document = DOCUMENT(data, "")
    document["skipped"] = document["skipped"] or []
    return document
