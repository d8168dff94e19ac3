"""Resident memory of the run's processes, read cheaply from /proc (Linux); 0 where unavailable.

`--max-memory` is a budget for the whole run: the coordinator and every worker, each counted at
its peak (`VmHWM`), as the JSON result's `peak_rss_mib` total counts them.
"""

from __future__ import annotations

import ctypes
import os
import signal

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_PR_SET_PDEATHSIG = 1


def resident_bytes() -> int:
    """This process's resident memory now."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def peak_bytes(pid: int | str = "self") -> int:
    """The peak resident memory of process `pid` (0 if it is gone or /proc is unavailable)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run_peak_bytes(pids: list[int]) -> int:
    """The run's memory as `--max-memory` counts it: the sum of its processes' peaks."""
    return sum(peak_bytes(pid) for pid in pids)


def die_with_parent() -> None:
    """Ask the kernel (Linux) to kill this process when its parent dies: the workers of a
    killed coordinator then vanish at once instead of finishing a level for no one. Elsewhere
    a no-op: the workers notice a dead coordinator on their pipe instead."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def available_bytes() -> int:
    """Memory this machine can give a new run now: Linux's `MemAvailable`, else the physical
    memory; 0 where neither can be read."""
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * _PAGE
    except (OSError, ValueError, AttributeError):
        return 0
