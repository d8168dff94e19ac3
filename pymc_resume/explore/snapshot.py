"""The explorer's own checkpoints: a run killed at any moment continues from the last one.

A snapshot is taken between two levels: every partition's store (and codec tables) plus the
candidate batches waiting for the next level. It is written into a fresh folder, flushed, and
only then published by atomically replacing the `current` pointer file, so a SIGKILL at any
moment leaves either the previous snapshot or the new one, never a torn one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.files import write_atomically

FORMAT = 2  # 2: partitions keep wire-codec marks and translations
POINTER = "current"


@attrs.frozen
class Snapshot:
    run: dict  # what was being checked (opaque here; the caller checks it matches)
    depth: int
    elapsed: float  # seconds spent before this snapshot
    partitions: list[bytes]
    inbound: list[bytes]


class SnapshotError(BadInput):
    """A checkpoint folder that cannot be recovered from; the message says why."""


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())


def save(directory: str | Path, snapshot: Snapshot) -> None:
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    name = f"level-{snapshot.depth:06d}"
    folder = root / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for index, (partition, inbound) in enumerate(zip(snapshot.partitions, snapshot.inbound)):
        _write_file(folder / f"partition-{index}.pickle", partition)
        _write_file(folder / f"inbound-{index}.pickle", inbound)
    manifest = {
        "format": FORMAT,
        "run": snapshot.run,
        "depth": snapshot.depth,
        "elapsed": snapshot.elapsed,
        "partitions": len(snapshot.partitions),
    }
    _write_file(folder / "manifest.json", json.dumps(manifest, indent=2).encode())
    previous = _current_name(root)
    write_atomically(root / POINTER, name + "\n")
    if previous and previous != name:
        shutil.rmtree(root / previous, ignore_errors=True)


def _current_name(root: Path) -> str | None:
    try:
        return (root / POINTER).read_text().strip() or None
    except FileNotFoundError:
        return None


def load(directory: str | Path) -> Snapshot:
    root = Path(directory)
    name = _current_name(root)
    if name is None:
        raise SnapshotError(f"{root}: no checkpoint to recover from (no '{POINTER}' file)")
    folder = root / name
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        if manifest.get("format") != FORMAT:
            raise SnapshotError(f"{folder}: checkpoint format {manifest.get('format')}, expected {FORMAT}")
        count = manifest["partitions"]
        partitions = [(folder / f"partition-{i}.pickle").read_bytes() for i in range(count)]
        inbound = [(folder / f"inbound-{i}.pickle").read_bytes() for i in range(count)]
    except (OSError, ValueError, KeyError) as error:
        raise SnapshotError(f"{folder}: unreadable checkpoint: {error}") from None
    return Snapshot(manifest["run"], manifest["depth"], manifest["elapsed"], partitions, inbound)
