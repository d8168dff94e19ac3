"""Where examples keep their stores, and how none is ever left behind.

Every example gets a fresh work directory (the framework's store, the effect sink), on tmpfs
(/dev/shm) when there is one. A `Session` removes its directory on every way out: a normal end,
a violation, an adapter failure, an interrupt, SIGTERM. Only a bridge killed by SIGKILL cannot
clean up after itself, so a directory's name carries its owner, the bridge's pid and that
process's start time, and `sweep()`, run when a `fuzz` or `profile` run starts, removes the
directories whose owner is gone (the start time tells a reused pid from the owner). A command
ended by a signal also removes its own with `remove_owned()`: the signal may have landed between
a directory's creation and its session, or inside the removal itself.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

PREFIX = "pymc-resume-"
_OWNED = re.compile(rf"^{re.escape(PREFIX)}(\d+)-(\d+)-")


def default_workroot() -> str | None:
    """Where examples keep their stores: tmpfs (/dev/shm) when there is one, else the temp dir.

    The contract's crashes are process crashes (SIGKILL): what a process wrote survives it in
    the page cache, fsync or not, so a memory-backed directory tests the same durability while
    sparing a shared disk thousands of fsyncs.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return str(shm)
    return None


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), or None if it is gone (a
    zombie is gone too: it has ended, only its exit status waits to be read, as a SIGKILLed
    owner's does until its parent reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name in parentheses may hold spaces: the fields after it are fixed.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _owner_prefix() -> str:
    pid = os.getpid()
    return f"{PREFIX}{pid}-{_start_time(pid) or 0}-"


def make_workdir(root: str | Path | None = None) -> Path:
    """A fresh directory named after this process (see the module docstring)."""
    return Path(tempfile.mkdtemp(prefix=_owner_prefix(), dir=root or default_workroot()))


def remove_owned(root: str | Path | None = None) -> list[Path]:
    """Remove every work directory this process made that is still there; returns what was
    removed. Only for a command that is ending: a session still open would lose its store."""
    folder = Path(root or default_workroot() or tempfile.gettempdir())
    prefix = _owner_prefix()
    try:
        owned = [entry for entry in folder.iterdir() if entry.name.startswith(prefix) and entry.is_dir()]
    except OSError:
        return []
    for entry in owned:
        shutil.rmtree(entry, ignore_errors=True)
    return owned


def sweep(root: str | Path | None = None) -> list[Path]:
    """Remove the work directories whose owner process is gone; returns what was removed."""
    folder = Path(root or default_workroot() or tempfile.gettempdir())
    removed: list[Path] = []
    if _start_time(os.getpid()) is None:  # no /proc: no way to tell a live owner
        return removed
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _OWNED.match(entry.name)
        if match is None or not entry.is_dir():
            continue
        pid, started = int(match[1]), int(match[2])
        if _start_time(pid) == started:
            continue  # the owner is running
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed
