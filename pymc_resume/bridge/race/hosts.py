"""Network hosts on this machine: Linux network namespaces on a private network island, and a
throwaway PostgreSQL server on one of them, so that a race runs its racers on several hosts and
reaches its store over a real network (TCP between network stacks, not loopback).

    with Island(hosts=2) as island:          # namespaces, veths, a bridge, a PostgreSQL server
        with island.entered(island.store):   # this thread now lives on the store's host
            ...                              # connect to island.url
        with placing([island.hosts[0], island.hosts[1]]):
            run_in_children(tasks)           # child i is forked onto host i % 2

The island (root only; `ip netns`, veth pairs, a bridge):

- one namespace for the store and one per host, named `pmr-<pid>-<nonce>-<role>`; the pid is
  the creating process's, so that a later run removes the namespaces of a run that was killed
  before it could clean up (`sweep`);
- a bridge inside the store's namespace with the store's address, and one veth pair per host
  from that bridge to the host's namespace, with the host's address; every address is in
  `SUBNET`, and no namespace has a default route: traffic can go only to the island's own
  addresses and to each namespace's loopback, never to any other address. Nothing is added to
  the machine's own network namespace, so islands of concurrent runs do not see each other;
- a PostgreSQL server started from the machine's binaries (`initdb`, `postgres`, as the
  `postgres` user), its data in a temporary folder, listening only on the store's address,
  trusting the island's subnet.

Everything (server, its processes, namespaces with their veths and bridge, the folder) is
removed when the `with` block ends, on every path: an exception, Ctrl-C, or SIGTERM turned into
an exception by the command line. A process that was SIGKILLed cannot clean up; the next
island it creates sweeps what such a run left.

A thread enters a namespace with `setns(2)` (through libc: `os.setns` is Python 3.12+). It
changes the calling thread only, and children forked by that thread are born in it, which is
how racers become processes on their hosts while staying forked children of the race, released
together through pipes (pipes are not network, they cross namespaces).
"""

from __future__ import annotations

import ctypes
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from pymc_resume.errors import EnvironmentProblem

SUBNET = "10.213.0"  # a /24 that exists only on the island
STORE_ADDRESS = f"{SUBNET}.1"
POSTGRES_PORT = 5432
POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
POSTGRES_BIN_VARIABLE = "PYMC_RESUME_POSTGRES_BIN"  # another PostgreSQL's bin folder
NETNS_DIR = Path("/run/netns")
PREFIX = "pmr-"
START_SECONDS = 30.0  # the server must answer within this
STOP_SECONDS = 10.0

_CLONE_NEWNET = 0x40000000


def host_address(index: int) -> str:
    """The address of host `index` (0-based) on the island."""
    return f"{SUBNET}.{11 + index}"


# -- entering a namespace ---------------------------------------------------------------------


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"setns: {os.strerror(error)}")


def enter(namespace: str) -> None:
    """Move the calling thread into network namespace `namespace` (for good)."""
    fd = os.open(NETNS_DIR / namespace, os.O_RDONLY)
    try:
        _setns(fd)
    finally:
        os.close(fd)


