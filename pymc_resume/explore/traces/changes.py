"""What changed between two consecutive states of a trace, field by field, in words.

TLC prints each state of an error trace with the variables that changed marked; here a step is
the list of changed fields, e.g. `rmState[2]: 'working' -> 'prepared'`, `msgs: + ('Commit',)`.
Fields are read from named tuples, attrs and dataclass instances (by name), dicts (by key) and
plain tuples (by position, or by the names a model gives in `state_fields`). The comparison goes
down into a field while both sides have the same structure, so a change deep in a tuple is
named by its path rather than by printing the whole field; frozensets show what was added and
removed.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from pymc_resume.explore.store.stable_hash import field_names

WIDTH = 72  # longest value shown before it is cut with "..."


def shown(value) -> str:
    """A value's repr, cut to `WIDTH` characters."""
    text = repr(value)
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def _fields(value, names: Sequence[str] | None = None) -> list[tuple[str, object]] | None:
    """A structured value's (label, part) pairs, or None for a leaf. Labels carry their own
    separator: `.name`, `[key]`, `[0]`."""
    names_of_class = field_names(type(value)) or getattr(type(value), "_fields", None)
    if names_of_class:
        return [(f".{name}", getattr(value, name)) for name in names_of_class]
    if isinstance(value, Mapping):
        return [(f"[{key!r}]", part) for key, part in value.items()]
    if isinstance(value, tuple):
        if names is not None and len(names) == len(value):
            return [(f".{name}", part) for name, part in zip(names, value)]
        return [(f"[{index}]", part) for index, part in enumerate(value)]
    return None


def _diff(path: str, before, after, out: list[str]) -> None:
    if before == after:
        return
    if isinstance(before, frozenset) and isinstance(after, frozenset):
        added = sorted(map(shown, after - before))
        removed = sorted(map(shown, before - after))
        out.extend(f"{path}: + {item}" for item in added)
        out.extend(f"{path}: - {item}" for item in removed)
        return
    parts_before, parts_after = _fields(before), _fields(after)
    if (
        parts_before is None
        or parts_after is None
        or type(before) is not type(after)
        or [label for label, _ in parts_before] != [label for label, _ in parts_after]
    ):
        out.append(f"{path}: {shown(before)} -> {shown(after)}")
        return
    for (label, part_before), (_, part_after) in zip(parts_before, parts_after):
        _diff(path + label, part_before, part_after, out)


def _top(label: str) -> str:
    return label[1:] if label.startswith(".") else label


def changes(before: Hashable | None, after: Hashable, state_fields: Sequence[str] | None = None) -> list[str]:
    """The changes from `before` to `after`, one string each; for an initial state (`before`
    None), every field with its value."""
    parts_after = _fields(after, state_fields)
    if before is None:
        if parts_after is None:
            return [shown(after)]
        return [f"{_top(label)} = {shown(part)}" for label, part in parts_after]
    parts_before = _fields(before, state_fields)
    if (
        parts_before is None
        or parts_after is None
        or type(before) is not type(after)
        or [label for label, _ in parts_before] != [label for label, _ in parts_after]
    ):
        return [] if before == after else [f"state: {shown(before)} -> {shown(after)}"]
    out: list[str] = []
    for (label, part_before), (_, part_after) in zip(parts_before, parts_after):
        _diff(_top(label), part_before, part_after, out)
    return out
