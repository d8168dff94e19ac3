"""States as JSON data and back, exactly: the tagged encoding of a JSON trace's `data`.

A trace's rows carry each state twice: `state`, its repr (for reading), and `data`, the state as
JSON that loads back to an equal state of the same types (for `explore --replay-trace`). JSON has
no tuple, set or class, so every container is tagged, as an object with one key:

| Python value                                   | JSON                                            |
| ---------------------------------------------- | ----------------------------------------------- |
| None, bool, int, str, finite float             | itself                                          |
| tuple, list                                    | `{"tuple": [...]}`, `{"list": [...]}`           |
| frozenset, set                                 | `{"frozenset": [...]}`, `{"set": [...]}`        |
| dict                                           | `{"dict": [[key, value], ...]}`                 |
| named tuple, attrs or dataclass instance       | `{"class": "module:Qualname", "fields": {...}}` |
| enum member                                    | `{"enum": "module:Qualname", "name": "MEMBER"}` |

A class defined in a model file loaded by path is named by the file's stem (`poll:State`), not by
the module name the file was loaded under (which carries a hash of its path): the trace replays
after the file is copied elsewhere, or loaded as `poll:factory`.

A bare JSON array or an untagged object is never written, so reading is unambiguous. Set members
are written in a fixed order (by their JSON text), so equal states give equal files.

Loading builds classes only from the model's own module tree (`ModelClasses`: the module that
defines the model's class and the modules of its top-level package), among modules already
loaded, looked up with `vars()` (no import, no module `__getattr__`), and only plain data classes
(named tuples, attrs classes, dataclasses, enums) built from their fields: a trace file can name
a class, never make the reader import or run anything else. A state with any other part (a
class from elsewhere, bytes, a float that is not finite) has no `data`; `encoded` also checks
that the data loads back equal, so a row with `data` always replays.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
from types import ModuleType
from typing import cast

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.explore.store.persisted import ATTRS, DATACLASS, ENUM, NAMED_TUPLE, plain_kind
from pymc_resume.explore.target import FILE_MODULE_PREFIX, is_file_module

_SEQUENCES = {"tuple": tuple, "list": list}
_SETS = {"frozenset": frozenset, "set": set}


class StateDataError(BadInput):
    """A state's JSON data that does not load: the message says where and why."""


class _NotJsonable(Exception):
    pass


def _fields(cls: type, kind: str) -> list[tuple[str, str]]:
    """(attribute, constructor argument) for each field a plain class is built from."""
    if kind == NAMED_TUPLE:
        return [(name, name) for name in cls._fields]  # type: ignore[attr-defined]  # a named tuple's
    if kind == ATTRS:
        return [(field.name, field.alias) for field in attrs.fields(cls) if field.init]
    return [(field.name, field.name) for field in dataclasses.fields(cls) if field.init]  # type: ignore[arg-type]


def _class_name(cls: type) -> str:
    return f"{public_module(cls.__module__)}:{cls.__qualname__}"


def public_module(name: str) -> str:
    """A module's name as a trace records it: a model file loaded by path is its file's stem
    (`explore path/to/poll.py:factory` loads it as `pymc_resume_model_poll_<hash of the
    path>`), so that a trace replays after the file moves, or is loaded as `poll:factory`."""
    if not is_file_module(name):
        return name
    return name[len(FILE_MODULE_PREFIX) :].rpartition("_")[0] or name


def _encode(value: object) -> object:
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]  # a float
            raise _NotJsonable
        return value
    if kind is tuple or kind is list:
        return {kind.__name__: [_encode(item) for item in value]}  # type: ignore[attr-defined]
    if kind is frozenset or kind is set:
        items = [_encode(item) for item in value]  # type: ignore[attr-defined]
        items.sort(key=lambda item: json.dumps(item, sort_keys=True))
        return {kind.__name__: items}
    if kind is dict:
        return {"dict": [[_encode(key), _encode(item)] for key, item in value.items()]}  # type: ignore[attr-defined]
    plain = plain_kind(kind)
    if plain == ENUM:
        return {"enum": _class_name(kind), "name": value.name}  # type: ignore[attr-defined]
    if plain is None:
        raise _NotJsonable
    return {
        "class": _class_name(kind),
        "fields": {name: _encode(getattr(value, name)) for name, _ in _fields(kind, plain)},
    }


