"""Where and when a benchmark ran: the commit, the command, the machine and how busy it was.

Every bench script puts `started(argv)` in its JSON document and, when it is done, `finished`
on it; `bench/measurements.py` prints both next to each figure, so that a reader of
docs/measurements.md knows which main and which machine state a figure comes from."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    try:
        run = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return run.stdout.strip() if run.returncode == 0 else ""


def _script() -> str:
    """The running script as a path from the repository's top, as a reader would type it."""
    script = Path(sys.argv[0]).resolve()
    return script.relative_to(ROOT).as_posix() if script.is_relative_to(ROOT) else sys.argv[0]


def started(argv: list[str] | None = None) -> dict:
    """The run's provenance as it starts: the commit (and whether the tree had changes), the
    command as typed, the date, the machine (cores, Python) and its load average."""
    argv = sys.argv[1:] if argv is None else argv
    return {
        "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "command": " ".join(["python", _script(), *argv]),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_at_start": round(os.getloadavg()[0], 2),
    }


def finished(provenance: dict, seconds: float) -> dict:
    """`provenance` with the run's wall time and the load average at its end."""
    return {**provenance, "seconds": round(seconds, 1), "load_at_end": round(os.getloadavg()[0], 2)}
