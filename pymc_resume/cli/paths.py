"""Output paths checked before any work starts, so that a long run never loses its result to a
path it cannot write at the end."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pymc_resume.errors import BadInput


def writable_file(path: str | None, option: str) -> None:
    """Raise BadInput unless a file can be written at `path` (created with its folder if
    needed). Probes by creating and removing a temporary file beside it."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise BadInput(f"{option}: {path} is a directory, not a file")
    if target.exists() and not target.is_file():
        raise BadInput(f"{option}: {path} is not a regular file")
    writable_folder(str(target.parent if str(target.parent) else "."), option, what=f"the folder of {path}")


def writable_folder(path: str | None, option: str, what: str | None = None) -> None:
    """Raise BadInput unless files can be created in the folder `path`. A folder that does not
    exist yet is not created here: its nearest existing ancestor is probed instead."""
    if path is None:
        return
    what = what or path
    folder = Path(path).absolute()
    while not folder.exists():
        if folder.parent == folder:
            break
        folder = folder.parent
    if not folder.is_dir():
        raise BadInput(f"{option}: {what} cannot be a folder ({folder} is not one)")
    try:
        handle, probe = tempfile.mkstemp(prefix=".pymc-resume-probe-", dir=folder)
    except OSError as error:
        raise BadInput(f"{option}: cannot write in {what}: {error.strerror or error}") from None
    os.close(handle)
    os.unlink(probe)
