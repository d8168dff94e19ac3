"""What a repro file may contain, checked before anything in it is used.

Repro files are shared (attached to bug reports, replayed by framework authors), so `replay`
reads files from strangers. A repro is data: every key has a type and a range, steps use only
the client actions of the contract with arguments the recorded bounds allow, sizes and counts
are bounded, and the adapter it names is resolved later only among the built-in, installed
and explicitly allowed adapters (`registry.resolve`). A file that breaks any rule is refused
with one line naming the file, the key and what is wrong.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pymc_resume.bridge.adapter import CRASH_POINTS, RACE_WINDOWS, WARM_CLIENT_IDS
from pymc_resume.errors import BadInput
from pymc_resume.files import UnreadableFile, read_bounded
from pymc_resume.model.bounds import Bounds, BoundsError, bounds_from_mapping
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.model.workflow import INVALID

FORMATS = ("pymc-resume-repro/1",)  # the versions this reader understands
MAX_BYTES = 4 * 2**20  # a repro of a few hundred steps with its observations is far smaller
MAX_STEPS = 200
MAX_REPLAY_ATTEMPTS = 20
MAX_THREADS = 64
MAX_CHECKPOINT = 1024
MAX_TEXT = 10_000  # characters of any one string (reasons, versions, adapter names)

# Keys every repro has, and the ones it may have; anything else is refused.
REQUIRED = ("format", "adapter", "bounds", "clause", "steps")
OPTIONAL = (
    "adapter_options",
    "adapter_version",
    "pymc_resume_version",
    "seed",
    "clauses",
    "violated_at",
    "outcomes",
    "observed",
    "confirmed_by_replay",
    "replay_attempts",
)

# Per action: the keys its steps carry besides "action" and "thread" ("outcome", recorded by
# the fuzzer, is always allowed and never read).
# `variant`: the operation's documented call, when the adapter declares several (adapter.py).
STEP_KEYS = {  # `client` and `order`: steps of the optional step capabilities (adapter.py)
    "start": {"crash", "client", "variant"},
    "resume": {"value", "crash", "client", "variant"},
    "resume-together": {"values", "window", "order", "variant"},
    "recover": {"crash", "client", "variant"},
    "fork": {"checkpoint", "intent", "value", "client", "variant"},
    "update": {"value", "variant"},
}
MAX_VARIANT_NAME = 64
INFORMATIONAL_STEP_KEYS = {"outcome"}


class ReproError(BadInput):
    """A repro file that cannot be replayed; the message says why."""


def read_repro(path: str | Path) -> dict:
    """Read and validate a repro file (see the module docstring)."""
    where = str(path)
    text = _read_text(Path(path), where)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReproError(f"{where} is not JSON: {error}") from None
    except ValueError:  # an integer of more digits than Python converts
        raise ReproError(f"{where}: a number has more than {sys.get_int_max_str_digits():,} digits") from None
    except RecursionError:
        raise ReproError(f"{where}: JSON nested too deeply") from None
    return validate_repro(document, where)


def _read_text(path: Path, where: str) -> str:
    """The file's text: a regular file (never a FIFO or device, which could block), of
    bounded size, in UTF-8."""
    try:
        data = read_bounded(path, MAX_BYTES, "a repro")
    except UnreadableFile as error:
        raise ReproError(str(error)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ReproError(f"{where} is not UTF-8 text (byte {error.start})") from None


def validate_repro(document: object, where: str = "repro") -> dict:
    """`document` if it is a valid repro; else ReproError naming `where`, the key and why."""
    if not isinstance(document, dict):
        raise ReproError(f"{where} is not a pymc-resume repro (a JSON object is expected)")
    if document.get("format") not in FORMATS:
        raise ReproError(
            f"{where} is not a pymc-resume repro (expected format {FORMATS[-1]!r}, "
            f"got {_short(document.get('format'))})"
        )
    for key in REQUIRED:
        if key not in document:
            raise ReproError(f"{where}: missing key {key!r}")
    unknown = sorted(set(document) - set(REQUIRED) - set(OPTIONAL), key=str)
    if unknown:
        raise ReproError(f"{where}: unknown key {_short(unknown[0])}")
    _text(document["adapter"], where, "adapter")
    for key in ("adapter_version", "pymc_resume_version"):
        if document.get(key) is not None:
            _text(document[key], where, key)
    options = document.get("adapter_options")
    if options is not None and not isinstance(options, dict):
        raise ReproError(f"{where}: 'adapter_options' must be an object")
    if len(options or {}) > 32:
        raise ReproError(f"{where}: 'adapter_options' has more than 32 entries")
    seed = document.get("seed")
    if seed is not None and not _integer(seed):
        raise ReproError(f"{where}: 'seed' must be an integer or null")
    bounds = repro_bounds(document, where)
    clause = document["clause"]
    if clause not in CLAUSE_IDS:
        raise ReproError(
            f"{where}: 'clause' is {_short(clause)}, not a contract id ({', '.join(CLAUSE_IDS)})"
        )
    clauses = document.get("clauses")
    if clauses is not None:
        if not isinstance(clauses, dict) or not set(clauses) <= set(CLAUSE_IDS):
            raise ReproError(f"{where}: 'clauses' must map contract ids to what was observed")
        for reason in clauses.values():
            _text(reason, where, "clauses")
    at = document.get("violated_at")
    if at is not None and at != "drain" and not (_integer(at) and 0 <= at < MAX_STEPS):
        raise ReproError(f"{where}: 'violated_at' must be a step index or \"drain\"")
    attempts = document.get("replay_attempts")
    if attempts is not None and not (_integer(attempts) and 1 <= attempts <= MAX_REPLAY_ATTEMPTS):
        raise ReproError(f"{where}: 'replay_attempts' must be an integer from 1 to {MAX_REPLAY_ATTEMPTS}")
    if document.get("confirmed_by_replay") not in (None, True, False):
        raise ReproError(f"{where}: 'confirmed_by_replay' must be true or false")
    validate_steps(document["steps"], bounds, where)
    return document


def repro_bounds(document: dict, where: str) -> Bounds:
    data = document["bounds"]
    name = data.get("name", "repro") if isinstance(data, dict) else "repro"
    if not isinstance(name, str) or len(name) > 200:
        raise ReproError(f"{where}: bounds 'name' must be a short string")
    try:
        return bounds_from_mapping(data, name, f"{where}: bounds")
    except BoundsError as error:
        raise ReproError(str(error)) from None


def validate_steps(steps: object, bounds: Bounds, where: str) -> None:
    """The steps are client actions a client could issue, with arguments within `bounds`: every
    step names a thread that exists (the root or an earlier fork), and only `start` names a
    thread that was not started."""
    if not isinstance(steps, list) or not steps:
        raise ReproError(f"{where}: 'steps' must be a non-empty list")
    if len(steps) > MAX_STEPS:
        raise ReproError(f"{where}: 'steps' has {len(steps)} entries, at most {MAX_STEPS}")
    end = bounds.workflow.end
    valid = set(range(1, bounds.values + 1))
    threads, started = 1, set()
    for index, step in enumerate(steps):
        at = f"{where}: steps[{index}]"
        if not isinstance(step, dict):
            raise ReproError(f"{at} must be an object")
        action = step.get("action")
        if action not in STEP_KEYS:
            raise ReproError(f"{at}: 'action' is {_short(action)}, expected one of {', '.join(STEP_KEYS)}")
        unknown = set(step) - {"action", "thread"} - STEP_KEYS[action] - INFORMATIONAL_STEP_KEYS
        if unknown:
            raise ReproError(f"{at}: unknown key {_short(sorted(unknown, key=str)[0])} for {action!r}")
        thread = step.get("thread")
        if not (_integer(thread) and 0 <= thread < min(threads, MAX_THREADS)):
            raise ReproError(
                f"{at}: 'thread' must name an existing thread (0 to {threads - 1}), got {_short(thread)}"
            )
        if action != "start" and thread not in started:
            raise ReproError(f"{at}: thread {thread} is used before it was started")
        if action == "start":
            started.add(thread)
        _check_arguments(step, action, at, end, valid, bounds)
        if action == "fork":
            threads += 1


def _check_arguments(step: dict, action: str, at: str, end: int, valid: set[int], bounds: Bounds) -> None:
    crash = step.get("crash")
    if crash is not None:
        if not isinstance(crash, dict) or set(crash) != {"stage", "when"}:
            raise ReproError(f'{at}: \'crash\' must be null or {{"stage": S, "when": W}}')
        if not (_integer(crash["stage"]) and 0 <= crash["stage"] < end):
            raise ReproError(f"{at}: crash 'stage' must be from 0 to {end - 1}")
        if crash["when"] not in CRASH_POINTS:
            raise ReproError(f"{at}: crash 'when' must be one of {', '.join(CRASH_POINTS)}")
    # `_integer` first: True == 1, so a boolean would pass a membership test as value 1.
    value = step.get("value")
    if action in ("resume", "update") and not (_integer(value) and value in valid | {INVALID}):
        raise ReproError(f"{at}: 'value' must be one of {sorted(valid)} or {INVALID} (schema-invalid)")
    if action == "resume-together":
        values = step.get("values")
        if not (
            isinstance(values, list)
            and 2 <= len(values) <= max(2, bounds.processes)
            and all(_integer(v) and v in valid for v in values)
        ):
            raise ReproError(
                f"{at}: 'values' must list 2 to {max(2, bounds.processes)} values from {sorted(valid)}"
            )
        if step.get("window") not in (None, *RACE_WINDOWS):
            raise ReproError(f"{at}: 'window' must be null or one of {', '.join(RACE_WINDOWS)}")
        order = step.get("order")
        if order is not None and not (isinstance(order, list) and sorted(order) == list(range(len(values)))):
            raise ReproError(f"{at}: 'order' must be null or a permutation of 0..{len(values) - 1}")
    variant = step.get("variant")
    if variant is not None and not (
        isinstance(variant, str)
        and 0 < len(variant) <= MAX_VARIANT_NAME
        and variant.replace("-", "").isalnum()
        and variant.isascii()
    ):
        raise ReproError(f"{at}: 'variant' must be null or a variant's name (short kebab-case)")
    if step.get("client") not in (None, *WARM_CLIENT_IDS):
        raise ReproError(f"{at}: 'client' must be null or one of {', '.join(WARM_CLIENT_IDS)}")
    if action == "fork":
        checkpoint = step.get("checkpoint")
        if not (_integer(checkpoint) and 0 <= checkpoint < MAX_CHECKPOINT):
            raise ReproError(f"{at}: 'checkpoint' must be a checkpoint index")
        intent, value = step.get("intent"), step.get("value")
        if intent not in ("replay", "edit"):
            raise ReproError(f'{at}: \'intent\' must be "replay" or "edit"')
        if intent == "replay" and value is not None:
            raise ReproError(f"{at}: a replay fork takes no 'value'")
        if intent == "edit" and not (_integer(value) and value in valid):
            raise ReproError(f"{at}: an edit fork's 'value' must be one of {sorted(valid)}")


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: object, where: str, key: str) -> None:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ReproError(f"{where}: {key!r} must be a string of at most {MAX_TEXT:,} characters")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
