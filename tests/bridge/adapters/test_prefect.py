"""The Prefect adapter against real Prefect flow runs on a real local Prefect API server (SQLite),
with real SIGKILLs of the process that executes the flow run.

Skipped when prefect is not installed (`pip install -e '.[prefect]' -c constraints/prefect-3.9.1.txt`).
A session here starts its own API server (a keeper process, 5-20 s under load); the profile and
`race` run one server per host template. The profile of every configuration runs once, in
tests/bridge/test_profile_all.py.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.prefect, pytest.mark.slow]

pytest.importorskip(
    "prefect",
    reason="prefect is not installed (pip install 'pymc-resume[prefect]' -c constraints/prefect-3.9.1.txt)",
)

from live_steps import START, resume

from pymc_resume.bridge.adapter import declared_variants
from pymc_resume.bridge.adapters.prefect_flows import (
    API_URL_VARIABLE,
    PrefectAdapter,
    start_server,
    stop_server,
)
from pymc_resume.bridge.hosting.workdirs import _start_time
from pymc_resume.bridge.judging.session import Session
from pymc_resume.bridge.repro.replay import replay_repro
from pymc_resume.model.bounds import load_bounds

SMALL = load_bounds("small")  # step, effect-then-interrupt, gated: stages 0..3


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One API server for this module's sessions, replays and races (as a host template's
    hosts share one): the preload of a template, and a `race` command, use the one named here."""
    api, keeper = start_server(tmp_path_factory.mktemp("prefect") / "server")
    os.environ[API_URL_VARIABLE] = api
    yield api
    del os.environ[API_URL_VARIABLE]
    stop_server(keeper)


def details(session, thread=0):
    return [o["detail"] for step in session.steps if step["thread"] == thread for o in step["outcome"]]


def test_declares_its_calls_and_fork_and_update_as_unsupported():
    adapter = PrefectAdapter()
    assert adapter.version.startswith("prefect 3.")
    assert set(adapter.unsupported) == {"fork", "update"}
    variants = {op: [v.name for v in vs] for op, vs in declared_variants(adapter).items()}
    assert variants == {
        "start": ["run-deployment"],
        "resume": ["resume-flow-run"],
        "resume-together": ["resume-flow-run"],
        "recover": ["execute"],
    }
    with pytest.raises(ValueError, match="mode must be one of"):
        PrefectAdapter(mode="sleep")


@pytest.mark.parametrize("mode", ["suspend", "pause"])
def test_a_run_parks_refuses_a_schema_invalid_value_and_completes(mode, server):
    session = Session(PrefectAdapter(mode=mode), SMALL.workflow, SMALL.values, step_timeout=120)
    try:
        for step in [START, resume(-1), resume(1), resume(2), resume(1)]:
            session.apply(step)
        outcomes = details(session)
        assert outcomes[0] == "parked at stage 2"
        assert "-1 is less than the minimum of 0" in outcomes[1]  # the server validated the RunInput
        assert outcomes[2:4] == ["parked at stage 3", "completed"]
        assert "NotPausedError" in outcomes[4]  # a late resume is refused, nothing recorded
        [view] = session.observation.threads
        assert [c.stage for c in view.chain[1:]] == [0, 1, 2, 3] and view.inputs == {2: 1, 3: 2}
        assert view.run == "free"
    finally:
        session.close()


# What `profile prefect` wrote for the effect-exactly-once cell (shortened): a kill after the
# effect of stage 1 ran, before its task's result was persisted; the recovery runs the task again.
EFFECT_TWICE = {
    "format": "pymc-resume-repro/1",
    "adapter": "prefect",
    "adapter_options": {"mode": "suspend"},
    "seed": 0,
    "bounds": {
        "name": "small",
        "nodes": ["step", "effect-then-interrupt", "gated"],
        "values": 2,
        "processes": 2,
        "resumes": 2,
        "crashes": 1,
        "forks": 1,
        "invalid_updates": 1,
    },
    "clause": "effect-exactly-once",
    "steps": [
        {"action": "start", "thread": 0, "crash": {"stage": 1, "when": "after-execute"}},
        {"action": "recover", "thread": 0, "crash": None},
    ],
}


def test_the_effect_exactly_once_repro_replays(server):
    result = replay_repro(EFFECT_TWICE, step_timeout=120, attempts=1, allowed=("prefect",))
    assert result.error is None, result.error
    assert result.reproduces, result.describe()


def test_a_session_leaves_no_server_and_a_killed_host_none_either(tmp_path):
    # The keeper ends its server and removes its folder when its parent dies, SIGKILL included.
    script = (
        "import sys, time; from pathlib import Path;"
        "from pymc_resume.bridge.adapters.prefect_flows import start_server;"
        f"api, keeper = start_server(Path({str(tmp_path / 'server')!r}));"
        "print(keeper, flush=True); time.sleep(600)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    keeper = int(parent.stdout.readline())
    time.sleep(2)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (tmp_path / "server").exists():
        time.sleep(0.2)
    assert not (tmp_path / "server").exists()
    while time.monotonic() < deadline and _start_time(keeper) is not None:
        time.sleep(0.2)
    assert _start_time(keeper) is None  # gone: it noticed its owner end


def test_race_k_2_runs(server, tmp_path):
    out = tmp_path / "race.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pymc_resume",
            "race",
            "prefect",
            "--k",
            "2",
            "--trials",
            "1",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    cells = json.loads(out.read_text())["cells"]
    assert cells and all(cell["k"] == 2 and cell["trials"] == 1 for cell in cells)
    # Two resumes of one paused run can both be accepted and both run it (docs/prefect.md): a
    # race, so one or two consumptions per trial, never none.
    assert all(1 <= consumed <= 2 for cell in cells for consumed in cell["consumptions"])
