"""The Ray engine (`--engine ray`) finds exactly what the multiprocess engine finds, on a Ray
cluster of two nodes that this module starts itself (each node has one CPU and each partition's
actor takes one, so the two partitions run on different nodes and every batch crosses between
them through Ray's object store). Its checkpoints recover as the other engines' do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")  # the ray extra; CI installs it (.ci/run), where skips fail

import run_summary
from ray.cluster_utils import Cluster
from two_phase import TwoPhase

from pymc_resume.explore import explore
from pymc_resume.explore.search import SnapshotSchedule
from pymc_resume.explore.snapshots import chain, snapshot
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.xdist_group("ray_cluster")]

ROOT = Path(__file__).resolve().parents[2]
NODE = {"num_cpus": 1, "object_store_memory": 80 * 2**20}


def summary(result):
    return (*run_summary.summary(result), result.complete)


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of two nodes, shut down after the module's tests, its files in a
    folder of its own (Ray writes its address file under RAY_TMPDIR) that is removed after
    it. Not under pytest's temporary folder: Ray's socket paths must fit in 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="pmr-ray-"))
    (folder / "ray").mkdir()
    previous = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(folder)
    started = Cluster(
        initialize_head=True,
        head_node_args={**NODE, "temp_dir": str(folder / "ray"), "include_dashboard": False},
    )
    try:
        started.add_node(**NODE)
        started.wait_for_nodes()
        yield started
    finally:
        started.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
        if previous is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = previous


def test_reference_counts_verdicts_and_trace_lengths_match_the_multiprocess_engine(cluster, explored):
    """At `small`, the `no-claim` mutant (its violation's trace rebuilt by asking the actors);
    the reference semantics itself is compared through `check`, below."""
    model = ResumeModel(load_bounds("small"), "no-claim")
    on_ray = explore(model, canonical=model.canonical, workers=2, engine="ray", address=cluster.address)
    assert summary(on_ray) == summary(explored("small", "no-claim", workers=2))
    assert len(on_ray.worker_peak_rss) == 2 and all(on_ray.worker_peak_rss)
    trace = on_ray.violations["consume-once-consumption"].trace
    for before, after in zip(trace, trace[1:]):
        assert (after.action, after.state) in list(model.successors(before.state))


def test_a_plain_model_matches_too_and_recovers_from_states_held_for_other_owners(cluster, tmp_path):
    """TwoPhase written plainly: the actors exchange fingerprints across nodes (`exchange`),
    and a checkpoint first hands the states each holds for the other to it."""
    on_ray = explore(TwoPhase(4), workers=2, engine="ray", address=cluster.address)
    assert summary(on_ray) == summary(explore(TwoPhase(4), workers=2))
    snapshots = SnapshotSchedule(str(tmp_path), every=0.0)
    first = explore(
        TwoPhase(4), workers=2, engine="ray", address=cluster.address, max_states=1200, snapshots=snapshots
    )
    assert not first.complete
    resumed = explore(
        TwoPhase(4),
        workers=2,
        engine="ray",
        address=cluster.address,
        from_snapshot=snapshot.load(tmp_path),
        snapshots=snapshots,
    )
    assert summary(resumed) == summary(on_ray)


def test_a_ray_run_stopped_midway_recovers_on_ray_to_the_same_result(cluster, explored, tmp_path):
    model = ResumeModel(load_bounds("small"), "stuck-claim")
    snapshots = SnapshotSchedule(str(tmp_path), every=0.0)
    first = explore(
        model,
        canonical=model.canonical,
        workers=2,
        engine="ray",
        address=cluster.address,
        max_states=5000,
        snapshots=snapshots,
    )
    assert not first.complete and "state limit" in first.stopped_because
    resumed = explore(
        model,
        canonical=model.canonical,
        workers=2,
        engine="ray",
        address=cluster.address,
        from_snapshot=snapshot.load(tmp_path),
        snapshots=snapshots,
    )
    assert summary(resumed) == summary(explored("small", "stuck-claim", workers=2))


def test_a_ray_run_recovers_from_a_chain_of_increments(cluster, explored, tmp_path, monkeypatch):
    """Each actor sends the driver only its increment's bytes; the driver writes them and
    records their lengths and digests, and a recovery joins the chain."""
    monkeypatch.setattr(chain, "OUTWEIGH", float("inf"))  # (the driver's: a chain, not bases)
    model = ResumeModel(load_bounds("small"), "stuck-claim")
    snapshots = SnapshotSchedule(str(tmp_path), every=0.0)
    ray_run = dict(canonical=model.canonical, workers=2, engine="ray", address=cluster.address)
    assert not explore(model, **ray_run, max_states=5000, snapshots=snapshots).complete
    saved = snapshot.load(tmp_path)
    assert all(len(pieces) > 2 for pieces in saved.partitions)
    resumed = explore(model, **ray_run, from_snapshot=saved, snapshots=snapshots)
    assert summary(resumed) == summary(explored("small", "stuck-claim", workers=2))


def test_check_engine_ray_gives_the_multiprocess_counts_and_nine_verdicts(cluster, tmp_path):
    """The issue's must-show, at `small` (at `default` it takes minutes on this machine)."""

    def check(name, *options):
        out = tmp_path / f"{name}.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pymc_resume",
                "check",
                "--bounds",
                "small",
                "--workers",
                "2",
                "--quiet",
                "--json",
                str(out),
                *options,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=os.environ,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(out.read_text())

    on_ray = check("ray", "--engine", "ray", "--address", cluster.address)
    here = check("multiprocess")
    counts = ("distinct_states", "states_generated", "depth", "complete")
    assert [on_ray[key] for key in counts] == [here[key] for key in counts]
    assert on_ray["clauses"] == here["clauses"] and len(on_ray["clauses"]) == 9
    assert (on_ray["engine"], here["engine"]) == ("ray", "multiprocess")


NAMED_TUPLE_MODEL = """
from typing import NamedTuple
from pymc_resume.explore import Invariant

class Counter(NamedTuple):
    count: int
    colour: str

class Model:
    invariants = [Invariant("BelowThirty", lambda s: s.count < 30)]
    deadlock_is_error = False

    def initial_states(self):
        return [Counter(0, "red")]

    def successors(self, s):
        if s.count < 40:
            yield "add", Counter(s.count + 1, s.colour)
            yield "paint", Counter(s.count, "blue" if s.colour == "red" else "red")

def model():
    return Model()
"""


def test_explore_a_model_file_whose_states_are_its_own_classes(cluster, tmp_path):
    """Each actor loads the file under the driver's module name before it unpickles the model:
    the plain codec finds the state class by module and name (it failed before, not loaded)."""
    path = tmp_path / "counter.py"
    path.write_text(NAMED_TUPLE_MODEL)

    def run(name, *options):
        out = tmp_path / f"{name}.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pymc_resume",
                "explore",
                f"{path}:model",
                "--workers",
                "2",
                "--quiet",
                "--json",
                str(out),
                *options,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=os.environ,
        )
        assert done.returncode == 1, done.stderr  # BelowThirty is violated
        return json.loads(out.read_text())

    on_ray = run("ray", "--engine", "ray", "--address", cluster.address)
    here = run("multiprocess")
    assert on_ray["distinct_states"] == here["distinct_states"] == 82
    assert on_ray["properties"] == here["properties"]
