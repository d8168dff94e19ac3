"""The pytest plugin (`pymc_resume.pytest_plugin`, entry point `pytest11`) in a framework
author's suite, run by pytester in a fresh process: the fixture and the marker pass on a
correct adapter and the summary says what was checked, fail on a faulty one with the id, the
steps, a repro in the repro directory the command line names and a replay command that
reproduces when pasted into a shell, and the budget and seed options reach the check."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pymc_resume.model.contract import CLAUSE_IDS

pytest_plugins = ["pytester"]

# Small and quick: the reference runtime on the `small` bounds, a few examples, no shrinking.
QUICK = ["-p", "no:cacheprovider", "--resume-bounds", "small", "--resume-examples", "3", "--resume-no-shrink"]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*QUICK, *args)


def test_the_fixture_passes_on_a_correct_adapter_returns_the_report_and_says_what_it_checked(pytester):
    pytester.makepyfile("""
        def test_reference(resume_contract):
            report = resume_contract("reference")
            assert report.violated == [] and report.examples >= 1
            assert report.seed == 0 and report.bounds.name == "small"
    """)
    result = run(pytester)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*= resume contract =*",
            "*test_reference (passed): adapter 'reference' (*): 3 examples, * steps, seed 0, bounds 'small'",
            "  holds prefix-continuation: held in * of 3 examples that *",
        ]
    )
    checked = result.stdout.str().split("resume contract =", 1)[1]
    assert all(f" {cid}: " in checked for cid in CLAUSE_IDS)  # every id, exercised or why not


def test_a_violation_prints_a_replay_command_that_reproduces_when_pasted_as_is(pytester, tmp_path):
    # A framework author's suite outside the project: the faulty adapter is defined in the test file.
    pytester.makepyfile(
        test_layer="""
        from pymc_resume.bridge.adapters.reference import ReferenceAdapter

        class FaultyLayer(ReferenceAdapter):
            name = "faulty-layer"

        def test_layer(resume_contract):
            resume_contract(FaultyLayer, fault="no-claim", examples=40, seed=1)
    """
    )
    result = run(pytester, "--resume-repro-dir", "found")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*violates consume-once-consumption*", "*1. *", "*repro: found/*.json*"])
    [repro] = (pytester.path / "found").glob("*consume_once_consumption.json")
    assert json.loads(repro.read_text())["clause"] == "consume-once-consumption"
    command = replay_line(result)
    assert command.startswith(f"env PYTHONPATH={pytester.path}")  # where the test module was found
    assert command.endswith(" --allow-adapter test_layer:FaultyLayer")  # by module path, as the CLI
    assert_reproduces_when_pasted(command, tmp_path)
    # Hypothesis's files under the repro directory, keyed by the adapter and its options.
    assert not (pytester.path / ".hypothesis").exists()
    [database] = (pytester.path / "found" / "hypothesis-db").iterdir()
    assert database.name.startswith("FaultyLayer-no-claim-")


def replay_line(result: pytest.RunResult) -> str:
    # A set: on CI, pytest's short summary repeats the whole failure message, replay line included.
    [command] = {
        line.split("replay: ", 1)[1] for line in result.stdout.lines if line.startswith("  replay: ")
    }
    return command


def assert_reproduces_when_pasted(command: str, somewhere: Path) -> None:
    """Pasted into a shell in another folder, with this environment's scripts on the PATH and
    none of the test run's import path."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    pasted = subprocess.run(["bash", "-c", command], cwd=somewhere, capture_output=True, text=True, env=env)
    assert pasted.returncode == 1, pasted.stdout + pasted.stderr
    assert pasted.stdout.startswith("reproduces") and "consume-once-consumption" in pasted.stdout


def test_an_adapter_in_a_package_with_relative_imports_replays_by_module_path(pytester, tmp_path):
    """How a framework ships its adapter: a module of a package that imports its siblings
    relatively. Named by its file, the module could not be loaded; by module path it is, in the
    check and in the pasted replay line."""
    pytester.mkpydir("layerpkg")
    pytester.makepyfile(
        **{
            "layerpkg/base": """
                from pymc_resume.bridge.adapters.reference import ReferenceAdapter

                class Base(ReferenceAdapter):
                    name = "layer-base"
            """,
            "layerpkg/adapter": """
                from .base import Base

                class FaultyLayer(Base):
                    name = "faulty-layer"
            """,
            "test_package": """
                from layerpkg.adapter import FaultyLayer

                def test_layer(resume_contract):
                    resume_contract(FaultyLayer, fault="no-claim", examples=40, seed=1)
            """,
        }
    )
    result = run(pytester, "--resume-repro-dir", "found")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*violates consume-once-consumption*"])
    command = replay_line(result)
    assert command.startswith(f"env PYTHONPATH={pytester.path}")
    assert command.endswith(" --allow-adapter layerpkg.adapter:FaultyLayer")
    assert_reproduces_when_pasted(command, tmp_path)


def test_the_marker_checks_a_class_from_the_test_module_before_the_body(pytester):
    pytester.makepyfile("""
        import pytest
        from pymc_resume.bridge.adapters.reference import ReferenceAdapter

        class MyAdapter(ReferenceAdapter):
            name = "mine"

        ran = []

        @pytest.mark.resume_contract(adapter=MyAdapter)
        def test_mine():
            ran.append(1)

        @pytest.mark.resume_contract(adapter=MyAdapter, fault="no-claim", examples=40, seed=1)
        def test_mine_with_a_fault():
            raise AssertionError("the body must not run after a violation")

        def test_the_body_ran():
            assert ran == [1]
    """)
    result = run(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_mine_with_a_fault*", "*violates consume-once-consumption*"])
    assert "the body must not run" not in result.stdout.str()


def test_a_factory_is_fuzzed_too_and_a_violation_names_its_clause(pytester):
    pytester.makepyfile("""
        from pymc_resume.bridge.adapters.reference import ReferenceAdapter

        def test_correct(resume_contract):
            resume_contract(lambda: ReferenceAdapter())

        def test_faulty(resume_contract):
            resume_contract(lambda: ReferenceAdapter(fault="no-claim"), examples=40, seed=1)
    """)
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*consume-once-consumption violated*", "*no repro file for a factory*"])


def test_bad_checks_say_what_is_wrong(pytester):
    pytester.makepyfile("""
        def test_unknown_option(resume_contract):
            resume_contract("reference", colour="blue")

        def test_not_an_adapter(resume_contract):
            resume_contract(3)
    """)
    result = run(pytester)
    result.stdout.fnmatch_lines(["*does not take option(s) colour*"])
    result.stdout.fnmatch_lines(["*expected an adapter class, spec or factory, not int*"])
    assert result.ret != 0


def test_the_options_are_in_pytest_help(pytester):
    result = pytester.runpytest_subprocess("--help")
    result.stdout.fnmatch_lines(["*--resume-examples*", "*--resume-seed*", "*--resume-repro-dir*"])
