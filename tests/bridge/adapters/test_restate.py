"""The Restate adapter against a real restate-server (started per example, its data in the
example's workdir) and the SDK's endpoint served by real service processes, with real SIGKILLs.

Skipped when restate-sdk is not installed (`pip install -e '.[restate]' -c
constraints/restate-1.3.0.txt`); the server binary is fetched on first use (npm). Each test is a
few client operations (a second or two each, a second more for the server's start). The
profile of the first configuration runs once, in tests/bridge/test_profile_all.py.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.restate

pytest.importorskip(
    "restate",
    reason="restate-sdk is not installed "
    "(pip install 'pymc-resume[restate]' -c constraints/restate-1.3.0.txt)",
)

from live_steps import START, apply_steps, crash, resume

from pymc_resume.bridge.adapter import declared_variants
from pymc_resume.bridge.adapters.restate_workflows import RestateAdapter
from pymc_resume.bridge.hosting.workdirs import sweep
from pymc_resume.bridge.judging.session import Session
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.state import INITIAL

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages 0..3
RECOVER = {"action": "recover", "thread": 0, "crash": None}


def session_of(adapter=None):
    return Session(adapter or RestateAdapter(), SMALL.workflow, SMALL.values, step_timeout=60)


def details(session, thread=0):
    return [o["detail"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def fires(session, stage):
    return [e for e in session.sink.events() if e.kind == "fire" and e.stage == stage]


def test_declares_its_calls_and_fork_and_update_as_unsupported():
    adapter = RestateAdapter()
    assert adapter.version == "restate-sdk 1.3.0"
    assert adapter.capabilities == {"recorded-inputs", "late-inputs", "stuck-runs", "executions"}
    assert set(adapter.unsupported) == {"fork", "update"}
    variants = {op: [v.name for v in vs] for op, vs in declared_variants(adapter).items()}
    assert variants == {
        "start": ["run-send"],
        "resume": ["resolve-awakeable"],
        "resume-together": ["resolve-awakeable"],
        "recover": ["retry", "resume-invocation"],
    }
    with pytest.raises(ValueError, match="crash must be one of"):
        RestateAdapter(crash="machine")


def test_a_start_journals_each_step_and_suspends_at_the_first_awakeable():
    violated, session = apply_steps(session_of(), [START, resume(1), resume(2)], drain=False)
    assert violated == set()
    assert details(session) == ["parked at stage 2", "parked at stage 3", "completed"]
    [view] = session.observation.threads
    assert view.chain[0].stage == INITIAL and [c.stage for c in view.chain[1:]] == [0, 1, 2, 3]
    assert view.inputs == {2: 1, 3: 2} and view.run == "free" and view.late_inputs == ()


def test_a_kill_inside_a_step_replays_the_journal_and_runs_the_step_again_with_the_same_key():
    # ctx.run's result was not journaled: the retry runs the action again, with the same
    # ctx.uuid() (seeded by the invocation id), which the sink applies once.
    session = session_of()
    try:
        session.apply({"action": "start", "thread": 0, "crash": crash(1, "after-execute")})
        assert session.observation.threads[0].run == "dead"
        session.apply(RECOVER)
        effects = fires(session, 1)
        assert len(effects) == 2 and effects[0].key == effects[1].key and sum(e.applied for e in effects) == 1
        assert session.observation.threads[0].chain[-1].pc == 2
    finally:
        session.close()


def test_a_kill_after_a_step_was_journaled_does_not_run_the_step_again():
    session = session_of()
    try:
        session.apply({"action": "start", "thread": 0, "crash": crash(1, "after-commit")})
        session.apply({**RECOVER, "variant": "resume-invocation"})
        assert len(fires(session, 1)) == 1
        view = session.observation.threads[0]
        assert view.chain[-1].pc == 2 and view.run == "free"
    finally:
        session.close()


def test_a_second_resolve_of_a_completed_awakeable_is_journaled_and_never_read():
    # Killed after the interrupt's stage ran with v1 (not journaled): a resolve with v2 of the
    # same awakeable is answered 202 and journaled again under its signal index; the replay
    # continues with v1.
    steps = [START, resume(1, crash=crash(2, "after-execute")), resume(2)]
    violated, session = apply_steps(session_of(), steps, drain=False)
    assert violated == {"consume-once-value"}
    view = session.observation.threads[0]
    assert view.inputs == {2: 1} and view.late_inputs == ((2, 2),)


def test_a_resolve_after_completion_is_accepted_and_ignored():
    violated, session = apply_steps(session_of(), [START, resume(1), resume(1), resume(2)], drain=False)
    assert violated == {"consume-once-value"}
    assert details(session)[-1] == "completed"
    view = session.observation.threads[0]
    assert view.inputs == {2: 1, 3: 1} and view.late_inputs == ()


def test_a_killed_server_restarts_on_its_data_and_the_invocation_continues():
    session = session_of(RestateAdapter(crash="server"))
    try:
        for step in [START, resume(1, crash=crash(2, "after-commit")), RECOVER, resume(1)]:
            session.apply(step)
        view = session.observation.threads[0]
        assert view.chain[-1].pc == 4 and view.inputs == {2: 1, 3: 1} and view.run == "free"
        assert len(fires(session, 3)) == 1
    finally:
        session.close()


# -- nothing left behind, and the race command -------------------------------------------------


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _servers(root: int) -> dict[int, Path]:
    """The restate-server processes under `root`, each with its data directory."""
    servers = {}
    for pid in _descendants(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"restate-server") and b"--base-dir" in argv:
            servers[pid] = Path(argv[argv.index(b"--base-dir") + 1].decode())
    return servers


def _gone(servers: dict[int, Path], within: float = 15.0) -> bool:
    """Whether the servers' processes and their data directories are gone (within `within`)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = [pid for pid in servers if _running(pid)]
        if not alive and not any(data.exists() for data in servers.values()):
            return True
        time.sleep(0.1)
    return False


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie has ended: the test run's subreaper reaps it later)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _processes_gone(servers: dict[int, Path], within: float = 15.0) -> bool:
    return _gone({pid: Path("/nonexistent") for pid in servers}, within)


