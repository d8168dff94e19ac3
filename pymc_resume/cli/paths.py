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
    try:
        _writable_file(path, option)
    except OSError as error:  # a name too long, a loop of links, ...
        raise BadInput(f"{option}: cannot write {path}: {error.strerror or error}") from None


def _writable_file(path: str, option: str) -> None:
    target = Path(path)
    if len(os.fsencode(target.absolute())) >= os.pathconf("/", "PC_PATH_MAX"):
        raise BadInput(f"{option}: {path} is longer than the file system allows")
    if target.name and len(os.fsencode(target.name)) > os.pathconf("/", "PC_NAME_MAX"):
        raise BadInput(f"{option}: {path} has a name longer than the file system allows")
    if target.is_dir():
        raise BadInput(f"{option}: {path} is a directory, not a file")
    if target.exists() and not target.is_file():
        raise BadInput(f"{option}: {path} is not a regular file")
    _writable_folder(str(target.parent), option, f"the folder of {path}")


def writable_folder(path: str | None, option: str, what: str | None = None) -> None:
    """Raise BadInput unless files can be created in the folder `path`. A folder that does not
    exist yet is not created here: its nearest existing ancestor is probed instead."""
    if path is None:
        return
    try:
        _writable_folder(path, option, what or path)
    except OSError as error:
        raise BadInput(f"{option}: cannot write in {what or path}: {error.strerror or error}") from None


def _writable_folder(path: str, option: str, what: str) -> None:
    folder = Path(path).absolute()
    missing = []
    while not folder.exists():
        if folder.parent == folder:
            break
        missing.append(folder.name)
        folder = folder.parent
    if not folder.is_dir():
        raise BadInput(f"{option}: {what} cannot be a folder ({folder} is not one)")
    longest = os.pathconf(folder, "PC_NAME_MAX")
    if any(len(os.fsencode(name)) > longest for name in missing):
        raise BadInput(f"{option}: {what} has a name longer than the file system allows")
    try:
        handle, probe = tempfile.mkstemp(prefix=".pymc-resume-probe-", dir=folder)
    except OSError as error:
        raise BadInput(f"{option}: cannot write in {what}: {error.strerror or error}") from None
    os.close(handle)
    os.unlink(probe)
