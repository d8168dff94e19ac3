"""The Strands Agents adapter against a real `Agent` with a scripted model, interrupts raised by a
`BeforeToolCallEvent` hook or by the tool, and a real `FileSessionManager`, with real SIGKILLs.

Skipped when strands-agents is not installed (`pip install -e '.[strands]' -c
constraints/strands-1.62.0.txt`). Each session test is a few client operations (about a second);
the command-line tests (a profile row, a replay, a killed profile, a race) take about 25 s.
"""

import json
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.strands

pytest.importorskip(
    "strands",
    reason="strands-agents is not installed "
    "(pip install 'pymc-resume[strands]' -c constraints/strands-1.62.0.txt)",
)

from live_steps import START, crash, reproduces_again, resume

from pymc_resume.bridge.adapter import declared_variants
from pymc_resume.bridge.adapters.strands_agents import StrandsAdapter
from pymc_resume.bridge.hosting.workdirs import default_workroot
from pymc_resume.bridge.judging.session import Session, Violation
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.model.state import INITIAL, UPDATE

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages 0..3
RECOVER = {"action": "recover", "thread": 0, "crash": None}
INTERRUPTS = ["hook", "tool"]


@contextmanager
def applied(steps, interrupt="hook"):
    """Apply `steps` (no drain: recoveries are steps here) up to the first violation; yield (the
    violated clause ids, the session) while its store and sink can still be read."""
    session = Session(StrandsAdapter(interrupt), SMALL.workflow, SMALL.values, step_timeout=60)
    violated = set()
    try:
        try:
            for step in steps:
                session.apply(step)
        except Violation as violation:
            violated = set(violation.clauses)
        yield violated, session
    finally:
        session.close()