def _profile(tmp_path):
    command = [sys.executable, "-m", "pymc_resume", "profile", "restate", "--config", "awakeable"]
    command += ["--bounds", "small", "--examples", "0", "--no-shrink"]
    return subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def _watch(run, seconds: float, stop_after_first: bool) -> dict[int, Path]:
    seen: dict[int, Path] = {}
    deadline = time.monotonic() + seconds
    while run.poll() is None and time.monotonic() < deadline:
        seen.update(_servers(run.pid))
        if seen and stop_after_first:
            break
        time.sleep(0.05)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_profile_leaves_no_server_and_no_data_directory(tmp_path, how):
    # SIGTERM: the profile stops its hosts, which end their examples (server stopped, workdir
    # removed). SIGKILL: its hosts die with it (PR_SET_PDEATHSIG) and so does each host's
    # restate-server; the workdirs are the next run's to sweep (bridge/hosting/workdirs.py).
    run = _profile(tmp_path)
    try:
        seen = _watch(run, 60, stop_after_first=True)
        time.sleep(1.0)  # well inside an example: its server runs, a service process may too
        seen.update(_servers(run.pid))
        run.send_signal(how)
        run.wait(60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    assert seen, "the profile started no restate-server"
    assert _processes_gone(seen), {pid: str(data) for pid, data in seen.items()}
    if how == signal.SIGKILL:
        sweep()
    assert _gone(seen), {pid: str(data) for pid, data in seen.items()}


def test_race_k_2_consumes_the_parked_input_once(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "pymc_resume", "race", "restate", "--k", "2", "--json", "r.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    # Both racers are told ok (Restate answers every resolve 202); the gated stage runs once.
    [cell] = json.loads((tmp_path / "r.json").read_text())["cells"]
    assert cell["verdict"] == "holds" and cell["error"] is None
    assert cell["served"] == [2] * cell["trials"] and cell["consumptions"] == [1] * cell["trials"]


# -- the `object` configuration: forks by restart-as-new -----------------------------------------


def object_session():
    return session_of(RestateAdapter(handler="object"))


def fork(checkpoint, intent, value=None, thread=0):
    return {"action": "fork", "thread": thread, "checkpoint": checkpoint, "intent": intent, "value": value}


def test_the_object_configuration_declares_restart_as_new_for_fork():
    adapter = RestateAdapter(handler="object")
    assert set(adapter.unsupported) == {"update"} and adapter.options() == {
        "crash": "service",
        "handler": "object",
    }
    variants = {op: [v.name for v in vs] for op, vs in declared_variants(adapter).items()}
    assert variants["fork"] == ["restart-as-new"]
    with pytest.raises(ValueError, match="handler must be one of"):
        RestateAdapter(handler="service")


def test_a_replay_fork_keeps_the_journal_through_the_fork_point_and_nothing_after():
    # t1, forked at checkpoint 3 (the gated stage 3, whose value 2 the parent consumed), keeps
    # the journal through that awakeable's completion and, once served, runs stage 3 with the
    # copied value. t2, forked at checkpoint 2, keeps the journal before stage 2's run: stage 2's
    # completion, not stage 3's, which the parent consumed after (fork-intent violated there).
    start_first = {"action": "start", "thread": 1, "crash": None}
    steps = [START, resume(1), resume(2), fork(3, "replay"), start_first, fork(2, "replay")]
    violated, session = apply_steps(object_session(), steps, drain=False)
    assert violated == {"fork-intent"}
    assert details(session, 0)[-2].startswith("forked as t1 (inv_") and details(session, 1) == ["completed"]
    parent, first, second = session.observation.threads
    assert first.chain == parent.chain and first.inputs == parent.inputs == {2: 1, 3: 2}
    assert first.run == "free" and first.late_inputs == ()
    assert second.chain == parent.chain[:3] and second.inputs == {2: 1}


def test_an_edit_fork_resolves_the_new_invocations_awakeable_with_the_new_value():
    # Forked at checkpoint 2 with v3: the journal is kept before stage 2's awakeable; the new
    # invocation makes a new one, which the fork resolves with 3; stage 2 runs with 3.
    start_fork = {"action": "start", "thread": 1, "crash": None}
    steps = [START, resume(1), resume(2), fork(2, "edit", 3), start_fork]
    violated, session = apply_steps(object_session(), steps, drain=False)
    assert violated == set()
    assert details(session, 1) == ["parked at stage 3"]
    parent, child = session.observation.threads
    assert child.chain[:3] == parent.chain[:3] and child.chain[3].app == (1, 3, 0, 0)
    assert child.inputs == {2: 3} and parent.inputs == {2: 1, 3: 2}


def test_a_fork_of_a_parked_invocation_is_refused_by_the_server():
    # Restart-as-new takes a completed invocation: a suspended one is answered 409.
    violated, session = apply_steps(object_session(), [START, fork(1, "replay")], drain=False)
    assert violated == set()
    [outcome] = session.steps[-1]["outcome"]
    assert outcome["status"] == "refused" and outcome["by"] == "framework"
    assert (
        outcome["detail"].startswith("restart-as-new answered 409")
        and "is still running" in outcome["detail"]
    )
    assert len(session.observation.threads) == 1
