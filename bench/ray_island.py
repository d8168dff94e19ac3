"""Ray nodes on separate network hosts of this machine: one Linux network namespace per node
(the race command's island, `bridge/race/hosts.py`, without its PostgreSQL server), each node a
`ray start --block` inside its namespace with its own address, so that the explorer's Ray
actors talk to each other over TCP between network stacks, as on a cluster of machines.

    with RayIsland(nodes=2) as island:
        island.run(["pymc-resume", "check", "--engine", "ray", "--address", island.address])
        island.kill_node(1)        # SIGKILL every process of the second node
        island.start_node(1)       # and bring a fresh one up

The head is node 0; commands run on node 0's host (`run`, `start`), where the head's GCS is at
`address`. Every node has one CPU, so each partition's actor (which takes one) runs on its own
node. Root only (namespaces). Everything is removed when the `with` block ends: the island kills
every process left in its namespaces and deletes them, and the nodes' folder is removed; an
island whose creator was SIGKILLed is swept by the next one (`hosts.sweep`, `_sweep_folders`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pymc_resume.bridge.race import hosts
from pymc_resume.errors import EnvironmentProblem

GCS_PORT = 6379
OBJECT_STORE_BYTES = 100 * 2**20
JOIN_SECONDS = 60.0  # every node must be alive in the cluster within this


def _sweep_folders() -> None:
    """Remove the nodes' folders of islands whose creating process is gone (SIGKILLed)."""
    for folder in Path(tempfile.gettempdir()).glob("pmr-rayi-*-*"):
        pid = folder.name.split("-")[2]
        if pid.isdigit() and not hosts._alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


class RayIsland:
    """`nodes` Ray nodes, node i on its own network host at `addresses[i]`."""

    def __init__(self, nodes: int = 2) -> None:
        self.island = hosts.Island(hosts=nodes, postgres=False)
        self.addresses = self.island.addresses
        self.address = f"{self.addresses[0]}:{GCS_PORT}"
        self._folder: Path | None = None
        self._nodes: dict[int, subprocess.Popen] = {}

    def __enter__(self) -> RayIsland:
        self.island.__enter__()
        try:
            # Short: Ray's socket paths live under it and must fit in 107 bytes.
            _sweep_folders()
            self._folder = Path(tempfile.mkdtemp(prefix=f"pmr-rayi-{os.getpid()}-"))
            for node in range(len(self.addresses)):
                self.start_node(node)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill every node (with everything else in the namespaces), remove the folder."""
        self.island.close()
        for process in self._nodes.values():
            process.wait()
        self._nodes = {}
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def command(self, node: int, argv: list[str]) -> list[str]:
        """`argv` as run on node `node`'s host."""
        return ["ip", "netns", "exec", self.island.hosts[node], *argv]

    def run(self, argv: list[str], **options) -> subprocess.CompletedProcess:
        """Run `argv` on the head's host to completion (options as `subprocess.run`'s)."""
        return subprocess.run(self.command(0, argv), **options)

    def start(self, argv: list[str], **options) -> subprocess.Popen:
        """Start `argv` on the head's host (options as `subprocess.Popen`'s)."""
        return subprocess.Popen(self.command(0, argv), **options)

    def start_node(self, node: int) -> None:
        """Start node `node` (the head for 0) and wait until the cluster sees it alive."""
        assert self._folder is not None
        ray = str(Path(sys.executable).with_name("ray"))
        argv = [
            ray, "start", "--block", "--disable-usage-stats",
            "--node-ip-address", self.addresses[node],
            "--num-cpus", "1", "--object-store-memory", str(OBJECT_STORE_BYTES),
        ]  # fmt: skip
        if node == 0:
            argv += ["--head", "--port", str(GCS_PORT), "--include-dashboard=false"]
            argv += ["--temp-dir", str(self._folder)]
        else:
            argv += ["--address", self.address]
        log = open(self._folder / f"node-{node}.log", "ab")
        # A node that misses three health checks a second apart is dead (Ray's defaults take
        # about half a minute to say so).
        environment = {
            **os.environ,
            "RAY_TMPDIR": str(self._folder),
            "RAY_health_check_period_ms": "1000",
            "RAY_health_check_failure_threshold": "3",
        }
        with log:
            self._nodes[node] = subprocess.Popen(
                self.command(node, argv), stdout=log, stderr=subprocess.STDOUT, env=environment
            )
        self._wait_alive(node)

    def kill_node(self, node: int) -> None:
        """SIGKILL every process on node `node`'s host (its raylet, object store, actors): the
        node dies as a machine that lost power would, for the rest of the cluster."""
        if node == 0:
            raise ValueError("the head holds the cluster; kill another node")
        for pid in hosts._pids_in(self.island.hosts[node]):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        self._nodes.pop(node).wait()
        # The cluster learns of it by missed health checks (every second here, see `start_node`):
        # wait until it has, so that a node started again at this address is the new one.
        deadline = time.monotonic() + JOIN_SECONDS
        while self.addresses[node] in self.alive_nodes():
            if time.monotonic() > deadline:
                raise EnvironmentProblem(
                    f"Ray still reports node {node} alive {JOIN_SECONDS:.0f} s after its kill"
                )
            time.sleep(1.0)

    def alive_nodes(self) -> set[str]:
        """The addresses of the nodes the cluster's GCS reports alive."""
        probe = (
            f"import ray, logging; ray.init(address={self.address!r}, logging_level=logging.ERROR);"
            "print(' '.join(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))"
        )
        done = self.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
        return set(done.stdout.split()) if done.returncode == 0 else set()

    def _wait_alive(self, node: int) -> None:
        deadline = time.monotonic() + JOIN_SECONDS
        while time.monotonic() < deadline:
            if self._nodes[node].poll() is not None:
                break
            if self.addresses[node] in self.alive_nodes():
                return
            time.sleep(1.0)
        assert self._folder is not None
        tail = (self._folder / f"node-{node}.log").read_text(errors="replace").strip().splitlines()[-1:]
        raise EnvironmentProblem(f"Ray node {node} did not join within {JOIN_SECONDS:.0f} s: {tail}")
