"""The adapter host: adapter code runs in a child process that the bridge can always SIGKILL.

An adapter is user code (or a framework's), and the bridge must survive anything it does: a
constructor or an operation that never returns, one that blocks or handles signals so that
no alarm can interrupt it, one that raises `SystemExit`, calls `os._exit`, or dies. So the
bridge never runs adapter code itself. `HostedAdapter(build)` forks a *host* process (the fork
start method, so that the factory's closures and the node code carry over unpickled), in its
own process group; the host builds the adapter and then serves the bridge's calls one at a
time over a pipe. `HostedAdapter` has the `Adapter` protocol's methods, so a `Session` drives
it as it would drive the adapter itself.

Every call has a deadline (`timeout`, the step timeout) measured in the bridge's process,
which the adapter cannot delay. When the deadline passes, when the host dies, or when adapter
code raises anything at all (`BaseException`: `SystemExit` and `KeyboardInterrupt` included),
the bridge SIGKILLs the host's whole process group (the host and the processes the adapter
forked for its operations, unless they made groups of their own), reaps the host, and raises
`HostProblem`, which a `Session` turns into `AdapterFailure` naming the step.

The host also dies with the bridge: it asks the kernel for a SIGKILL when its parent dies
(`PR_SET_PDEATHSIG`), so a bridge killed by SIGKILL leaves no host behind.

A host is forked either from the bridge or, given a `HostTemplate` (`template.py`), from a
process that imported the framework once: the same host either way, served the same calls, but
ready in milliseconds. The bridge watches either kind through a pidfd (Linux 5.3), so a reply
and a host's death wake it alike, without polling.

`probe(build, timeout)` builds an adapter in a host only to read what it declares (name,
version, capabilities, options, unsupported operations, shortest lease, framework calls, effect
key), then stops the host:
the same deadline for the up-front checks of `fuzz`, `profile` and `replay`.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from pymc_resume.bridge.hosting.stats import HostStats
    from pymc_resume.bridge.hosting.template import HostTemplate

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# What the host reads off a freshly built adapter (see `AdapterInfo`).
BUILD = "build the adapter"


RAISED, HUNG, DIED = "raised", "hung", "died"


class HostProblem(Exception):
    """A call into the adapter did not return normally; `reason` says how, without the step
    (the caller names it): "raised ...", "did not finish within ...", "failed: ... died".
    `kind` is RAISED, HUNG or DIED; for RAISED, `error_type` and `error_args` are the
    exception's class name and arguments (a KeyError from a constructor is an unknown option)."""

    def __init__(self, reason: str, kind: str, error_type: str | None = None, error_args: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.error_type = error_type
        self.error_args = error_args


@attrs.frozen
class AdapterInfo:
    """What an adapter declares, read once in its host."""

    name: str
    version: str
    capabilities: frozenset[str]
    options: dict
    unsupported: dict | None = None
    # Constructor options giving the shortest lease the adapter allows (an optional adapter
    # attribute, `shortest_lease`): liveness failures are shrunk with them, see fuzzing/fuzz.py.
    shortest_lease: dict | None = None
    # Contract operation -> the framework's public call (the optional `framework_calls`).
    framework_calls: dict | None = None
    # Every documented way the adapter performs an operation (the optional `variants`: a tuple
    # of `bridge.adapter.Variant`, checked by `bridge.adapter.declared_variants` on use).
    variants: tuple | None = None
    # The key the sink deduplicates effects by, and why it is the framework's stable identity
    # (the optional `effect_key`: {"key": ..., "why": ...}, or a string naming the key).
    effect_key: dict | str | None = None


def _info(adapter) -> AdapterInfo:
    unsupported = getattr(adapter, "unsupported", None)
    lease = getattr(adapter, "shortest_lease", None)
    calls = getattr(adapter, "framework_calls", None)
    effect_key = getattr(adapter, "effect_key", None)
    variants = getattr(adapter, "variants", None)
    return AdapterInfo(
        name=str(adapter.name),
        version=str(adapter.version),
        capabilities=frozenset(adapter.capabilities),
        options=dict(adapter.options()),
        unsupported=None if unsupported is None else dict(unsupported),
        shortest_lease=None if lease is None else dict(lease),
        framework_calls=None if calls is None else {str(op): str(call) for op, call in dict(calls).items()},
        effect_key=effect_key if effect_key is None or isinstance(effect_key, str) else dict(effect_key),
        variants=None if variants is None else tuple(variants),
    )


# The bridge's side of every live host, so that a newly forked host (or template) closes the
# others' pipes (a host holding another host's pipe would keep it open after that host died).
_LIVE: weakref.WeakSet[HostedAdapter] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()  # the bridge's threads (`--jobs`) start and stop hosts


def close_live_hosts() -> None:
    """In a process just forked from the bridge: close the bridge's ends of its hosts' pipes,
    which are not this process's to hold."""
    for other in list(_LIVE):
        if other._conn is not None:
            other._conn.close()
            other._conn = None


class HostedAdapter:
    """An adapter built and run in a host process; see the module docstring.

    `build` is a zero-argument callable returning the adapter (a class, a factory, or
    `lambda: adapter` for one built already). `timeout` bounds building and every call
    (None: no deadline; the host is still killed when adapter code raises or it dies).
    `template`: fork the host from it (when `build` can be pickled to it), not from the bridge.
    """

    def __init__(
        self,
        build: Callable[[], object],
        timeout: float | None = 30.0,
        template: HostTemplate | None = None,
        stats: HostStats | None = None,
    ) -> None:
        self.timeout = timeout
        self.pid: int | None = None
        self._owner = os.getpid()
        self._conn: Connection | None = None
        self._pidfd: int | None = None
        self._template: HostTemplate | None = None
        self._stats = stats
        started = time.perf_counter()
        self._start(build, template)
        info = self._request(BUILD, ())
        if stats is not None:
            stats.host_started(time.perf_counter() - started)
        self.info: AdapterInfo = info
        self.name = info.name
        self.version = info.version
        self.capabilities = info.capabilities
        self.unsupported = info.unsupported
        self.shortest_lease = info.shortest_lease
        self.framework_calls = info.framework_calls
        self.variants = info.variants

    # -- the Adapter protocol ---------------------------------------------------------------

    def options(self) -> dict:
        return dict(self.info.options)

    def open(self, setup):
        return self._request("open", (setup,))

    def close(self) -> None:
        """Close the adapter in its host, then stop the host (and whatever it left running)."""
        if self._conn is None:
            return
        try:
            self._request("close", ())
        finally:
            self.stop()

    # The operations pass their arguments through as they are: optional keywords too (a warm
    # client, a release order), which only adapters that declare them ever get.

    def start(self, *args, **kwargs):
        return self._request("start", args, kwargs)

    def resume(self, *args, **kwargs):
        return self._request("resume", args, kwargs)

    def resume_together(self, *args, **kwargs):
        return self._request("resume_together", args, kwargs)

    def recover(self, *args, **kwargs):
        return self._request("recover", args, kwargs)

    def fork(self, *args, **kwargs):
        return self._request("fork", args, kwargs)

    def update(self, *args, **kwargs):
        return self._request("update", args, kwargs)

    def observe(self):
        return self._request("observe", ())

    # -- the host's life ---------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._conn is not None

    def stop(self) -> int | None:
        """SIGKILL the host's process group, reap the host and return its wait status (None
        when it was stopped before). Idempotent.

        The group is killed before the host is reaped: until then the host's pid (the group's
        id) cannot be reused, so the signal never reaches an unrelated process."""
        if self._conn is None or os.getpid() != self._owner:  # a copy inherited by a fork
            return None
        conn, self._conn = self._conn, None
        with _LIVE_LOCK:
            _LIVE.discard(self)
        conn.close()
        kill_tree(self.pid)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self._template is not None:
            return self._template.reap(self.pid)
        try:
            return os.waitpid(self.pid, 0)[1]
        except ChildProcessError:
            return None

    def __del__(self) -> None:  # a host nobody stopped still dies with its proxy
        try:
            self.stop()
        except Exception:
            pass

    def _start(self, build: Callable[[], object], template: HostTemplate | None) -> None:
        ours, theirs = Pipe()
        parent = os.getpid()
        try:
            pid = template.fork_host(build, theirs.fileno()) if template is not None else None
        except HostProblem:
            ours.close()
            theirs.close()
            raise
        if pid is not None:
            theirs.close()
            self._template = template
        else:
            with _LIVE_LOCK:
                sys.stdout.flush()  # what the bridge buffered must not be written twice
                sys.stderr.flush()
                pid = fork_holding_signals()
                if pid == 0:
                    ours.close()
                    close_live_hosts()  # other hosts' pipes: theirs to close, not ours
                    host_main(theirs, build, parent)  # never returns
            theirs.close()
            try:
                os.setpgid(pid, pid)  # the host does it too: whichever runs first
            except (ProcessLookupError, PermissionError):
                pass  # the host is in its own group already, or already gone
        # Neither the bridge nor the template reaps the host before `stop`: the pid is its own.
        self._pidfd = os.pidfd_open(pid)
        self.pid, self._conn, self._owner = pid, ours, parent
        with _LIVE_LOCK:
            _LIVE.add(self)

    def _request(self, method: str, args: tuple, kwargs: dict | None = None):
        """Send one call (none for the build, which the host starts with) and wait for its
        reply within the deadline; on anything but a normal return, stop the host and raise."""
        if self._conn is None:
            raise HostProblem("could not run: the adapter's process was stopped already", DIED)
        started = time.perf_counter()
        try:
            if method != BUILD:
                self._conn.send((method, args, kwargs or {}))
            status, payload = self._reply()
        except BaseException:  # a deadline, a dead host, or the bridge itself interrupted
            self.stop()
            raise
        if self._stats is not None and method != BUILD:
            self._stats.called(method, time.perf_counter() - started)
        if status == "ok":
            return payload
        self.stop()
        raise HostProblem(f"raised {payload['error']}", RAISED, payload["type"], payload["args"])

    def _reply(self):
        """Wait for the reply, the host's end (its pidfd: a dead host's pipe may stay open in
        the processes the adapter forked, so the pipe alone does not tell) or the deadline,
        whichever comes first."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                ready, _, _ = select.select([self._conn, self._pidfd], [], [], left)
                if self._conn.poll(0):
                    return self._conn.recv()
            except (EOFError, OSError):
                raise HostProblem(f"failed: {_status_text(self.stop())}", DIED) from None
            if self._pidfd in ready:
                raise HostProblem(f"failed: {_status_text(self.stop())}", DIED)
            if deadline is not None and time.monotonic() >= deadline:
                raise HostProblem(
                    f"did not finish within the step timeout of {self.timeout:g}s (the adapter hangs)", HUNG
                )


def _status_text(status: int | None) -> str:
    if status is None:
        return "the adapter's process ended"
    if os.WIFSIGNALED(status):
        return f"the adapter's process was killed by signal {os.WTERMSIG(status)}"
    return f"the adapter's process exited with status {os.WEXITSTATUS(status)}"


def probe(
    build: Callable[[], object],
    timeout: float | None = 30.0,
    template: HostTemplate | None = None,
    stats: HostStats | None = None,
) -> AdapterInfo:
    """Build an adapter in a host, read what it declares, stop the host."""
    host = HostedAdapter(build, timeout, template, stats)
    host.stop()
    return host.info


# -- the host process ----------------------------------------------------------------------


def host_main(conn: Connection, build: Callable[[], object], parent: int) -> None:
    """The host: build the adapter, then serve calls until `close` or the pipe ends. Never
    returns; every way out is `os._exit`, so none of the bridge's cleanup runs here. `parent`
    is the process that forked it (the bridge, or a template): the host dies with it."""
    try:
        become_host(parent)
        try:
            adapter = build()
            info = _info(adapter)
        except BaseException as error:
            _send(conn, ("raised", _error(error)))
            return
        if not _send(conn, ("ok", info)):
            return
        while True:
            try:
                method, args, kwargs = conn.recv()
            except (EOFError, OSError):
                return
            try:
                result = getattr(adapter, method)(*args, **kwargs)
            except BaseException as error:
                _send(conn, ("raised", _error(error)))
                return
            if not _send(conn, ("ok", result)) or method == "close":
                return
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


# Signals whose handlers raise in the bridge (Ctrl-C, SIGTERM): held while it forks.
HELD_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def fork_holding_signals() -> int:
    """`os.fork()` with SIGINT and SIGTERM held until it returns. Python runs its at-fork
    callbacks (logging's among them) around a fork and ignores any exception they raise, so a
    Ctrl-C or SIGTERM whose handler ran there was lost: the command went on as if never asked
    to stop. Held, the signal arrives once the fork is done. The child gets the mask back with
    its handlers reset (`become_host`) or before it runs anything else."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    pid = os.fork()
    if pid != 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    return pid


def release_held_signals() -> None:
    """In a child of `fork_holding_signals`, once its handlers are its own."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD_SIGNALS)


def kill_tree(root: int) -> None:
    """SIGKILL every descendant of `root`, then `root`'s process group (not reaped). Processes
    moved out of the group (setsid) are still descendants while `root` lives (it is their
    subreaper): they are killed first, until none is left (one that forks in between is
    found on the next pass)."""
    for _ in range(8):
        escaped = descendants(root)
        if not escaped:
            break
        for pid in escaped:
            _kill(pid, os.kill)
    _kill(root, os.killpg)


def _kill(target: int, how) -> None:
    try:
        how(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # gone already


def descendants(root: int) -> list[int]:
    """The live processes below `root`, read from /proc (empty where there is no /proc).
    Killed ones (zombies, until their parent reaps them) are not counted."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def become_host(parent: int, subreaper: bool = True) -> None:
    """In a process just forked from `parent`: default signal handlers, a process group of its
    own, killed when `parent` dies; a host (`subreaper`) also adopts its adapter's orphans."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):
        signal.signal(signum, signal.SIG_DFL)  # the bridge's handlers are not the host's
    release_held_signals()
    os.setpgid(0, 0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # Orphans of the adapter's processes (a double fork) become the host's children, not
        # init's, so that `stop` still finds them among the host's descendants.
        if subreaper:
            libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the bridge's own cleanup still stops the host
    if os.getppid() != parent:  # the bridge died before the request above took effect
        os._exit(0)


def _send(conn: Connection, message) -> bool:
    try:
        conn.send(message)
    except (EOFError, OSError):
        return False
    except Exception as error:
        try:
            conn.send(
                (
                    "raised",
                    {
                        "type": type(error).__name__,
                        "args": "",
                        "error": f"a result the bridge cannot receive: {type(error).__name__}: {error}",
                    },
                )
            )
        except Exception:
            pass
        return False
    return True


def _error(error: BaseException) -> dict:
    return {
        "type": type(error).__name__,
        "args": ", ".join(map(str, error.args)),
        "error": f"{type(error).__name__}: {error}",
    }
