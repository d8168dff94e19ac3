"""Child processes for the bridge: the barrier, real SIGKILLs, failures reported."""

import os
import time

from pymc_resume.bridge.adapter import CrashPoint
from pymc_resume.bridge.kit.process import FAILED, KILLED, RETURNED, ControlledPoints, run_in_children


def test_barrier_releases_every_waiting_child_together():
    def task(gate):
        gate.wait()
        return time.monotonic()

    results = run_in_children([task, task, task], synchronized=True)
    assert [r.status for r in results] == [RETURNED] * 3
    times = [r.value for r in results]
    assert max(times) - min(times) < 0.5


def test_a_child_that_finishes_before_its_gate_does_not_block_the_others():
    def early(gate):
        return "refused early"

    def late(gate):
        gate.wait()
        return "released"

    results = run_in_children([early, late], synchronized=True)
    assert [r.value for r in results] == ["refused early", "released"]


def test_crash_point_is_a_real_sigkill_and_exceptions_are_reported():
    def crashing(gate):
        ControlledPoints(CrashPoint(2, "after-commit")).at("after-commit", 2)
        return "unreachable"

    def failing(gate):
        raise ValueError("bad")

    killed, failed = run_in_children([crashing, failing])
    assert killed.status == KILLED and killed.signal == 9
    assert failed.status == FAILED and "ValueError: bad" in failed.error


def test_children_are_separate_processes():
    [result] = run_in_children([lambda gate: os.getpid()])
    assert result.value != os.getpid()


# -- adapters that misbehave: run in a host process the bridge can always kill ----------------

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pymc_resume.bridge.hosting.workdirs import PREFIX, default_workroot, make_workdir, remove_owned, sweep

HERE = Path(__file__).parents[1]  # tests/bridge, where bridge_test_adapters.py is
STEP_TIMEOUT = 2.0


