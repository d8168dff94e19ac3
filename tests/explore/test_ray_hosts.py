"""The Ray engine across network hosts: two Ray nodes, each in its own network namespace on this
machine (`bench/ray_island.py`), joined by `--engine ray --address`, give the counts and verdicts
of one host; a node killed mid-run ends the run with one line, and `--recover` continues it from
its last snapshot to the same counts, under another PYTHONHASHSEED."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")  # the ray extra; CI installs it (.ci/run), where skips fail

from bench.ray_hosts import TARGET
from bench.ray_island import RayIsland
from pymc_resume.bridge.race.hosts import running_as_root

pytestmark = [
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.xdist_group("ray_hosts"),
    pytest.mark.skipif(not running_as_root(), reason="network namespaces need root"),
]

ROOT = Path(__file__).resolve().parents[2]
N = 7  # TwoPhase with 7 resource managers: 2^7 + 4^7 + 6^7 states, about 20 levels
STATES = 2**N + 4**N + 6**N


@pytest.fixture(scope="module")
def island():
    with RayIsland(nodes=2) as started:
        yield started


def environment(seed: str = "0") -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": seed}


def command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "pymc_resume", *arguments, "--quiet"]


def test_check_on_two_hosts_gives_the_single_host_counts_and_verdicts(island, tmp_path):
    on_hosts, alone = tmp_path / "hosts.json", tmp_path / "alone.json"
    ray = ["--engine", "ray", "--address", island.address, "--json", str(on_hosts)]
    done = island.run(
        command("check", "--bounds", "small", "--workers", "2", *ray),
        env=environment(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        command("check", "--bounds", "small", "--workers", "2", "--json", str(alone)),
        env=environment(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert same_run(on_hosts) == same_run(alone)


def same_run(path: Path) -> dict:
    """What a run found, without how it ran (engine, seconds, memory)."""
    found = json.loads(path.read_text())
    return {k: v for k, v in found.items() if k not in ("engine", "seconds", "peak_rss_mib")}


def test_a_node_killed_mid_run_ends_it_in_one_line_and_recover_finishes_it(island, tmp_path):
    target = tmp_path / "two_phase_target.py"
    target.write_text(TARGET.format(n=N))
    folder, result = tmp_path / "snapshots", tmp_path / "result.json"
    ray = ["--engine", "ray", "--address", island.address]
    snapshots = ["--checkpoint-dir", str(folder), "--checkpoint-every", "0"]
    run = island.start(
        command("explore", f"{target}:model", "--workers", "2", *ray, *snapshots),
        env=environment("1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (folder / "current").exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run.poll() is None, "the run ended before its first snapshot: make the model larger"
        island.kill_node(1)
        out, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        island.start_node(1)
    assert run.returncode == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Ray" in err, err
    recovered = island.run(
        command("explore", f"{target}:model", *ray, "--recover", str(folder), "--json", str(result)),
        env=environment("2"), capture_output=True, text=True,
    )  # fmt: skip
    assert recovered.returncode == 0, recovered.stderr
    assert json.loads(result.read_text())["distinct_states"] == STATES
