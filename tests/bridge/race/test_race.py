"""The concurrent-resume race: k real processes resume one parked interrupt at once.

The reference adapter is the control (one racer served, saturation 0); LangGraph without the
gate consumes the interrupt once per racer; with the gate exactly once. A claimant killed with
a real SIGKILL after its claim is recovered with the value it claimed. Across two network hosts
(namespaces and a PostgreSQL server the race creates, root only) the same holds. The command's
exit codes and one-line errors are checked as a user runs it.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pymc_resume.bridge.adapter import CRASHED, OK, REFUSED
from pymc_resume.bridge.race.race import (
    CANNOT_RUN,
    HOLDS,
    VIOLATED,
    RaceInputError,
    plan_cells,
    postgres_unreachable,
    postgres_url,
    race_once,
    run_race,
)


def cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", "race", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def langgraph_or_skip():
    pytest.importorskip(
        "langgraph.checkpoint.sqlite",
        reason="langgraph is not installed (pip install 'pymc-resume[langgraph]')",
    )


def postgres_or_skip():
    langgraph_or_skip()
    pytest.importorskip(
        "langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed"
    )
    why = postgres_unreachable(postgres_url())
    if why:
        pytest.skip(why)


# -- the control: the reference adapter --------------------------------------------------------


def test_the_reference_adapter_serves_one_racer_and_refuses_the_other():
    from pymc_resume.bridge.adapters.reference import ReferenceAdapter

    trial = race_once(ReferenceAdapter, 2)
    assert (trial.fires, trial.consumptions, trial.applied) == (1, 1, 1)
    assert sorted(r.status for r in trial.racers) == [OK, REFUSED]
    assert trial.saturation(2) == 0 and trial.recorded == 1


def test_reference_cells_hold_and_plan_only_what_the_adapter_takes():
    [cell] = plan_cells("reference", [4])
    assert (cell.store, cell.config, cell.gate, cell.options) == ("default", "reference", False, {})
    report = run_race("reference", [cell], trials=2)
    [result] = report.cells
    assert result.verdict == HOLDS and result.saturation_mean == 0
    assert result.as_json()["consumptions"] == [1, 1]
    with pytest.raises(RaceInputError, match="no store option"):
        plan_cells("reference", [2], stores=["postgres"])
    with pytest.raises(RaceInputError, match="at least 2"):
        plan_cells("reference", [1])


# -- LangGraph ---------------------------------------------------------------------------------


@pytest.mark.langgraph
def test_langgraph_cells_are_store_by_durability_by_gate_by_k():
    langgraph_or_skip()
    cells = plan_cells("langgraph", [2, 4], gates=[False, True])
    assert len(cells) == 3 * 2 * 2 and {c.api for c in cells} == {"invoke"}
    both = plan_cells("langgraph", [2], durabilities=["sync"], apis=["invoke", "ainvoke"])
    assert [(c.api, c.variant) for c in both] == [
        ("invoke", None),
        ("ainvoke", "pymc_resume.bridge.adapters.langgraph_async:LangGraphAsyncAdapter"),
    ]
    assert {c.config for c in cells} == {"sqlite/sync", "sqlite/async", "sqlite/exit"}
    assert cells[0].options == {"store": "sqlite", "durability": "sync", "gate": False}
    gated = plan_cells("pymc_resume.bridge.adapters.langgraph:LangGraphGated", [2], durabilities=["exit"])
    assert [c.gate for c in gated] == [True]  # the gated configuration races gated by default


@pytest.mark.langgraph
def test_ungated_langgraph_consumes_one_interrupt_once_per_racer():
    langgraph_or_skip()
    from pymc_resume.bridge.adapters.langgraph import LangGraphAdapter

    trials = [race_once(LangGraphAdapter, 2) for _ in range(3)]
    fires = [t.fires for t in trials]
    # What 1.2.9 shows here: both racers run the gated node and fire (the paper's finding); the
    # sink applies every fire, as LangGraph documents no key for a side effect (docs/langgraph.md).
    assert max(fires) == 2, f"observed fires per trial: {fires}"
    assert all(t.applied == t.fires for t in trials)
    assert all(r.status == OK for t in trials for r in t.racers)


@pytest.mark.langgraph
def test_gated_langgraph_serves_exactly_one_racer():
    langgraph_or_skip()
    from pymc_resume.bridge.adapters.langgraph import LangGraphAdapter

    for durability in ("sync", "exit"):
        trial = race_once(lambda d=durability: LangGraphAdapter(d, gate=True), 4)
        assert (trial.fires, trial.consumptions) == (1, 1), durability
        refused = [r for r in trial.racers if r.status == REFUSED]
        assert len(refused) == 3 and all("InterruptAlreadyClaimed" in r.detail for r in refused)
        assert [r.acted_on for r in trial.racers if r.executed] == [1] and trial.recorded == 1


@pytest.mark.langgraph
def test_async_graph_racers_are_served_once_through_the_gate():
    """`--api ainvoke`: racers run `ainvoke` on AsyncSqliteSaver, gated through `aresume`."""
    langgraph_or_skip()
    from pymc_resume.bridge.adapters.langgraph_async import LangGraphAsyncAdapter

    trial = race_once(lambda: LangGraphAsyncAdapter("sync", "sqlite", gate=True), 3)
    assert (trial.fires, trial.consumptions, trial.recorded) == (1, 1, 1)
    refused = [r for r in trial.racers if r.status == REFUSED]
    assert len(refused) == 2 and all("InterruptAlreadyClaimed" in r.detail for r in refused)


@pytest.mark.langgraph
@pytest.mark.parametrize("when", ["before-execute", "after-execute"])
def test_a_claimant_killed_after_its_claim_is_recovered_with_the_claimed_value(when):
    langgraph_or_skip()
    from pymc_resume.bridge.adapters.langgraph import LangGraphAdapter
    from pymc_resume.bridge.judging.session import Session
    from pymc_resume.model.workflow import Workflow

    workflow = Workflow.of(["step", "gated"])
    session = Session(LangGraphAdapter(gate=True), workflow, 2, step_timeout=60)
    try:
        session.apply({"action": "start", "thread": 0, "crash": None})
        # The claimant rejects (value 2), and is SIGKILLed inside the gated node.
        session.apply({"action": "resume", "thread": 0, "value": 2, "crash": {"stage": 1, "when": when}})
        session.apply({"action": "resume", "thread": 0, "value": 1, "crash": None})  # a new value: refused
        session.apply({"action": "recover", "thread": 0, "crash": None})
        outcomes = [step["outcome"][0] for step in session.steps]
        assert [o["status"] for o in outcomes] == [OK, CRASHED, REFUSED, OK]
        assert "InterruptAlreadyClaimed" in outcomes[2]["detail"] and "value 2" in outcomes[2]["detail"]
        head = session.observation.threads[0].chain[-1]
        assert head.pc == workflow.end and head.app[1] == 2  # continued with the claimed value
        assert not [e for e in session.sink.events() if e.kind == "fire" and e.stage == 1]  # 1 never approved
        session.finish()  # every clause judged once more after the drain
    finally:
        if not session.drained:
            session.close()


@pytest.mark.langgraph
@pytest.mark.postgres
def test_postgres_cells_race_ungated_and_gated():
    postgres_or_skip()
    cells = plan_cells("langgraph", [2], stores=["postgres"], durabilities=["sync"], gates=[False, True])
    report = run_race("langgraph", cells, trials=2)
    ungated, gated = report.cells
    assert ungated.error is None and gated.error is None
    assert max(t.fires for t in ungated.trials) == 2, [t.fires for t in ungated.trials]
    assert gated.verdict == HOLDS and [t.consumptions for t in gated.trials] == [1, 1]


@pytest.mark.slow
@pytest.mark.langgraph
@pytest.mark.postgres
def test_two_hosts_on_postgres_consume_several_times_ungated_and_once_gated():
    postgres_or_skip()
    from pymc_resume.bridge.race.hosts import NETNS_DIR, PREFIX, running_as_root

    if not running_as_root():
        pytest.skip("network hosts need root (ip netns, veth pairs)")
    cells = plan_cells(
        "langgraph", [4], stores=["postgres"], durabilities=["sync"], gates=[False, True], hosts=[2]
    )
    assert [(c.hosts, c.network, c.gate) for c in cells] == [(2, True, False), (2, True, True)]
    report = run_race("langgraph", cells, trials=2)
    ungated, gated = report.cells
    assert ungated.error is None and gated.error is None, (ungated.error, gated.error)
    assert max(t.consumptions for t in ungated.trials) > 1, [t.consumptions for t in ungated.trials]
    assert gated.verdict == HOLDS and [t.consumptions for t in gated.trials] == [1, 1]
    for trial in ungated.trials + gated.trials:  # racers alternate over the two hosts' addresses
        assert [r.host for r in trial.racers] == ["10.213.0.11", "10.213.0.12"] * 2
    by_hosts = report.as_json()["by_hosts"]
    assert [(row["hosts"], row["gate"], row["one consumption"]) for row in by_hosts] == [
        ("2", "off", "0/1"),
        ("2", "on", "1/1"),
    ]
    mine = [p.name for p in NETNS_DIR.glob(f"{PREFIX}{os.getpid()}-*")] if NETNS_DIR.is_dir() else []
    assert mine == []  # the island is gone


def island_or_skip():
    from pymc_resume.bridge.race.hosts import running_as_root

    if not running_as_root():
        pytest.skip("network hosts need root (ip netns, veth pairs)")


def my_namespaces(pid: int) -> list[str]:
    from pymc_resume.bridge.race.hosts import NETNS_DIR, PREFIX

    return [p.name for p in NETNS_DIR.glob(f"{PREFIX}{pid}-*")] if NETNS_DIR.is_dir() else []


def my_island_folders(pid: int) -> list:
    import tempfile
    from pathlib import Path

    return list(Path(tempfile.gettempdir()).glob(f"pymc-resume-island-{pid}-*"))


def test_an_island_that_cannot_start_its_server_removes_its_namespaces(monkeypatch):
    island_or_skip()
    from pymc_resume.bridge.race.hosts import POSTGRES_BIN_VARIABLE, Island
    from pymc_resume.errors import EnvironmentProblem

    monkeypatch.setenv(POSTGRES_BIN_VARIABLE, "/nonexistent/postgresql/bin")
    with pytest.raises(EnvironmentProblem, match="no PostgreSQL binaries"):
        with Island(2):
            pass
    assert my_namespaces(os.getpid()) == [] and my_island_folders(os.getpid()) == []


@pytest.mark.slow
@pytest.mark.langgraph
@pytest.mark.postgres
def test_a_race_terminated_on_its_hosts_leaves_nothing_behind(tmp_path):
    """SIGTERM while racers run on the island: exit 143, and no namespace, server or folder."""
    langgraph_or_skip()
    island_or_skip()
    import signal
    import time

    command = [
        sys.executable,
        "-m",
        "pymc_resume",
        "race",
        "langgraph",
        "--store",
        "postgres",
        "--hosts",
        "2",
        "--k",
        "8",
        "--trials",
        "50",
        "--durability",
        "sync",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        lines = []
        deadline = time.monotonic() + 120
        while not any("trial 1/50" in line for line in lines):  # the island is up and racing
            assert time.monotonic() < deadline and process.poll() is None, lines
            lines.append(process.stderr.readline())
        assert my_namespaces(process.pid) and my_island_folders(process.pid)
        process.send_signal(signal.SIGTERM)
        # 143 is the command line's code for SIGTERM; click turns the KeyboardInterrupt it is
        # raised as inside a command into Abort, which exits 130 (interrupted): either is a stop.
        assert process.wait(60) in (130, 143)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()
    assert my_namespaces(process.pid) == [] and my_island_folders(process.pid) == []


def test_hosts_need_a_network_store():
    with pytest.raises(RaceInputError, match="needs a network store"):
        plan_cells("reference", [2], hosts=[2])
    with pytest.raises(RaceInputError, match="at least 1"):
        plan_cells("reference", [2], hosts=[0])


# -- the command -------------------------------------------------------------------------------


def test_race_reference_exits_0_and_writes_the_cells(tmp_path):
    out = tmp_path / "r.json"
    run = cli("reference", "--k", "2,3", "--trials", "2", "--json", str(out))
    assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    assert [(c["k"], c["gate"], c["trials"]) for c in data["cells"]] == [(2, False, 2), (3, False, 2)]
    for cell in data["cells"]:
        assert cell["fires"] == [1, 1] and cell["consumptions"] == [1, 1] and cell["saturation_mean"] == 0
        assert isinstance(cell["store"], str) and isinstance(cell["config"], str)
    assert "saturation" in run.stdout and "trial 2/2" in run.stderr  # the table; progress on stderr


@pytest.mark.langgraph
def test_race_langgraph_exits_1_ungated_and_0_gated(tmp_path):
    langgraph_or_skip()
    out = tmp_path / "r.json"
    # k = 4 and three trials: with two racers a late one can find the interrupt already
    # consumed and run nothing, in every trial of a short cell (seen under load).
    ungated = cli("langgraph", "--k", "4", "--trials", "3", "--durability", "sync", "--json", str(out))
    assert ungated.returncode == 1, ungated.stdout + ungated.stderr
    assert json.loads(out.read_text())["cells"][0]["verdict"] == VIOLATED
    gated = cli(
        "langgraph", "--k", "2", "--trials", "2", "--durability", "sync", "--gate", "--json", str(out)
    )
    assert gated.returncode == 0, gated.stdout + gated.stderr
    [cell] = json.loads(out.read_text())["cells"]
    assert cell["gate"] is True and cell["consumptions"] == [1, 1] and cell["saturation_mean"] == 0


def test_bad_input_exits_2_with_one_line(tmp_path):
    for args in (
        ["nosuch"],
        ["reference", "--k", "1"],
        ["reference", "--k", "two"],
        ["reference", "--store", "postgres"],
        ["reference", "--gate"],
        ["reference", "--trials", "0"],
        ["reference", "--gate=sometimes"],
        ["reference", "--hosts", "2"],
        ["reference", "--hosts", "0"],
        ["reference", "--api", "ainvoke"],
        ["reference", "--api", "await"],
    ):
        run = cli(*args, cwd=tmp_path)
        assert run.returncode == 2, (args, run.stdout, run.stderr)
        assert run.stderr.startswith("pymc-resume: error:") and len(run.stderr.strip().splitlines()) == 1, (
            args
        )
        assert "Traceback" not in run.stderr


@pytest.mark.langgraph
def test_an_unreachable_server_is_a_cell_that_cannot_run(tmp_path):
    langgraph_or_skip()
    out = tmp_path / "r.json"
    run = cli(
        "langgraph",
        "--store",
        "postgres",
        "--k",
        "2",
        "--trials",
        "1",
        "--durability",
        "sync",
        "--postgres-url",
        "postgresql://postgres@127.0.0.1:1/test",
        "--json",
        str(out),
    )
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].startswith("pymc-resume: error: 1 of 1 cells could not run")
    [cell] = json.loads(out.read_text())["cells"]
    assert cell["verdict"] == CANNOT_RUN and "no PostgreSQL server" in cell["error"] and cell["fires"] == []
    assert "cannot run" in run.stdout


@pytest.mark.slow
@pytest.mark.langgraph
def test_the_issue_command_sqlite_k_2_4_8(tmp_path):
    """`race langgraph --store sqlite --k 2,4,8 --trials 3`, ungated then gated."""
    langgraph_or_skip()
    ungated, gated = tmp_path / "u.json", tmp_path / "g.json"
    run = cli("langgraph", "--store", "sqlite", "--k", "2,4,8", "--trials", "3", "--json", str(ungated))
    assert run.returncode == 1, run.stdout + run.stderr
    cells = json.loads(ungated.read_text())["cells"]
    assert len(cells) == 9 and not any(c["gate"] for c in cells)
    high = [c for c in cells if c["saturation_mean"] >= 0.5]
    assert len(high) > len(cells) / 2, [(c["config"], c["k"], c["fires"]) for c in cells]
    run = cli(
        "langgraph", "--store", "sqlite", "--k", "2,4,8", "--trials", "3", "--gate", "--json", str(gated)
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for cell in json.loads(gated.read_text())["cells"]:
        assert cell["gate"] and cell["saturation_mean"] == 0 and cell["consumptions"] == [1, 1, 1], cell


@pytest.mark.parametrize(
    "adapter, reason",
    [("RaceExitingAdapter", "exited with status 0"), ("RaceAlarmBlockingAdapter", "did not finish within")],
)
def test_a_misbehaving_adapter_runs_in_a_host_and_the_race_says_so(adapter, reason, tmp_path):
    # Adapter code runs in a host process with the step timeout, as under fuzz and profile: an
    # exit is a failure (exit 2, never 0), a hang that blocks SIGALRM ends at the timeout.
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    run = subprocess.run(
        [sys.executable, "-m", "pymc_resume", "race", f"bridge_test_adapters:{adapter}"]
        + ["--k", "2", "--trials", "1", "--timeout", "3"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert reason in run.stderr.splitlines()[-1] and "Traceback" not in run.stderr, run.stderr


@pytest.mark.parametrize(
    "adapter, reason",
    [
        ("RaceConstructorExits", "ended the process it ran in"),
        ("RaceConstructorRaisesSystemExit", "raised SystemExit"),
        ("RaceConstructorSleeps", "did not finish within 3s"),
    ],
)
def test_a_constructor_that_exits_or_hangs_is_one_line_within_the_timeout(adapter, reason, tmp_path):
    """The race plans its cells from the adapter's constructor, which it reads and calls in a
    child process with the race's timeout: the command never builds (or imports) it itself."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pymc_resume", "race", f"bridge_test_adapters:{adapter}"]
        + ["--k", "2", "--trials", "1", "--timeout", "3"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    [line] = run.stderr.splitlines()
    assert reason in line and line.startswith("pymc-resume: error: adapter"), line
    assert time.monotonic() - started < 3 + 10  # the timeout, plus starting Python twice