def statuses(session, thread=0):
    return [o["status"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def executions(session, stage):
    return [e for e in session.sink.events() if e.kind == "execute" and e.stage == stage]


def stages(session, thread=0):
    return [c.stage for c in session.observation.threads[thread].chain[1:]]


def test_declares_its_calls_and_fork_as_unsupported():
    adapter = StrandsAdapter()
    assert adapter.version == "strands-agents 1.62.0"
    assert adapter.capabilities == {"recorded-inputs", "executions"}  # no lease: no liveness
    assert set(adapter.unsupported) == {"fork"}
    assert {op: [v.name for v in variants] for op, variants in declared_variants(adapter).items()} == {
        "start": ["call", "stream-async"],
        "resume": ["call", "stream-async"],
        "resume-together": ["call"],
        "recover": ["call", "stream-async"],
        "update": ["state-set"],
    }
    assert "BeforeToolCallEvent" in adapter.variants[0].call
    assert "tool_context.interrupt" in StrandsAdapter("tool").variants[0].call
    assert adapter.options() == {"interrupt": "hook"}
    with pytest.raises(ValueError, match="interrupt must be one of"):
        StrandsAdapter("middleware")


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_a_resume_from_another_process_continues_from_the_session_and_a_second_one_is_refused(interrupt):
    late = {**resume(1), "variant": "stream-async"}
    with applied([START, resume(1), resume(2), late], interrupt) as (violated, session):
        assert violated == set()
        assert statuses(session) == ["ok", "ok", "ok", "refused"]
        assert session.steps[0]["outcome"][0]["detail"] == "stopped for s2"
        refused = session.steps[3]["outcome"][0]
        assert refused["by"] == "framework" and "not in interrupt state" in refused["detail"]
        view = session.observation.threads[0]
        assert view.chain[0].stage == INITIAL and stages(session) == [0, 1, 2, 3]
        assert view.inputs == {2: 1, 3: 2}
        assert [len(executions(session, s)) for s in range(4)] == [1, 1, 1, 1]


@pytest.mark.parametrize("variant", ["call", "stream-async"])
def test_a_kill_between_the_effect_and_its_commit_fires_it_again_unkeyed(variant):
    killed = {"action": "start", "thread": 0, "crash": crash(1, "after-execute"), "variant": variant}
    with applied([killed, {**RECOVER, "variant": variant}]) as (violated, session):
        assert violated == {"effect-exactly-once"}
        fires = [e for e in session.sink.events() if e.kind == "fire" and e.stage == 1]
        assert len(fires) == 2 and fires[0].key is None is fires[1].key  # Strands documents no key
        assert len(executions(session, 0)) == 1  # its result was stored: the model went on after it


@pytest.mark.parametrize("interrupt", INTERRUPTS)
def test_a_kill_after_the_answered_tool_result_was_written_lets_a_second_response_run_it_again(interrupt):
    # The tool result message is written, the agent record (interrupt state still activated) is
    # not: the restored agent waits at the interrupt again, takes a second response and runs it.
    with applied([START, resume(1, crash(2, "after-commit")), resume(2)], interrupt) as (violated, session):
        assert "prefix-continuation" in violated
        assert statuses(session) == ["ok", "crashed", "ok"]
        assert stages(session) == [0, 1, 2, 2]
        assert len(executions(session, 2)) == 2


def test_a_kill_after_a_tool_result_was_written_leaves_the_agent_state_behind_it():
    # Killed after stage 0's result message, before the agent record with the state it wrote:
    # recovery continues the conversation (stage 0 is not run again) on the older agent state.
    steps = [
        {"action": "start", "thread": 0, "crash": crash(0, "after-commit")},
        RECOVER,
        resume(1),
        resume(1),
    ]
    with applied(steps) as (violated, session):
        assert violated == {"recovery-determinism"}
        assert [len(executions(session, s)) for s in range(4)] == [1, 1, 1, 1]
        assert session.observation.threads[0].chain[-1].app[0] == 0  # stage 0's field lost


def test_an_update_is_the_agent_state_synced_and_a_schema_invalid_one_is_kept():
    with applied([START, {"action": "update", "thread": 0, "value": 1}, resume(1)]) as (violated, session):
        assert violated == set()
        assert stages(session) == [0, 1, UPDATE, 2]
        assert [c.app[-1] for c in session.observation.threads[0].chain[3:]] == [1, 1]  # tools ran on it
    with applied([START, {"action": "update", "thread": 0, "value": -1}]) as (violated, session):
        assert violated == {"checkpoint-validity"}
        assert statuses(session) == ["ok", "ok"]


def test_concurrent_responses_each_run_the_tool():
    together = {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "after-load"}
    with applied([START, together]) as (violated, session):
        assert "consume-once-consumption" in violated
        assert statuses(session) == ["ok", "ok", "ok"]
        assert len(executions(session, 2)) == 2


# -- the command line: a profile row, a replay, a killed profile, a race ----------------------

ROW = {  # file-session/hook and file-session/tool alike (docs/strands.md)
    "prefix-continuation": "violated",
    "effect-exactly-once": "violated",
    "fork-determinism": "not-applicable",
    "checkpoint-validity": "violated",
    "consume-once-value": "violated",
    "consume-once-consumption": "violated",
    "recovery-determinism": "violated",
    "fork-intent": "not-applicable",
    "liveness": "skipped",
}


def cli(*args, cwd, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pymc_resume", *args],
        cwd=cwd,
        **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen},
    )


def left_by(pid: int) -> list[Path]:
    """The example directories a bridge process left (named after it, docs: workdirs.py)."""
    return list(Path(default_workroot() or tempfile.gettempdir()).glob(f"pymc-resume-{pid}-*"))


@pytest.mark.slow
def test_the_tool_configurations_profile_row_and_a_replayed_repro(tmp_path):
    # tests/bridge/test_profile_all.py profiles file-session/hook (the first configuration) and
    # replays its repros; the same row here for the other, with one of its repros replayed.
    out = tmp_path / "profile.json"
    run = cli(
        "profile", "strands", "--config", "file-session/tool", "--bounds", "small", "--examples", "0",
        "--no-shrink", "--json", str(out), cwd=tmp_path,
    )  # fmt: skip
    stdout, stderr = run.communicate()
    assert run.returncode == 1, stdout + stderr
    [profile] = json.loads(out.read_text())["profiles"]
    assert profile["adapter_options"] == {"interrupt": "tool"}
    assert {id: profile["clauses"][id]["verdict"] for id in CLAUSE_IDS} == ROW
    assert "Strands has no fork" in profile["clauses"]["fork-determinism"]["reason"]
    repro = profile["clauses"]["prefix-continuation"]["repro"]
    assert reproduces_again(json.loads((tmp_path / repro).read_text()))
    assert left_by(run.pid) == []  # the profile removed its example directories


@pytest.mark.slow
def test_a_killed_profile_leaves_nothing_once_the_next_run_sweeps(tmp_path):
    profile = cli("profile", "strands", "--bounds", "small", "--examples", "0", cwd=tmp_path)
    try:
        assert "targeted scenarios" in profile.stderr.readline()  # it is running its battery
        deadline = time.monotonic() + 30
        while not left_by(profile.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert left_by(profile.pid)  # an example's directory, mid-battery
        hosts = descendants_of(profile.pid)
        assert hosts
    finally:
        profile.send_signal(signal.SIGKILL)
        profile.communicate()
    deadline = time.monotonic() + 10  # its hosts die with it (PR_SET_PDEATHSIG)
    while any(map(running, hosts)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(running, hosts))
    one_step = tmp_path / "one.toml"
    one_step.write_text(ONE_STEP)
    swept = cli(
        "profile", "strands", "--config", "file-session/hook", "--bounds", str(one_step), "--examples", "0",
        cwd=tmp_path,
    )  # fmt: skip
    stdout, stderr = swept.communicate()
    assert swept.returncode in (0, 1), stdout + stderr
    assert left_by(profile.pid) == [] and left_by(swept.pid) == []  # swept, and none of its own


def descendants_of(pid: int) -> list[str]:
    """The pids of a process's children, theirs, and so on (from /proc: no procps needed); the
    hosts are children of a host template, itself the bridge's child."""
    parents = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                parents[entry.name] = (entry / "stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue
    found, frontier = [], [str(pid)]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def running(pid: str) -> bool:
    """Whether the process runs (a zombie has ended: the test run's reaper adopts and reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


ONE_STEP = """
description = "one step node: a profile, cheaply"
nodes = ["step"]
values = 2
processes = 2
resumes = 1
crashes = 1
forks = 1
invalid_updates = 1
"""


@pytest.mark.slow
def test_race_k_2_runs_and_both_racers_run_the_gated_tool(tmp_path):
    out = tmp_path / "race.json"
    run = cli("race", "strands", "--k", "2", "--trials", "2", "--json", str(out), cwd=tmp_path)
    stdout, stderr = run.communicate()
    assert run.returncode == 1, stdout + stderr
    [cell] = json.loads(out.read_text())["cells"]
    assert cell["consumptions"] == [2, 2] and cell["fires"] == [2, 2]
    assert left_by(run.pid) == []