def _marked(marker: str) -> list[int]:
    """Processes whose environment carries `marker` (what a command run with it left)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in environ:
            found.append(int(entry.name))
    return found


def _workdirs_of(pid: int) -> list[Path]:
    root = Path(default_workroot() or "/tmp")
    return [entry for entry in root.iterdir() if entry.name.startswith(f"{PREFIX}{pid}-")]


def run_marked(args, cwd, timeout=120):
    """Run `pymc-resume ARGS` with the test adapters importable and a marker in its
    environment; (the completed run, seconds, processes left, work directories left)."""
    marker = f"PYMC_RESUME_TEST_MARKER={uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(HERE), marker.split("=")[0]: marker.split("=")[1]}
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "pymc_resume", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = process.communicate(timeout=timeout)
    seconds = time.monotonic() - started
    left = _marked(marker)
    for pid in left:  # never leave them running, whatever the assertions say
        os.kill(pid, signal.SIGKILL)
    run = subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    return run, seconds, left, _workdirs_of(process.pid)


@pytest.mark.parametrize(
    "adapter, step",
    [
        ("HangingConstructorAdapter", "building the adapter did not finish within the step timeout"),
        ("HangingOpenAdapter", "open the adapter did not finish within the step timeout"),
        ("AlarmBlockingAdapter", "(resume t0 with"),
        ("ExitingAdapter", "SystemExit"),
        ("FailingOpenAdapter", "open the adapter: RuntimeError: cannot open the store"),
        ("DyingAdapter", "failed: the adapter's process exited with status 3"),
    ],
)
def test_a_misbehaving_adapter_is_one_line_exit_2_within_the_deadline_leaving_nothing(
    tmp_path, adapter, step
):
    spec = f"bridge_test_adapters:{adapter}"
    run, seconds, left, workdirs = run_marked(
        [
            "fuzz",
            spec,
            "--examples",
            "5",
            "--seed",
            "1",
            "--step-timeout",
            str(STEP_TIMEOUT),
            "--repro-dir",
            str(tmp_path / "repros"),
            "--json",
            str(tmp_path / "out.json"),
        ],
        cwd=tmp_path,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    [line] = run.stderr.strip().splitlines()
    assert spec in line and step in line, line
    assert seconds < 30, seconds  # one step timeout, plus starting Python twice over
    assert left == [] and workdirs == []


def test_profile_of_an_adapter_that_cannot_open_exits_2(tmp_path):
    spec = "bridge_test_adapters:FailingOpenAdapter"
    run, _, left, workdirs = run_marked(["profile", spec, "--examples", "0"], cwd=tmp_path)
    assert run.returncode == 2, run.stdout + run.stderr
    [line] = [line for line in run.stderr.splitlines() if line.startswith("pymc-resume:")]  # not progress
    assert spec in line and "cannot open the store" in line
    assert left == [] and workdirs == []


def test_work_directories_of_a_dead_owner_are_swept_and_live_ones_kept():
    mine = make_workdir()
    dead = Path(default_workroot() or "/tmp") / f"{PREFIX}999999999-1-test"
    dead.mkdir()
    try:
        removed = sweep()
        assert dead in removed and not dead.exists()
        assert mine.exists() and mine not in removed
    finally:
        mine.rmdir()
        if dead.exists():
            dead.rmdir()


def _found(repros: Path, out: Path) -> bool:
    """Whether a run has written its first finding: a repro, then the JSON that reports it."""
    return repros.is_dir() and bool(list(repros.glob("*.json"))) and out.exists()


def _fuzz_until_its_first_finding(
    tmp_path: Path, marker: str, **streams
) -> tuple[subprocess.Popen, Path, Path]:
    """A fuzz run of a fault found in its first example, waited for until it has written its
    first finding (at most 120 s): (the running process, its repro folder, its JSON path)."""
    repros, out = tmp_path / "repros", tmp_path / "out.json"
    command = [sys.executable, "-m", "pymc_resume", "fuzz", "reference", "--fault", "record-second-resume"]
    command += ["--seed", "1", "--examples", "1000", "--repro-dir", str(repros), "--json", str(out)]
    env = {**os.environ, "PYMC_RESUME_TEST_MARKER": marker}
    process = subprocess.Popen(command, cwd=tmp_path, env=env, **streams)
    deadline = time.monotonic() + 120
    while not _found(repros, out) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    return process, repros, out


def test_a_fuzz_run_killed_right_after_its_first_finding_has_its_repro_and_json_on_disk(tmp_path):
    marker = uuid.uuid4().hex
    process, repros, out = _fuzz_until_its_first_finding(
        tmp_path, marker, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    process.kill()  # SIGKILL: nothing of the run's own cleanup happens
    process.wait()
    [repro] = repros.glob("*.json")
    assert json.loads(repro.read_text())["clause"] == "consume-once-value"
    assert list(repros.glob("test_repro_*.py"))
    verdict = json.loads(out.read_text())["clauses"]["consume-once-value"]["verdict"]
    assert verdict in ("unconfirmed", "violated")  # seen; confirmed if the kill came later
    replay = subprocess.run(
        [sys.executable, "-m", "pymc_resume", "replay", str(repro)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert replay.returncode == 1, replay.stdout + replay.stderr
    # What the killed run could not clean up: its host died with it, its work directory is
    # swept by the next run.
    sweep()
    assert _workdirs_of(process.pid) == []
    deadline = time.monotonic() + 10
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked(marker) == []


def _fuzz_json(tmp_path, *args):
    out = tmp_path / "out.json"
    run, seconds, left, workdirs = run_marked(
        [
            "fuzz",
            "reference",
            "--seed",
            "1",
            "--examples",
            "100000",
            "--json",
            str(out),
            "--repro-dir",
            str(tmp_path / "repros"),
            *args,
        ],
        cwd=tmp_path,
    )
    assert left == [] and workdirs == []
    return run, seconds, json.loads(out.read_text())


def test_max_seconds_stops_a_run_cleanly_with_its_findings_reported(tmp_path):
    run, seconds, data = _fuzz_json(tmp_path, "--fault", "record-second-resume", "--max-seconds", "4")
    told = run.stdout + run.stderr
    assert run.returncode == 1, told
    assert seconds < 4 + 30, told  # the budget, confirming replays, and starting Python
    assert data["finished"] and data["stopped"] and "--max-seconds" in data["stopped"], told
    assert "stopped early" in run.stdout
    result = data["clauses"]["consume-once-value"]
    assert result["verdict"] == "violated" and Path(result["repro"]).exists(), told
    assert data["examples"] >= 1 and data["shrink_replays"] >= 1, told


def test_max_seconds_on_a_correct_adapter_exits_0_with_every_id_holding(tmp_path):
    run, seconds, data = _fuzz_json(tmp_path, "--max-seconds", "3")
    assert run.returncode == 0, run.stdout + run.stderr
    assert seconds < 3 + 20
    assert data["stopped"] and all(
        c["verdict"] == "holds" or c["reason"].startswith("not checked") for c in data["clauses"].values()
    )  # skipped: nothing ran its operations
    assert data["clauses"]["liveness"]["verdict"] == "holds"


def test_sigterm_ends_a_fuzz_run_its_findings_kept_and_nothing_left(tmp_path):
    marker = uuid.uuid4().hex
    process, repros, out = _fuzz_until_its_first_finding(
        tmp_path, marker, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 143, stderr
    assert list(repros.glob("*.json")) and json.loads(out.read_text())["clauses"]
    assert _workdirs_of(process.pid) == [] and _marked(marker) == []


def test_a_command_that_is_ending_removes_only_its_own_work_directories(tmp_path):
    mine = [make_workdir(tmp_path), make_workdir(tmp_path)]
    (mine[0] / "store.db").write_text("x")
    other = tmp_path / f"{PREFIX}1-1-another-owner"
    other.mkdir()
    assert sorted(remove_owned(tmp_path)) == sorted(mine)
    assert not any(path.exists() for path in mine) and other.exists()


def test_the_work_directory_of_a_killed_owner_not_yet_reaped_is_swept():
    """A SIGKILLed owner whose parent has not reaped it yet is a zombie: it has ended, so its
    directory goes (a race killed in a shell, swept by the next run a moment later)."""
    import signal
    import time

    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    started = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    owned = Path(default_workroot() or "/tmp") / f"{PREFIX}{pid}-{started}-zombie"
    try:
        owned.mkdir()
        assert owned not in sweep()  # its owner is running
        os.kill(pid, signal.SIGKILL)
        while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)
        assert owned in sweep() and not owned.exists()
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        if owned.exists():
            owned.rmdir()
