"""Writing results so that an interrupted run never leaves a half-written file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_atomically(path: str | Path, text: str) -> None:
    """Write to a temporary file beside `path`, flush it to disk, then rename it over `path`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, data: object) -> None:
    write_atomically(path, json.dumps(data, indent=2) + "\n")
