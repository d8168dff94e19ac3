"""Who holds a run lease, and whether that process is still alive.

A lease names its holder by process id and the process's start time (from /proc), so a
recycled process id is never mistaken for the holder. A holder that no longer exists, or is a
zombie (killed but not yet reaped), is dead: recovery may take its lease over. This is the
single-host equivalent of a lease with a heartbeat; a multi-host runtime would use an expiry.
"""

from __future__ import annotations

import os
from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is parenthesised and may contain spaces.
    return text[text.rindex(")") + 2 :].split()


def holder_token(pid: int | None = None) -> str:
    """This process's (or `pid`'s) lease token: "pid:start-time"."""
    pid = os.getpid() if pid is None else pid
    fields = _stat_fields(pid)
    started = fields[19] if fields else "0"  # field 22 of stat, counted after the name
    return f"{pid}:{started}"


def holder_alive(token: str) -> bool:
    """Whether the process a lease token names is still running."""
    pid_text, _, started = token.partition(":")
    fields = _stat_fields(int(pid_text))
    if fields is None:
        if not Path("/proc").is_dir():  # no procfs: fall back to a signal probe
            try:
                os.kill(int(pid_text), 0)
            except ProcessLookupError:
                return False
            return True
        return False
    return fields[0] not in ("Z", "X") and fields[19] == started
