"""A pytest plugin that fails the test run when it leaves anything behind.

A run must leave the system temp directory (and /dev/shm, where examples keep their stores) as it
found them, and no child process alive. The controller process (the only one under
pytest-xdist that runs no tests) notes what is there when the run starts and looks again when
it ends, after the workers are gone; anything new is listed in the summary and the run exits 1.

Orphans are the hard case: a grandchild whose parent died is adopted by init and is nobody's
child any more. So the controller makes itself a *child subreaper* (Linux `prctl`): every
orphan of the run is re-parented to it, and what is still its child at the end was left behind.
Left-behind processes are killed after they are listed, so a broken test cannot hang CI.

pytest's own temporary folders (`tmp_path`) are created under one fresh folder per run that is
removed at the end, so they are not leftovers; pass `--basetemp DIR` to keep them.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

PR_SET_CHILD_SUBREAPER = 36
GRACE_SECONDS = 10.0  # for xdist's workers and the last reaped children to exit


def is_controller(config: pytest.Config) -> bool:
    """Whether this is the run's own process: xdist's controller, or the only process."""
    return not hasattr(config, "workerinput")


class RunCheck:
    """A check of the whole run: its findings (`found`), set when the session ends, fail the
    run and are listed under `title` in the summary."""

    title = ""

    def __init__(self) -> None:
        self.found: list[str] = []

    def fail_on_findings(self, session: pytest.Session) -> None:
        if self.found and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.found:
            terminalreporter.section(self.title, red=True)
            for line in self.found:
                terminalreporter.write_line(line)


def _watched_folders() -> list[Path]:
    folders = [Path(tempfile.gettempdir())]
    if Path("/dev/shm").is_dir():
        folders.append(Path("/dev/shm"))
    return folders


# The PostgreSQL server's own dynamic shared memory segments come and go in /dev/shm.
NOT_OURS = ("PostgreSQL.",)


def _entries(folders: list[Path]) -> set[Path]:
    return {entry for folder in folders for entry in folder.iterdir() if not entry.name.startswith(NOT_OURS)}


def _describe(entry: Path) -> str:
    """Enough of a leftover to tell who made it: its kind, when it was made, and its contents
    (a folder's names, a file's first bytes); a library's temp file has no telling name."""
    try:
        made = time.strftime("%H:%M:%S", time.localtime(entry.lstat().st_mtime))
        if entry.is_dir():
            names = sorted(child.name for child in entry.iterdir())
            return f"a folder modified at {made}, holding {names[:5]}{' ...' if len(names) > 5 else ''}"
        with entry.open("rb") as file:
            head = file.read(80)
        return f"a file of {entry.stat().st_size} bytes modified at {made}, starting {head!r}"
    except OSError as error:
        return f"unreadable: {error}"


def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children() -> dict[int, str]:
    """This process's live children (zombies are reaped on the way): pid -> command line."""
    me, found = os.getpid(), {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        # The command name in parentheses may hold spaces: the fields after it are fixed.
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) != me:
            continue
        if state == "Z":
            try:
                os.waitpid(int(entry), os.WNOHANG)
            except ChildProcessError:
                pass
            continue
        found[int(entry)] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    return found


def _left_children() -> dict[int, str]:
    deadline = time.monotonic() + GRACE_SECONDS
    while (children := _children()) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _children()  # reap what was just killed
    return children


class Hygiene(RunCheck):
    """What the run found when it started, and what it left when it ended."""

    title = "left behind by the test run"

    def __init__(self, config: pytest.Config) -> None:
        super().__init__()
        self.folders = _watched_folders()
        self.before = _entries(self.folders)
        self.subreaper = _become_subreaper()
        self.own_basetemp: Path | None = None
        if config.option.basetemp is None:
            self.own_basetemp = Path(tempfile.mkdtemp(prefix="pymc-resume-tests-"))
            config.option.basetemp = str(self.own_basetemp / "tmp")

    # The innermost wrapper: it looks after every other sessionfinish (xdist's teardown of its
    # workers, the fixtures' teardown) and before the terminal summary is written.
    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        yield
        children = _left_children() if self.subreaper else {}
        self.found += [f"process {pid} still running (killed now): {cmd}" for pid, cmd in children.items()]
        if self.own_basetemp is not None:
            shutil.rmtree(self.own_basetemp, ignore_errors=True)
        new = sorted(_entries(self.folders) - self.before)
        self.found += [f"new in {entry.parent}: {entry.name} ({_describe(entry)})" for entry in new]
        self.fail_on_findings(session)


def pytest_configure(config: pytest.Config) -> None:
    if is_controller(config):
        config.pluginmanager.register(Hygiene(config), "pymc-resume-hygiene")
