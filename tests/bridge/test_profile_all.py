"""Conformance profiles of every framework the README's test command installs, through the
command: the reference conforms, the frameworks' published findings are violations, and every
violation cell comes with a repro that reproduces.

Each configuration is profiled once per test run (the `configuration_profile` fixture), and
every test of that configuration asserts on that one run. The run is the targeted battery at
bounds `small` (a step, an effect-then-interrupt and a gated node: every kind of step the
battery aims at), with no fuzz budget (fuzzing each framework is tested in its own module) and
no minimizing (tested on the reference runtime and LangGraph): CrewAI takes seconds per
client operation, and its battery at `default`, minimized, took 20 minutes. The tests of
one configuration share a pytest-xdist group (tests/conftest.py), so the configurations are
profiled in parallel. Repros are replayed in this process, as `replay` does; one is replayed
through the command itself. `profile --all` is run end to end on a one-step workflow, where it
is cheap: the batteries themselves are the per-configuration runs.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from live_steps import reproduces_again

from pymc_resume.bridge.hosting.registry import FAMILIES
from pymc_resume.bridge.repro.replay import load_repro
from pymc_resume.model.contract import CLAUSE_IDS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.langgraph,
    pytest.mark.crewai,
    pytest.mark.pydantic_graph,
    pytest.mark.agent_framework,
    pytest.mark.llama_index,
    pytest.mark.google_adk,
    pytest.mark.dbos,
    pytest.mark.openai_agents,
    pytest.mark.strands,
    pytest.mark.prefect,
    pytest.mark.restate,
]

CONFIGURATIONS = [(name, c.name) for name, family in FAMILIES.items() for c in family.configurations]

# What the README reports for each framework's defaults, as published findings (each a cell
# the battery violates): a second resume recorded, an invalid state persisted, concurrent
# resumes all consumed, completed methods run again after a crash, no recovery after a kill
# mid-node.
PUBLISHED = {
    ("langgraph", "sqlite/sync"): {"consume-once-value", "checkpoint-validity", "consume-once-consumption"},
    ("crewai", "sqlite/persist"): {"prefix-continuation"},
    ("pydantic-graph", "file"): {"liveness"},
}
# Cells violated under several documented calls of one operation, each named in the cell
# (issue 24): LangGraph's two edit forks, made at the head of a parent parked at an interrupt,
# each write a record onto the parent's checkpoint; the OpenAI Agents SDK records a decision on
# an answered interruption under both calls that address it.
VIOLATED_UNDER = {
    ("langgraph", "sqlite/sync"): {"fork-determinism": {"fork: update-state", "fork: command-at-checkpoint"}},
    # A second decision on the interruption a finished run stopped with, run or streamed.
    ("openai-agents", "state-file"): {"consume-once-value": {"resume: interruption", "resume: run-streamed"}},
}

# Cells decided by what the framework itself did, under every variant (docs/agent-framework.md,
# docs/llama-index.md): with the storage as it comes Agent Framework stores nothing, so its
# resumes never reach the framework (our client refuses them) and their cells are not checked,
# never holds; a response sent with the checkpoint that parked is served again; a value sent to
# a completed LlamaIndex run is ignored while the run starts over; a second value to a consumed
# pydantic-graph interrupt is refused by pydantic-graph under iter_from_persistence, but under
# its documented human-in-the-loop pattern load_next finds nothing and the pattern starts the
# run again (docs/pydantic-graph.md). Clause -> (verdict, words its reason, variants or notes name).
DECIDED = {
    ("agent-framework", "file"): {
        "checkpoint-validity": ("skipped", "not checked"),
        "consume-once-value": ("skipped", "not checked"),
    },
    ("agent-framework", "file+allowed-types"): {
        "consume-once-value": ("violated", "resume: respond-at-pause"),
    },
    ("llama-index", "context-json"): {"consume-once-value": ("violated", "recorded it nowhere")},
    ("pydantic-graph", "file"): {
        "consume-once-value": ("violated", "recorded it nowhere, and ran the thread again"),
        # The human-in-the-loop pattern, driven literally (issue 41): a delivery whose load comes
        # between another's answered node `created` and `running` runs its own answer on it, and
        # pydantic-graph runs both; the battery's after-load window puts the load there.
        "consume-once-consumption": ("violated", "2 deliveries executed the interrupt"),
    },
    # Google ADK stores a second confirmation as a session event and runs an uncommitted tool
    # with it (the cell's note says so), and a second confirmation to a committed tool ends the
    # invocation before the next tool is called, which run_async(invocation_id=...) never
    # finishes (issue 41; docs/google-adk.md).
    # Prefect (docs/prefect.md): a resumed run reuses its persisted task results; a task killed
    # after its effect, before its result was persisted, runs again, with no key; the server
    # validates run_input against the flow's RunInput; a killed run is executed again by a
    # fresh process. (The consume-once cells are decided by a race, and may go either way.)
    ("prefect", "sqlite/suspend"): {
        "prefix-continuation": ("holds", ""),
        "effect-exactly-once": ("violated", ""),
        "checkpoint-validity": ("holds", ""),
        "recovery-determinism": ("holds", ""),
        "liveness": ("holds", ""),
    },
    ("google-adk", "database/sqlite"): {
        "consume-once-value": ("violated", "stored it beside the value already recorded and ran stage"),
        "liveness": ("violated", "not quiescent: t0 at stage"),
    },
    # Restate journals a second resolve of an awakeable the handler already read under the same
    # signal index (never read), and accepts one after completion without recording it.
    ("restate", "awakeable"): {
        "consume-once-value": ("violated", "the framework recorded it as a late input, which is never read"),
    },
}

# Rows profiled first here (docs/<framework>.md gives each as printed and says what every cell
# means): the whole row, so that a changed cell is seen.
DOCUMENTED = {
    ("openai-agents", "state-file"): (
        "holds violated not-applicable violated violated violated holds not-applicable skipped"
    ),
    ("openai-agents", "sqlite-session"): (
        "violated violated not-applicable violated violated violated holds not-applicable skipped"
    ),
    # file-session/tool gives the same row (docs/strands.md); only the first is profiled here.
    ("strands", "file-session/hook"): (
        "violated violated not-applicable violated violated violated violated not-applicable skipped"
    ),
    # docs/restate.md: a value resolved to an awakeable is never validated; a second resolve of a
    # completed awakeable is answered 202 (journaled again, or dropped after completion).
    ("restate", "awakeable"): "holds holds not-applicable violated violated holds holds not-applicable holds",
}

# Which configurations get a battery here: each framework's defaults (its first configuration)
# and every configuration named above. The others (another store or option of the same
# framework, each with tests of its own in tests/bridge/adapters/) only with
# PYMC_RESUME_EVERY_CONFIGURATION=1: a battery costs one to twenty minutes, and all twenty
# configurations took most of CI's half hour. `profile --all` below still runs every one.
NAMED = {*PUBLISHED, *VIOLATED_UNDER, *DECIDED, *DOCUMENTED}
PROFILED = [
    (name, config)
    for name, config in CONFIGURATIONS
    if os.environ.get("PYMC_RESUME_EVERY_CONFIGURATION") == "1"
    or (name, config) in NAMED
    or config == FAMILIES[name].configurations[0].name
]

ONE_STEP = """
description = "one step node: profile --all end to end, cheaply"
nodes = ["step"]
values = 2
processes = 2
resumes = 1
crashes = 1
forks = 1
invalid_updates = 1
"""


def cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args], capture_output=True, text=True, cwd=cwd
    )


@pytest.fixture(scope="session", params=PROFILED, ids=["/".join(c) for c in PROFILED])
def configuration_profile(request, tmp_path_factory):
    """`profile FAMILY --config NAME` (battery only), run once: (its exit code, its one profile,
    the folder it ran in, where the repro paths it reports start)."""
    family, config = request.param
    folder = tmp_path_factory.mktemp("profile")
    run = cli(
        "profile",
        family,
        "--config",
        config,
        "--bounds",
        "small",
        "--examples",
        "0",
        "--no-shrink",
        "--json",
        "p.json",
        cwd=folder,
    )
    assert (folder / "p.json").exists(), run.stdout + run.stderr
    keep = os.environ.get("PYMC_RESUME_KEEP_PROFILES")  # a folder to keep each profile's JSON in
    if keep:
        shutil.copy(folder / "p.json", Path(keep) / f"{family}-{config.replace('/', '_')}.json")
    [profile] = json.loads((folder / "p.json").read_text())["profiles"]
    return run.returncode, profile, folder


def violated(profile) -> dict:
    return {cid: cell for cid, cell in profile["clauses"].items() if cell["verdict"] == "violated"}


def test_every_framework_extra_is_installed():
    missing = {name: family.install for name, family in FAMILIES.items() if not family.installed()}
    assert not missing, f"install the framework extras (the README's test command): {missing}"


def test_the_profile_is_complete_and_its_exit_code_says_whether_anything_is_violated(configuration_profile):
    returncode, profile, _folder = configuration_profile
    assert profile["error"] is None, profile
    assert list(profile["clauses"]) == list(CLAUSE_IDS)
    assert profile["scenarios"] > 0 and profile["examples"] == 0
    assert returncode == (1 if violated(profile) else 0)
    for cell in profile["clauses"].values():
        assert cell["verdict"] in ("holds", "violated", "unconfirmed", "not-applicable", "skipped")
        assert cell["verdict"] == "holds" or cell["reason"], cell  # every verdict but holds says why
        if cell["verdict"] == "unconfirmed":  # a race seen once: its evidence is kept, not counted
            assert cell["repro"], cell


def test_the_reference_conforms_and_the_published_findings_are_violations(configuration_profile):
    _returncode, profile, _folder = configuration_profile
    if profile["adapter"] == "reference":
        assert {c["verdict"] for c in profile["clauses"].values()} == {"holds"}
    expected = PUBLISHED.get((profile["adapter"], profile["config"]), set())
    assert expected <= set(violated(profile)), profile["clauses"]
    for clause_id, variants in VIOLATED_UNDER.get((profile["adapter"], profile["config"]), {}).items():
        assert variants <= set(violated(profile)[clause_id]["variants"]), profile["clauses"][clause_id]


def test_cells_are_decided_by_what_reached_the_framework(configuration_profile):
    _returncode, profile, _folder = configuration_profile
    for clause_id, (verdict, words) in DECIDED.get((profile["adapter"], profile["config"]), {}).items():
        cell = profile["clauses"][clause_id]
        named = " ".join([cell["reason"], *cell["variants"], *cell["notes"]])
        assert cell["verdict"] == verdict and words in named, cell


def test_the_rows_profiled_here_first_are_as_documented(configuration_profile):
    _returncode, profile, _folder = configuration_profile
    documented = DOCUMENTED.get((profile["adapter"], profile["config"]))
    if documented is not None:
        row = " ".join(profile["clauses"][cid]["verdict"] for cid in CLAUSE_IDS)
        assert row == documented, profile["clauses"]


def test_every_violation_cell_has_a_repro_that_reproduces(configuration_profile):
    _returncode, profile, folder = configuration_profile
    for clause_id, cell in violated(profile).items():
        assert cell["replays"]["reproduced"] >= 1, cell  # the profile's own replays showed it
        document = load_repro(folder / cell["repro"])
        # The repro records the adapter's whole options (defaults included): the configuration's
        # are among them, so replaying it runs the same configuration.
        assert document["clause"] == clause_id
        assert profile["adapter_options"].items() <= document["adapter_options"].items()
        assert reproduces_again(document), (profile["adapter"], profile["config"], clause_id)


def test_profile_all_runs_every_family_and_a_repro_replays_through_the_command(tmp_path):
    (tmp_path / "one-step.toml").write_text(ONE_STEP)
    run = cli(
        "profile",
        "--all",
        "--bounds",
        "one-step.toml",
        "--examples",
        "0",
        "--no-shrink",
        "--json",
        "t.json",
        "--markdown",
        "t.md",
        cwd=tmp_path,
    )
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["skipped"] == []
    assert [(p["adapter"], p["config"]) for p in data["profiles"]] == CONFIGURATIONS
    for profile in data["profiles"]:
        assert profile["error"] is None, profile
    [reference] = [p for p in data["profiles"] if p["adapter"] == "reference"]
    # A one-step workflow has no interrupt: the ids only interrupts exercise are not checked
    # (skipped, saying so), never holds; every other id holds.
    for cell in reference["clauses"].values():
        assert cell["verdict"] == "holds" or (
            cell["verdict"] == "skipped" and cell["reason"].startswith("not checked")
        ), cell
    assert any(cell["verdict"] == "holds" for cell in reference["clauses"].values())
    assert "identical profiles" in run.stdout and "| reference |" in (tmp_path / "t.md").read_text()
    cells = [cell for p in data["profiles"] for cell in violated(p).values()]
    assert run.returncode == (1 if cells else 0), run.stdout + run.stderr
    assert cells, "a one-step workflow still shows the frameworks' violations"
    replay = cli("replay", cells[0]["repro"], cwd=tmp_path)
    assert replay.returncode == 1, replay.stdout + replay.stderr


@pytest.mark.parametrize("family", list(FAMILIES))
def test_hosts_from_the_template_give_the_rows_of_hosts_forked_from_the_bridge(family, tmp_path):
    """Each family's configurations, on the one-step workflow (the battery's crashes, forks,
    invalid inputs and concurrent deliveries, cheaply): the same verdicts whether each host is
    forked from the host template, which imported the framework once, or from the command
    itself, which imports it in every host. The family's defaults here, every configuration
    with PYMC_RESUME_EVERY_CONFIGURATION=1 (CrewAI's three, forked from the command, take
    200 s)."""
    (tmp_path / "one-step.toml").write_text(ONE_STEP)
    every = os.environ.get("PYMC_RESUME_EVERY_CONFIGURATION") == "1"
    only = [] if every else ["--config", FAMILIES[family].configurations[0].name]
    rows = {}
    for hosts in ("template", "fresh"):
        run = cli(
            "profile",
            family,
            *only,
            "--bounds",
            "one-step.toml",
            "--examples",
            "0",
            "--no-shrink",
            "--json",
            f"{hosts}.json",
            "--repro-dir",
            f"repros-{hosts}",
            *(["--fresh-hosts"] if hosts == "fresh" else []),
            cwd=tmp_path,
        )
        profiles = json.loads((tmp_path / f"{hosts}.json").read_text())["profiles"]
        templates = sum(p["hosting"]["templates"] for p in profiles)  # one a family, shared
        assert templates == (1 if hosts == "template" else 0), run.stderr
        rows[hosts] = {
            p["config"]: [p["clauses"][cid]["verdict"] for cid in CLAUSE_IDS]
            for p in profiles
            if not p["error"]
        }
        expected = len(FAMILIES[family].configurations) if every else 1
        assert len(rows[hosts]) == expected, run.stdout + run.stderr
    assert rows["template"] == rows["fresh"]