@contextmanager
def entered(namespace: str) -> Iterator[None]:
    """The calling thread in `namespace` for the block, back in its own namespace after it."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        enter(namespace)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


# Forked children are placed on hosts by fork hooks: the race's adapter forks its racers itself
# (bridge.kit.process.run_in_children), in racer order, and has no notion of hosts.
_placement: list | None = None  # [namespaces, forks so far] while `placing` is active
_next_host: str | None = None  # chosen in the parent just before a fork, entered by the child
_hooks_registered = False


def _before_fork() -> None:
    global _next_host
    _next_host = None
    if _placement is not None:
        namespaces, count = _placement
        _next_host = namespaces[count % len(namespaces)]
        _placement[1] = count + 1


def _in_child() -> None:
    global _placement
    _placement = None  # the child's own forks stay where it is
    if _next_host is not None:
        try:
            enter(_next_host)
        except OSError as error:
            # A racer that cannot reach its host must not run from the wrong one.
            os.write(2, f"pymc-resume: a child could not enter host {_next_host}: {error}\n".encode())
            os._exit(70)


@contextmanager
def placing(namespaces: Sequence[str]) -> Iterator[None]:
    """Within the block, the n-th child this process forks enters `namespaces[n % len]` before it
    runs anything else (a child that cannot enter its host exits with status 70)."""
    global _placement, _hooks_registered
    if not _hooks_registered:
        os.register_at_fork(before=_before_fork, after_in_child=_in_child)
        _hooks_registered = True
    _placement = [list(namespaces), 0]
    try:
        yield
    finally:
        _placement = None


def network_identity() -> str:
    """The network namespace this thread is in, as the kernel names it (`net:[4026531840]`)."""
    return os.readlink("/proc/thread-self/ns/net")


# -- the island ----------------------------------------------------------------------------------


def _ip(*args: str) -> None:
    try:
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise EnvironmentProblem("hosts: the `ip` command (iproute2) is not installed") from None
    except subprocess.CalledProcessError as error:
        raise EnvironmentProblem(f"hosts: `ip {' '.join(args)}` failed: {_last_line(error.stderr)}") from None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pids_in(namespace: str) -> list[int]:
    try:
        out = subprocess.run(
            ["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(word) for word in out.split() if word.isdigit()]


def _remove_namespace(namespace: str) -> None:
    """Kill what still runs in `namespace` (only processes an island put there), then delete it:
    its veths and bridge go with it."""
    for pid in _pids_in(namespace):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run(["ip", "netns", "delete", namespace], capture_output=True, timeout=30)


def sweep() -> list[str]:
    """Remove the namespaces and server folders of islands whose creating process is gone (a run
    that was SIGKILLed); returns what was removed."""
    removed = []
    pattern = re.compile(rf"^{PREFIX}(\d+)-")
    names = [p.name for p in NETNS_DIR.iterdir()] if NETNS_DIR.is_dir() else []
    for name in names:
        match = pattern.match(name)
        if match and not _alive(int(match.group(1))):
            _remove_namespace(name)
            removed.append(name)
    for folder in Path(tempfile.gettempdir()).glob("pymc-resume-island-*"):
        match = re.match(r"pymc-resume-island-(\d+)-", folder.name)
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed


class Island:
    """`hosts` network hosts and a store host with a PostgreSQL server, for one `with` block.

    `hosts`: the hosts' namespace names, `addresses` theirs on the island; `store` the store
    host's namespace; `url` the server's URL (reachable from the island's namespaces only).
    """

    def __init__(self, hosts: int, *, postgres: bool = True) -> None:
        if hosts < 1:
            raise ValueError("an island needs at least one host")
        tag = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.store = f"{tag}-s"
        self.hosts = [f"{tag}-h{i + 1}" for i in range(hosts)]
        self.addresses = [host_address(i) for i in range(hosts)]
        self.with_postgres = postgres
        self.url = f"postgresql://postgres@{STORE_ADDRESS}:{POSTGRES_PORT}/postgres"
        self._made: list[str] = []
        self._folder: Path | None = None
        self._server: subprocess.Popen | None = None

    def host_of(self, namespace: str) -> str:
        """The address of the host whose namespace is `namespace`."""
        return self.addresses[self.hosts.index(namespace)]

    def __enter__(self) -> Island:
        if os.geteuid() != 0:
            raise EnvironmentProblem("hosts: network namespaces need root (ip netns, veth pairs)")
        sweep()
        try:
            self._build_network()
            if self.with_postgres:
                self._start_postgres()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def entered(self, namespace: str):
        """`entered(namespace)`, for one of this island's namespaces."""
        return entered(namespace)

    def _namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _build_network(self) -> None:
        self._namespace(self.store)
        _ip("-n", self.store, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.store, "addr", "add", f"{STORE_ADDRESS}/24", "dev", "br0")
        _ip("-n", self.store, "link", "set", "br0", "up")
        for index, (host, address) in enumerate(zip(self.hosts, self.addresses)):
            self._namespace(host)
            port = f"h{index + 1}"  # the bridge's end of this host's veth pair
            _ip("-n", self.store, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", host)
            _ip("-n", self.store, "link", "set", port, "master", "br0")
            _ip("-n", self.store, "link", "set", port, "up")
            _ip("-n", host, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", host, "link", "set", "eth0", "up")

    # -- the PostgreSQL server ----------------------------------------------------------------

    def _start_postgres(self) -> None:
        binaries = Path(os.environ.get(POSTGRES_BIN_VARIABLE, POSTGRES_BIN))
        if not (binaries / "postgres").exists() or not (binaries / "initdb").exists():
            raise EnvironmentProblem(
                f"hosts: no PostgreSQL binaries in {binaries} "
                f"(set {POSTGRES_BIN_VARIABLE} to a PostgreSQL bin folder)"
            )
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise EnvironmentProblem("hosts: there is no `postgres` user to run the server as") from None
        self._folder = Path(tempfile.mkdtemp(prefix=f"pymc-resume-island-{os.getpid()}-"))
        data, sockets, log = self._folder / "data", self._folder / "sockets", self._folder / "server.log"
        sockets.mkdir()
        os.chown(self._folder, owner.pw_uid, owner.pw_gid)
        os.chown(sockets, owner.pw_uid, owner.pw_gid)
        as_postgres = _as_user(owner)
        initdb = subprocess.run(
            [
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
            capture_output=True,
            text=True,
            preexec_fn=as_postgres,
            timeout=120,
            cwd=self._folder,
        )
        if initdb.returncode != 0:
            raise EnvironmentProblem(f"hosts: initdb failed: {_last_line(initdb.stderr)}")
        (data / "pg_hba.conf").write_text(f"local all all trust\nhost all all {SUBNET}.0/24 trust\n")
        # A throwaway server: durability against its own crash is not what a race measures.
        settings = {
            "listen_addresses": STORE_ADDRESS,
            "port": str(POSTGRES_PORT),
            "unix_socket_directories": str(sockets),
            "max_connections": "300",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "dynamic_shared_memory_type": "mmap",
            "shared_buffers": "32MB",
        }
        command = [str(binaries / "postgres"), "-D", str(data)]
        for name, value in settings.items():
            command += ["-c", f"{name}={value}"]
        with open(log, "wb") as out:
            self._server = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self._folder,
                preexec_fn=lambda: (enter(self.store), as_postgres()),
            )
        self._wait_for_server(log)

    def _wait_for_server(self, log: Path) -> None:
        import psycopg

        deadline = time.monotonic() + START_SECONDS
        with entered(self.store):
            while True:
                if self._server.poll() is not None:
                    raise EnvironmentProblem(
                        f"hosts: the PostgreSQL server exited: {_last_line(log.read_text())}"
                    )
                try:
                    psycopg.connect(self.url, connect_timeout=2).close()
                    return
                except psycopg.OperationalError as error:
                    if time.monotonic() > deadline:
                        raise EnvironmentProblem(
                            f"hosts: the PostgreSQL server did not answer within "
                            f"{START_SECONDS:.0f}s: {_last_line(str(error))}"
                        ) from None
                time.sleep(0.1)

    def _stop_postgres(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        if server.poll() is None:
            server.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
            try:
                server.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()

    def close(self) -> None:
        """Stop the server, delete the namespaces (their veths and bridge) and the folder."""
        try:
            self._stop_postgres()
        finally:
            for namespace in reversed(self._made):
                _remove_namespace(namespace)
            self._made = []
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
                self._folder = None


def _as_user(owner):
    def drop() -> None:
        os.setgroups([])
        os.setgid(owner.pw_gid)
        os.setuid(owner.pw_uid)

    return drop


def _last_line(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


def running_as_root() -> bool:
    """Whether this process can build an island (root on Linux)."""
    return sys.platform.startswith("linux") and os.geteuid() == 0