class ModelClasses:
    """The plain classes a state's data may name: those of the model's own module tree."""

    def __init__(self, model: object) -> None:
        module = type(model).__module__
        self.root = module.partition(".")[0]
        # The model's own module, under the name traces give it (`public_module`).
        self.module, self.public = module, public_module(module)

    def allowed(self, module_name: str) -> bool:
        return module_name == self.root or module_name.startswith(self.root + ".")

    def resolve(self, name: object, where: str) -> type:
        if not isinstance(name, str) or name.count(":") != 1:
            raise StateDataError(f"{where}: a class is named as 'module:Qualname', got {name!r}")
        module_name, qualname = name.split(":")
        if module_name == self.public:  # the model's own module, wherever it was loaded from
            module_name = self.module
        if not self.allowed(module_name):
            raise StateDataError(
                f"{where}: class {name} is not defined by the model's own modules ({self.root})"
            )
        module = sys.modules.get(module_name)
        if not isinstance(module, ModuleType):
            raise StateDataError(f"{where}: class {name}: its module is not loaded")
        found: object = module
        for part in qualname.split("."):
            try:
                found = vars(found).get(part)  # vars(), not getattr(): no __getattr__ runs
            except TypeError:
                found = None
            if found is None:
                raise StateDataError(f"{where}: class {name} does not exist")
        if not isinstance(found, type) or plain_kind(found) is None:
            raise StateDataError(f"{where}: {name} is not a named tuple, attrs class, dataclass or enum")
        return found


def _decode(data: object, classes: ModelClasses, where: str) -> object:
    if data is None or type(data) in (bool, int, str):
        return data
    if type(data) is float:
        if not math.isfinite(data):
            raise StateDataError(f"{where}: {data!r} is not a value a state holds")
        return data
    if not isinstance(data, dict):
        raise StateDataError(
            f"{where}: expected a value or a tagged object, got a JSON {type(data).__name__}"
        )
    tags = sorted(data)
    if len(tags) == 1 and tags[0] in (*_SEQUENCES, *_SETS, "dict"):
        tag = tags[0]
        items = data[tag]
        if not isinstance(items, list):
            raise StateDataError(f"{where}.{tag}: expected an array, got {type(items).__name__}")
        if tag == "dict":
            built = {}
            for index, pair in enumerate(items):
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise StateDataError(f"{where}.dict[{index}]: expected a [key, value] pair")
                key = _decode(pair[0], classes, f"{where}.dict[{index}][0]")
                try:
                    built[key] = _decode(pair[1], classes, f"{where}.dict[{index}][1]")
                except TypeError:
                    raise StateDataError(f"{where}.dict[{index}]: an unhashable key") from None
            return built
        parts = [_decode(item, classes, f"{where}.{tag}[{index}]") for index, item in enumerate(items)]
        if tag in _SEQUENCES:
            return _SEQUENCES[tag](parts)
        try:
            return _SETS[tag](parts)
        except TypeError:
            raise StateDataError(f"{where}.{tag}: an unhashable member") from None
    if tags == ["enum", "name"]:
        cls = classes.resolve(data["enum"], where)
        members = cast("type[enum.Enum]", cls).__members__ if plain_kind(cls) == ENUM else {}
        if data["name"] not in members:
            raise StateDataError(f"{where}: {data['enum']} has no member {data['name']!r}")
        return members[data["name"]]
    if tags == ["class", "fields"]:
        cls = classes.resolve(data["class"], where)
        kind = plain_kind(cls)
        if kind not in (NAMED_TUPLE, ATTRS, DATACLASS):
            raise StateDataError(f"{where}: {data['class']} is an enum; write it as {{'enum', 'name'}}")
        fields, given = _fields(cls, kind), data["fields"]
        if not isinstance(given, dict) or sorted(given) != sorted(name for name, _ in fields):
            raise StateDataError(
                f"{where}: {data['class']} takes the fields {[name for name, _ in fields]}, "
                f"got {sorted(given) if isinstance(given, dict) else type(given).__name__}"
            )
        arguments = {argument: _decode(given[name], classes, f"{where}.{name}") for name, argument in fields}
        try:
            return cls(*arguments.values()) if kind == NAMED_TUPLE else cls(**arguments)
        except Exception as error:
            raise StateDataError(f"{where}: {data['class']} refuses its fields: {error}") from None
    raise StateDataError(
        f"{where}: an object must have one of the tags tuple, list, frozenset, set, dict, "
        f"class+fields, enum+name; got the keys {tags}"
    )


def decode(data: object, classes: ModelClasses, where: str = "state") -> object:
    """The state `data` encodes; `StateDataError` naming `where` (and the path inside) if none."""
    try:
        return _decode(data, classes, where)
    except RecursionError:
        raise StateDataError(f"{where}: nested too deeply") from None


def _same(a: object, b: object) -> bool:
    """Equal, with the same types all the way down (1 == 1.0 == True, yet they differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def encoded(state: object, classes: ModelClasses) -> object | None:
    """`state` as tagged JSON data, or None when it holds a part that has none, or when the
    data would not load back as the same state (a class outside the model's modules)."""
    try:
        data = _encode(state)
        back = decode(json.loads(json.dumps(data)), classes)
    except (_NotJsonable, StateDataError, RecursionError, TypeError, ValueError):
        return None
    return data if _same(back, state) else None
