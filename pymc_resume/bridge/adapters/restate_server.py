"""Restate's server for the Restate adapter: the prebuilt binary, installed on first use from the
npm registry into a cache of ours, and one server process per example, on loopback ports of its
own, with its data directory in the example's workdir.

The binary is the npm package `@restatedev/restate-server-linux-x64` at `SERVER_VERSION` (Restate
publishes its server there as a prebuilt binary; the SDK's README makes server 1.7 and later
compatible with restate-sdk 1.x). `server_binary()` fetches it with `npm pack` into a temporary
folder beside the cache, unpacks it, and publishes it by renaming the folder: two processes
racing to install it each publish a complete copy or find the other's, never a half-written one.

May import: nothing of the bridge (it starts and stops a process).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import httpx

from pymc_resume.errors import EnvironmentProblem

SERVER_VERSION = "1.7.12"
PACKAGES = {
    "x86_64": "@restatedev/restate-server-linux-x64",
    "aarch64": "@restatedev/restate-server-linux-arm64",
}
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pymc_resume"
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
POLL = 0.02


def server_binary() -> Path:
    """The restate-server binary at `SERVER_VERSION`, installed into the cache on first use."""
    folder = CACHE / f"restate-server-{SERVER_VERSION}"
    binary = folder / "package" / "bin" / "restate-server"
    if binary.exists():
        return binary
    package = PACKAGES.get(platform.machine())
    if platform.system() != "Linux" or package is None:
        raise EnvironmentProblem(f"no prebuilt restate-server for {platform.system()} {platform.machine()}")
    npm = shutil.which("npm")
    if npm is None:
        raise EnvironmentProblem("npm is not installed: it fetches Restate's server binary (install Node.js)")
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".restate-server-", dir=CACHE))
    try:
        _unpack(npm, f"{package}@{SERVER_VERSION}", staging)
        with contextlib.suppress(OSError):  # another process published it first: keep theirs
            staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not binary.exists():
        raise EnvironmentProblem(f"npm pack {package}@{SERVER_VERSION} gave no bin/restate-server")
    return binary


def _unpack(npm: str, spec: str, into: Path) -> None:
    done = subprocess.run(
        [npm, "pack", spec, "--pack-destination", str(into), "--silent"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    tarballs = list(into.glob("*.tgz"))
    if done.returncode != 0 or not tarballs:
        reason = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no tarball"]
        raise EnvironmentProblem(f"npm pack {spec} failed: {reason[0]}")
    with tarfile.open(tarballs[0]) as archive:
        archive.extractall(into, filter="data")
    (into / "package" / "bin" / "restate-server").chmod(0o755)
    tarballs[0].unlink()


def free_port() -> int:
    """A loopback port nobody listens on now (the kernel's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class RestateServer:
    """One restate-server process on loopback ports of its own, its data in `data`."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.ingress, self.admin, self.node, self.pgsql = (free_port() for _ in range(4))
        self.process: subprocess.Popen | None = None

    @property
    def scratch(self) -> Path:
        return self.data.parent / "restate-tmp"

    @property
    def ingress_url(self) -> str:
        return f"http://127.0.0.1:{self.ingress}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin}"

    def start(self) -> None:
        """Start the server (on the same data directory, after a kill) and wait until its admin
        API and ingress answer."""
        env = dict(
            os.environ,
            RESTATE_INGRESS__BIND_ADDRESS=f"127.0.0.1:{self.ingress}",
            RESTATE_ADMIN__BIND_ADDRESS=f"127.0.0.1:{self.admin}",
            RESTATE_ADMIN__QUERY_ENGINE__PGSQL_BIND_ADDRESS=f"127.0.0.1:{self.pgsql}",
            RESTATE_LOG_FILTER="error",
            # The server's invoker makes a temp folder per partition at each start (`invoker-*`,
            # under TMPDIR): in the example's workdir, so that it goes with the example.
            TMPDIR=str(self.scratch),
        )
        command = [str(server_binary()), "--no-logo", "--listen-mode", "tcp", "--node-name", "pymc"]
        command += ["--base-dir", str(self.data), "--bind-address", f"127.0.0.1:{self.node}"]
        self.data.mkdir(parents=True, exist_ok=True)
        self.scratch.mkdir(parents=True, exist_ok=True)
        log = (self.data.parent / "restate-server.log").open("ab")
        parent = os.getpid()
        self.process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=lambda: _die_with(parent)
        )
        log.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        with httpx.Client(timeout=2) as client:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.poll() is not None:
                    raise EnvironmentProblem(f"restate-server exited with {self.process.returncode} at start")
                with contextlib.suppress(httpx.HTTPError):
                    if self._answers(client):
                        return
                time.sleep(POLL)
        raise EnvironmentProblem(f"restate-server did not answer within {READY_TIMEOUT}s")

    def _answers(self, client: httpx.Client) -> bool:
        """The admin API, the ingress and every partition answer (a query over the invocations
        fails until each partition has its leader)."""
        if client.get(f"{self.admin_url}/health").status_code != 200:
            return False
        if client.get(f"{self.ingress_url}/restate/health").status_code != 200:
            return False
        query = {"query": "SELECT count(*) AS n FROM sys_invocation"}
        return client.post(f"{self.admin_url}/query", json=query).status_code == 200

    def answers(self) -> bool:
        """The server runs and its admin API answers."""
        if self.process is None or self.process.poll() is not None:
            return False
        try:
            return httpx.get(f"{self.admin_url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and reap it."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                process.kill()
        process.wait()


def _die_with(parent: int) -> None:
    """In the server's process before exec: the kernel kills it when the host process dies."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


if __name__ == "__main__":  # `python -m pymc_resume.bridge.adapters.restate_server install`
    import sys

    if sys.argv[1:] != ["install"]:
        sys.exit("usage: python -m pymc_resume.bridge.adapters.restate_server install")
    try:
        print(server_binary())
    except EnvironmentProblem as problem:
        sys.exit(f"error: {problem}")
