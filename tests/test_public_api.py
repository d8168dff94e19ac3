"""The public surface: a curated `__all__` whose every name resolves, and `import pymc_resume`
importing no framework and no Hypothesis (names load on first use)."""

import subprocess
import sys

import pymc_resume
import pymc_resume.model


def test_import_pymc_resume_loads_no_framework_and_no_hypothesis():
    code = (
        "import pymc_resume, sys; print(pymc_resume.__all__); "
        "assert 'langgraph' not in sys.modules and 'hypothesis' not in sys.modules"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "explore" in run.stdout and "contract_test_case" in run.stdout


def test_every_public_name_resolves():
    for package in (pymc_resume, pymc_resume.model):
        for name in package.__all__:
            assert getattr(package, name) is not None, name
    assert pymc_resume.CLAUSE_IDS[0] == "prefix-continuation"
    assert issubclass(pymc_resume.BadInput, pymc_resume.PymcResumeError)
