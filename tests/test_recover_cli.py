"""`pymc-resume check` killed with SIGKILL mid-run, then `--recover`: identical counts and verdicts."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pymc_resume.check import judge
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel

COUNTS = ("distinct_states", "states_generated", "depth")


def check(*args):
    return [sys.executable, "-m", "pymc_resume", "check", "--quiet", *args]


def verdicts(data):
    return {cid: (c["verdict"], len(c["trace"] or ())) for cid, c in data["clauses"].items()}


def assert_no_process_mentions(text, seconds=10.0):
    """The killed run's workers notice their coordinator is gone and exit."""
    deadline = time.monotonic() + seconds
    while True:
        alive = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if text.encode() in cmdline.read():
                        alive.append(entry)
            except OSError:
                continue
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not alive, f"processes of the killed run still alive: {alive}"


def expected_verdicts(bounds, result):
    """The verdicts `check` prints for this exploration, as `verdicts` reads them from its JSON."""
    judged = judge(ResumeModel(load_bounds(bounds)), result)
    return {cid: (v.verdict, len(v.trace or ())) for cid, v in judged.items()}


def killed_then_recovered(tmp_path, bounds, workers, whole, levels_before_kill):
    """Kill `check` mid-run, recover it, and compare with `whole`, the uninterrupted exploration."""
    recovered_json, folder = tmp_path / "rec.json", tmp_path / "ck"
    run = subprocess.Popen(check("--bounds", bounds, "--workers", workers, "--checkpoint-dir",
                                 str(folder), "--checkpoint-every", "0"))
    pointer = folder / "current"
    # Kill once a snapshot some levels deep is published: mid-run, whatever the machine's speed.
    while run.poll() is None and not (
        pointer.exists() and int(pointer.read_text().strip().split("-")[1]) >= levels_before_kill
    ):
        time.sleep(0.02)
    assert run.poll() is None, "the run finished before it could be killed"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    assert (folder / "current").exists()
    assert_no_process_mentions(str(folder))
    done = subprocess.run(check("--recover", str(folder), "--json", str(recovered_json)))
    recovered = json.loads(recovered_json.read_text())
    assert done.returncode == 0
    assert [recovered[k] for k in COUNTS] == [whole.distinct_states, whole.states_generated, whole.depth]
    assert verdicts(recovered) == expected_verdicts(bounds, whole)


def test_sigkill_then_recover_at_small(tmp_path, explored):
    killed_then_recovered(tmp_path, "small", "1", explored("small"), levels_before_kill=10)


@pytest.mark.slow
def test_sigkill_then_recover_at_default_with_two_workers(tmp_path, default_exploration):
    killed_then_recovered(tmp_path, "default", "2", default_exploration, levels_before_kill=20)
