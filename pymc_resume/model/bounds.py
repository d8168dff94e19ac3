"""Bounds of an exploration, read from a named TOML file.

A bound file is flat TOML::

    description = "every node kind, two processes, one crash, fork and invalid update"
    nodes = ["step", "effect", "effect-then-interrupt", "gated", "step"]
    values = 2           # valid resume values; value 1 approves a gated node
    processes = 2        # processes that run threads and deliver resumes
    resumes = 2          # resume deliveries the client may make (valid values)
    crashes = 1          # process crashes
    forks = 1            # forks (replay or edit)
    invalid_updates = 1  # schema-invalid client inputs: updates and resume values

Bundled files (the repository's `bounds/` folder, installed as `pymc_resume.bounds`) are found by
name (`small`, `default`, `paper`, `fuzz`); any other argument is a path.
"""

from __future__ import annotations

import sys
import tomllib
from importlib import resources
from pathlib import Path

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.files import UnreadableFile, read_bounded
from pymc_resume.model.workflow import NodeKind, Workflow

NODE_NAMES = tuple(kind.value for kind in NodeKind)

# name -> (smallest, largest) allowed; the upper limits keep a run finite on one machine.
NUMERIC_LIMITS = {
    "values": (1, 4),
    "processes": (1, 4),
    "resumes": (0, 6),
    "crashes": (0, 6),
    "forks": (0, 3),
    "invalid_updates": (0, 4),
}
MAX_NODES = 8
MAX_FILE_BYTES = 64 * 2**10  # a bound file is a few hundred bytes


class BoundsError(BadInput):
    """A bound file that cannot be used; the message says what is wrong and where."""


@attrs.frozen
class Bounds:
    name: str
    nodes: tuple[str, ...]
    values: int
    processes: int
    resumes: int
    crashes: int
    forks: int
    invalid_updates: int
    description: str = ""

    @property
    def workflow(self) -> Workflow:
        return Workflow.of(self.nodes)

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "nodes": list(self.nodes),
            **{key: getattr(self, key) for key in NUMERIC_LIMITS},
        }

    @classmethod
    def from_json(cls, data: dict) -> Bounds:
        """Bounds as `as_json` wrote them (for instance in an explorer checkpoint)."""
        return cls(
            name=data["name"],
            nodes=tuple(data["nodes"]),
            **{key: data[key] for key in NUMERIC_LIMITS},
        )


def bundled_names() -> list[str]:
    folder = resources.files("pymc_resume.bounds")
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_bounds(name_or_path: str) -> Bounds:
    """Read bounds by bundled name or from a TOML file path."""
    if name_or_path in bundled_names():
        source = resources.files("pymc_resume.bounds").joinpath(f"{name_or_path}.toml")
        return parse_bounds(source.read_text(encoding="utf-8"), name_or_path, f"{name_or_path}.toml")
    path = Path(name_or_path)
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name too long, or with a NUL byte
        exists = False
    if not exists:
        known = ", ".join(bundled_names())
        raise BoundsError(f"no bounds named {name_or_path!r} (bundled: {known}) and no such file")
    try:
        text = read_bounded(path, MAX_FILE_BYTES, "a bounds file").decode("utf-8")
    except UnicodeDecodeError as error:
        raise BoundsError(f"{path}: not a UTF-8 text file (byte {error.start})") from None
    except UnreadableFile as error:
        raise BoundsError(str(error)) from None
    return parse_bounds(text, path.stem, str(path))


def parse_bounds(text: str, name: str, where: str) -> Bounds:
    """Validate a bound file's text; every error names the file and the key at fault."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise BoundsError(f"{where}: not valid TOML: {error}") from None
    except ValueError:  # an integer of more digits than Python converts
        digits = sys.get_int_max_str_digits()
        raise BoundsError(f"{where}: not valid bounds: a number has more than {digits:,} digits") from None
    except RecursionError:
        raise BoundsError(f"{where}: not valid TOML: nested too deeply") from None
    return bounds_from_mapping(data, name, where)


def bounds_from_mapping(data: object, name: str, where: str) -> Bounds:
    """Validate bounds given as a mapping (a parsed bound file, or the bounds a repro or
    checkpoint records); every error names `where` and the key at fault."""
    if not isinstance(data, dict):
        raise BoundsError(f"{where}: bounds must be a table of keys, not {type(data).__name__}")
    data = {key: value for key, value in data.items() if key != "name"}  # as_json adds the name
    allowed = {"description", "nodes", *NUMERIC_LIMITS}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise BoundsError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    missing = sorted({"nodes", *NUMERIC_LIMITS} - set(data))
    if missing:
        raise BoundsError(f"{where}: missing key {missing[0]!r}")
    nodes = data["nodes"]
    if not isinstance(nodes, list) or not nodes:
        raise BoundsError(f"{where}: 'nodes' must be a non-empty list of node kinds")
    if len(nodes) > MAX_NODES:
        raise BoundsError(f"{where}: 'nodes' has {len(nodes)} entries, at most {MAX_NODES} allowed")
    for position, node in enumerate(nodes):
        if node not in NODE_NAMES:
            raise BoundsError(
                f"{where}: nodes[{position}] is {node!r}, expected one of {', '.join(NODE_NAMES)}"
            )
    numbers = {}
    for key, (low, high) in NUMERIC_LIMITS.items():
        value = data[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise BoundsError(f"{where}: {key!r} must be an integer, got {value!r}")
        if not low <= value <= high:
            raise BoundsError(f"{where}: {key!r} is {value}, must be between {low} and {high}")
        numbers[key] = value
    description = data.get("description", "")
    if not isinstance(description, str):
        raise BoundsError(f"{where}: 'description' must be a string")
    return Bounds(name=name, nodes=tuple(nodes), description=description, **numbers)
