"""The adapter kit's small parts: the typed node context, `--adapter-option`, adapters that
installed packages offer through entry points, and the protocol checked when a class loads."""

import json
import subprocess
import sys
import textwrap

import attrs
import pytest

from pymc_resume.bridge.adapter.nodes import NodeContext
from pymc_resume.bridge.adapter.sink import Sink
from pymc_resume.bridge.hosting.registry import ENTRY_POINT_GROUP, Family, all_families, family_of
from pymc_resume.cli.options import _json_scalar


def cli(*args, cwd, env=None):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


# -- the node context ------------------------------------------------------------------------


def test_the_node_context_is_what_the_sink_logs(tmp_path):
    sink = Sink.create(tmp_path / "sink.db")
    context = NodeContext(thread=0, stage=2, node=1, op="s3", role="delivery", idempotency_key="k")
    sink.record_execution(context)
    sink.fire(context, (1, 0))
    sink.fire(context, (1, 0))  # the same key: logged, not applied again
    execute, first, second = sink.events()
    assert (execute.kind, execute.thread, execute.stage, execute.node, execute.op, execute.role) == (
        "execute",
        0,
        2,
        1,
        "s3",
        "delivery",
    )
    assert (first.applied, second.applied, first.key) == (True, False, "k")


def test_the_node_context_refuses_an_unknown_role():
    with pytest.raises(ValueError, match="role"):
        NodeContext(0, 0, 0, role="resume")
    assert attrs.asdict(NodeContext(0, 1, 0)) == {
        "thread": 0,
        "stage": 1,
        "node": 0,
        "op": None,
        "role": None,
        "idempotency_key": None,
    }


# -- --adapter-option ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3", 3),
        ("0.5", 0.5),
        ("true", True),
        ("null", None),
        ('"3"', "3"),
        ("sqlite", "sqlite"),
        ("[1]", "[1]"),
        ("NaN", "NaN"),
        ("", ""),
    ],
)
def test_an_option_value_is_a_json_scalar_when_it_parses_as_one(text, value):
    assert _json_scalar(text) == value
    assert type(_json_scalar(text)) is type(value)


def test_an_option_the_adapter_does_not_take_is_one_line_exit_2(tmp_path):
    for command in ("fuzz", "profile"):
        run = cli(command, "reference", "--adapter-option", "colour=blue", "--examples", "1", cwd=tmp_path)
        assert run.returncode == 2, run.stderr
        assert run.stderr.count("\n") == 1 and "colour" in run.stderr, run.stderr
    run = cli("fuzz", "reference", "--adapter-option", "no-equals", cwd=tmp_path)
    assert run.returncode == 2 and "KEY=VALUE" in run.stderr


def test_adapter_options_reach_the_adapter(tmp_path):
    run = cli(
        "fuzz",
        "reference",
        "--adapter-option",
        "fault=no-claim",
        "--bounds",
        "small",
        "--seed",
        "1",
        "--examples",
        "30",
        "--no-shrink",
        "--json",
        "out.json",
        cwd=tmp_path,
    )
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["adapter_options"] == {"fault": "no-claim"}, run.stderr
    assert run.returncode == 1, run.stdout + run.stderr


# -- adapters offered by installed packages ------------------------------------------------


@pytest.fixture
def installed_package(tmp_path, monkeypatch):
    """A package on sys.path (not through PYTHONPATH: a folder PYTHONPATH names is not trusted)
    offering two adapters by entry point: a class, and a Family with two configurations."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "outside_adapters.py").write_text(
        textwrap.dedent("""
        from pymc_resume.bridge.adapters.reference import ReferenceAdapter
        from pymc_resume.bridge.hosting.registry import Configuration, Family

        class OutsideAdapter(ReferenceAdapter):
            name = "outside"

        OUTSIDE = Family("outside-family", (
            Configuration("correct", "outside_adapters:OutsideAdapter"),
            Configuration("no-claim", "outside_adapters:OutsideAdapter", {"fault": "no-claim"}),
        ))
        NOT_AN_ADAPTER = 3
    """)
    )
    info = folder / "outside_adapters-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: outside-adapters\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\noutside = outside_adapters:OutsideAdapter\n"
        "outside-family = outside_adapters:OUTSIDE\nbroken = outside_adapters:NOT_AN_ADAPTER\n"
    )
    monkeypatch.syspath_prepend(str(folder))  # on sys.path, as an installation is: trusted
    return folder


def test_installed_adapters_join_profile_all(installed_package):
    families, skipped = all_families()
    by_name = {family.name: family for family in families}
    assert {"reference", "outside", "outside-family"} <= set(by_name)
    assert [c.name for c in by_name["outside"].configurations] == ["default"]
    assert isinstance(by_name["outside-family"], Family)
    assert [c.name for c in by_name["outside-family"].configurations] == ["correct", "no-claim"]
    [broken] = skipped
    assert broken["adapter"] == "broken" and "not a class" in broken["reason"]
    assert family_of("outside-family") == by_name["outside-family"]  # read again, in a child


def test_an_installed_adapter_is_profiled_by_its_name(installed_package, tmp_path, monkeypatch):
    # The command runs in a process of its own, which finds the package through PYTHONPATH: not
    # trusted as installed, but named on the command line, which is the user's choice.
    monkeypatch.setenv("PYTHONPATH", str(installed_package))
    run = cli(
        "profile",
        "outside",
        "--bounds",
        "small",
        "--examples",
        "0",
        "--no-shrink",
        "--json",
        "p.json",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    [profile] = json.loads((tmp_path / "p.json").read_text())["profiles"]
    assert profile["adapter"] == "outside" and profile["config"] == "default"


def test_not_expressible_and_refusals_raised_from_fork_or_update_are_refused_outcomes():
    """docs/adapters.md tells an adapter to raise `NotExpressible` from `fork` for a position its
    framework cannot fork from; `fork` and `update` run in the adapter's own process, and a raise
    there once ended the run as a broken adapter (exit 2)."""
    from pymc_resume.bridge.adapter import NOT_EXPRESSIBLE, REFUSED
    from pymc_resume.bridge.kit import ChildProcessAdapter, NotExpressible, Refusal

    class OnlyAtTheHead(ChildProcessAdapter):
        def client_start(self, thread):
            return ""

        client_resume = client_recover = client_start

        def fork(self, thread, checkpoint, intent, value, **variant):
            raise NotExpressible("forks only from the head")

        def update(self, thread, value):
            raise Refusal("no such thread")

    adapter = OnlyAtTheHead()
    forked = adapter.fork(0, 1, "replay", None)
    assert (forked.status, forked.by) == (REFUSED, NOT_EXPRESSIBLE) and "from the head" in forked.detail
    updated = adapter.update(0, 1)
    assert updated.status == REFUSED and not updated.reached_framework()
