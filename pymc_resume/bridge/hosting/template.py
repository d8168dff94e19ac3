"""Host templates: a process that imports a framework once and forks ready hosts from it.

A host forked from the bridge imports the framework anew before its first framework call
(CrewAI: 3.4 s, LangGraph: 0.8 s), and a profile starts a host for every scenario, example,
replay and shrink candidate. A *template* is a long-lived process forked from the bridge that
imports, once, what the adapter class declares fork-safe (its optional `preload()`), checks
that it still runs one thread, and then forks a host per request. Each host is a copy of the
template with the framework already imported, and serves the bridge over a pipe of its own
exactly as a host forked from the bridge does (`host.py`, `host_main`): the same build, the
same calls, the same deadlines. This is CPython's forkserver with `set_forkserver_preload`,
gunicorn's `--preload` and Android's Zygote; like them, it keeps out what a fork cannot carry.

What is not preloaded: a module that starts a thread or a runtime when imported (a fork copies
only the thread that forks, so every host would lack the runtime's threads; CrewAI's LanceDB
is one, and stays each client process's own import). The template counts its threads after the
preload; when they are not one, or the preload raised or hung, that template serves nothing and
one without a preload takes its place: each host then imports the framework itself, as a host
forked from the bridge does. `fallback` says why, and the run says it in one line.

Processes. The template is the bridge's child, in a process group of its own, killed by the
kernel when the bridge dies (PR_SET_PDEATHSIG); a host is the template's child, killed when the
template dies, and in a group of its own, so that killing a host (the bridge does, on a failure
or a deadline) never touches the template. The template never reaps a host on its own: the
bridge kills a host's tree and then asks the template to reap it (`reap`), so that a host's pid
cannot be reused while the bridge may still signal it; the bridge watches a host it did not
fork through a pidfd. Requests come one at a time over a Unix socket, the host's end of its pipe
passed along with the request (SCM_RIGHTS); a lock makes the requests of the bridge's threads
(`--jobs`) take turns.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from multiprocessing.connection import Connection

from pymc_resume.bridge.hosting import host
from pymc_resume.bridge.hosting.loading import AdapterRef
from pymc_resume.bridge.hosting.stats import HostStats

# What the template answers once its preload is done.
READY, UNUSABLE = "ready", "unusable"


class TemplateGone(Exception):
    """The template process is not there to serve a request (it died, or was stopped)."""


# Every live template's bridge side, so that a newly forked template closes the others' sockets.
_LIVE: weakref.WeakSet[HostTemplate] = weakref.WeakSet()


class HostTemplate:
    """The bridge's side of one template; see the module docstring.

    `preload` is called once in the template (None: nothing is preloaded, the template only
    forks); `label` names it in messages; `timeout` bounds the preload (None: no deadline).
    """

    def __init__(
        self, preload: Callable[[], object] | None, label: str, timeout: float | None = 60.0
    ) -> None:
        self.label = label
        self.fallback: str | None = None  # why the preload was dropped, when it was
        self.preloaded = False
        self.pid: int | None = None
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._conn: Connection | None = None
        if preload is not None:
            self.fallback = self._start(preload, timeout)
            if self.fallback is None:
                self.preloaded = True
                return
            self.stop()
        problem = self._start(None, timeout)
        if problem is not None:
            raise TemplateGone(f"the host template for {label} could not start: {problem}")

    # -- requests ----------------------------------------------------------------------------

    def fork_host(self, build: Callable[[], object], pipe_fd: int) -> int | None:
        """Fork a host that builds the adapter with `build` (a zero-argument callable, pickled
        to the template) and serves it over `pipe_fd` (the host's end of its pipe; the caller
        closes its copy): the host's pid. None when `build` cannot be pickled (a lambda, a local
        class): such a build is forked from the bridge, which holds it in memory. Raises
        HostProblem when the template is gone."""
        blob = portable(build)
        if blob is None:
            return None
        try:
            with self._lock:
                self._send(("host", (blob, _surroundings())))
                try:
                    socket.send_fds(self._socket, [b"f"], [pipe_fd])
                except OSError as error:
                    raise TemplateGone(f"the host template for {self.label} is gone ({error})") from None
                kind, pid = self._receive()
        except TemplateGone as gone:
            raise host.HostProblem(f"failed: {gone}", host.DIED) from None
        return pid

    def reap(self, pid: int) -> int | None:
        """Reap host `pid` (killed already) and return its wait status; None if the template
        is gone (its hosts died with it and were reaped by the kernel's init)."""
        with self._lock:
            try:
                self._send(("reap", pid))
                kind, status = self._receive()
            except TemplateGone:
                return None
        return status

    @property
    def alive(self) -> bool:
        return self._conn is not None

    def stop(self) -> None:
        """Kill the template (its hosts die with it) and reap it. Idempotent."""
        with self._lock:
            if self._conn is None:
                return
            conn, self._conn = self._conn, None
            sock, self._socket = self._socket, None
            _LIVE.discard(self)
            conn.close()
            if sock is not None:
                sock.close()
            host.kill_tree(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass

    def __del__(self) -> None:
        try:
            self.stop()
        except Exception:
            pass

    # -- the template's life -----------------------------------------------------------------

    def _start(self, preload: Callable[[], object] | None, timeout: float | None) -> str | None:
        """Fork the template and wait for its preload: None when it is ready, else why not."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        bridge = os.getpid()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = host.fork_holding_signals()
        if pid == 0:
            ours.close()
            for other in list(_LIVE):  # other templates' sockets are not this one's
                if other._socket is not None:
                    other._socket.close()
            host.close_live_hosts()
            _template_main(theirs, preload, bridge)  # never returns
        theirs.close()
        try:
            os.setpgid(pid, pid)
        except (ProcessLookupError, PermissionError):
            pass
        self.pid, self._socket = pid, ours
        self._conn = Connection(os.dup(ours.fileno()))
        _LIVE.add(self)
        if not self._conn.poll(timeout):
            return f"its preload did not finish within {timeout:g}s"
        try:
            kind, detail = self._conn.recv()
        except (EOFError, OSError):
            return "its process ended during the preload"
        return None if kind == READY else detail

    def _send(self, message) -> None:
        if self._conn is None:
            raise TemplateGone(f"the host template for {self.label} was stopped")
        try:
            self._conn.send(message)
        except (EOFError, OSError) as error:
            raise TemplateGone(f"the host template for {self.label} is gone ({error})") from None

    def _receive(self):
        try:
            return self._conn.recv()
        except (EOFError, OSError) as error:
            raise TemplateGone(f"the host template for {self.label} is gone ({error})") from None


def _surroundings() -> tuple[dict[str, str], str, list[str]]:
    """What a host forked from the bridge would inherit at this moment and a host forked from a
    template started earlier would not: the environment, the working directory, the import
    path (a run may set a variable, or a test change directory, after its template started)."""
    return dict(os.environ), os.getcwd(), list(sys.path)


def _take_on(surroundings: tuple[dict[str, str], str, list[str]], preloaded_env: dict[str, str]) -> None:
    """In a host just forked from the template: the bridge's surroundings, and what the
    preload set in the environment (CrewAI's telemetry switches), which a fresh host's own
    imports would have set too."""
    environment, directory, path = surroundings
    os.environ.clear()
    os.environ.update(environment)
    os.environ.update(preloaded_env)
    try:
        os.chdir(directory)
    except OSError:
        pass  # removed since: the host works where the template does
    sys.path[:] = path


def running_threads() -> list[str]:
    """The names of this process's threads, native ones included (Linux; else Python's)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return [thread.name for thread in threading.enumerate()]
    names = []
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                names.append(comm.read().strip())
        except OSError:
            continue  # ended meanwhile
    return names


def _template_main(sock: socket.socket, preload: Callable[[], object] | None, bridge: int) -> None:
    """The template: preload, check its threads, then fork hosts on request until the socket
    ends. Never returns; every way out is `os._exit`."""
    conn = Connection(os.dup(sock.fileno()))
    try:
        host.become_host(bridge, subreaper=False)
        # numpy's OpenBLAS starts a pool of threads when a preloaded module first imports it;
        # one is enough for a framework's imports, and keeps the template one thread.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        before = dict(os.environ)
        if preload is not None:
            try:
                preload()
            except BaseException as error:
                conn.send((UNUSABLE, f"its preload raised {type(error).__name__}: {error}"))
                return
            threads = running_threads()
            if len(threads) > 1:
                conn.send(
                    (
                        UNUSABLE,
                        f"its preload left {len(threads)} threads running ({', '.join(sorted(threads))}), "
                        "which a forked host would not have",
                    )
                )
                return
        conn.send((READY, None))
        preloaded_env = {name: value for name, value in os.environ.items() if before.get(name) != value}
        _serve(conn, sock, preloaded_env)
    except (EOFError, OSError):
        pass
    finally:
        os._exit(0)


def _serve(conn: Connection, sock: socket.socket, preloaded_env: dict[str, str]) -> None:
    """Requests until the bridge closes the socket: fork a host, or reap one."""
    template = os.getpid()
    while True:
        kind, argument = conn.recv()
        if kind == "host":
            blob, surroundings = argument
            _, [pipe_fd], _, _ = socket.recv_fds(sock, 1, 1)
            pid = os.fork()
            if pid == 0:
                conn.close()
                sock.close()
                _take_on(surroundings, preloaded_env)
                build = _unpickled(blob)
                host.host_main(Connection(pipe_fd), build, template)  # never returns
            os.close(pipe_fd)
            conn.send(("forked", pid))
        elif kind == "reap":
            try:
                status = os.waitpid(argument, 0)[1]
            except ChildProcessError:
                status = None
            conn.send(("reaped", status))


def _unpickled(blob: bytes) -> Callable[[], object]:
    """The host's build: unpickled in the host, so that a build that cannot be is reported
    as the build's failure (in one line, by the bridge), like any other."""

    def build():
        return pickle.loads(blob)()

    return build


def portable(build: Callable[[], object]) -> bytes | None:
    """`build` pickled for a template, or None when it cannot be."""
    try:
        return pickle.dumps(build)
    except Exception:
        return None


def _preload_of(ref: AdapterRef) -> Callable[[], object]:
    """What the template of `ref` imports: the adapter's module, then what its class declares
    (its `preload`)."""

    def preload() -> None:
        declared = getattr(ref.load(), "preload", None)
        if callable(declared):
            declared()

    return preload


class HostTemplates:
    """The templates of one run, one per adapter class, started when first asked for and
    stopped together (`close`, or the end of a `with` block). At most `keep` live at once: a
    profile of every framework moves from one family to the next.

    `say` gets the one line a run prints when a template's preload is dropped
    (`tell_fallback`). `enabled=False` gives no templates at all: every host is forked from the
    bridge (`--fresh-hosts`)."""

    def __init__(self, say: Callable[[str], None] | None = None, enabled: bool = True, keep: int = 2) -> None:
        self.say = say or (lambda message: None)
        self.enabled = enabled
        self.keep = keep
        self._templates: dict[str, HostTemplate] = {}  # by the adapter class's target
        self._lock = threading.Lock()
        self.stats = HostStats()  # every host of the run's, templates or not
        self._told: set[str] = set()  # templates whose dropped preload was said

    def template_for(self, ref: AdapterRef, timeout: float | None) -> HostTemplate | None:
        """The template of the adapter class `ref` names, started if it is not yet; None when
        disabled."""
        if not self.enabled:
            return None
        label = ref.target
        with self._lock:
            template = self._templates.get(label)
            if template is not None and template.alive:
                self._templates[label] = self._templates.pop(label)  # the most recent last
                return template
            while len(self._templates) >= self.keep:
                self._templates.pop(next(iter(self._templates))).stop()
            started = time.perf_counter()
            template = HostTemplate(_preload_of(ref), label, timeout)
            self.stats.template_started(time.perf_counter() - started)
            self._templates[label] = template
        return template

    def tell_fallback(self, template: HostTemplate | None) -> None:
        """Say, once per template, that its preload was dropped and why: after an adapter was
        built from it (an adapter whose module cannot even be imported gets its own one line,
        and no word on the template)."""
        with self._lock:
            if template is None or template.fallback is None or template.label in self._told:
                return
            self._told.add(template.label)
        self.say(
            f"host template for {template.label}: not preloaded ({template.fallback}); "
            "each host imports the framework itself"
        )

    def close(self) -> None:
        with self._lock:
            for template in self._templates.values():
                template.stop()
            self._templates.clear()

    def __enter__(self) -> HostTemplates:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextmanager
def templates_in(templates: HostTemplates | None, say: Callable[[str], None] | None = None):
    """`templates`, or, when None, a pool of this block's own, closed at its end."""
    if templates is not None:
        yield templates
        return
    with HostTemplates(say) as own:
        yield own
