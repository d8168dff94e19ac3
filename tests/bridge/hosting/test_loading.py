"""The command never imports an adapter's module: naming one, checking its options and building
one up front all happen in processes of their own, each under a deadline."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pymc_resume.bridge.hosting.loading import AdapterRef, NotAnAdapter, UnknownOptions, load_checked


def test_naming_profiling_and_racing_adapters_imports_none_of_their_code_in_the_command():
    script = textwrap.dedent(
        """
        import sys
        from pymc_resume.bridge.hosting.registry import FAMILIES, factory, family_of, resolve
        from pymc_resume.bridge.hosting.template import HostTemplates
        from pymc_resume.bridge.race.race import plan_cells
        assert all(family.installed() for family in FAMILIES.values())
        with HostTemplates() as templates:
            specs = ("reference", "langgraph", "dbos", "google-adk", "llama-index", "openai-agents")
            for spec in specs + ("strands",):
                family_of(spec)
                factory(spec, {}, templates=templates)
        plan_cells("langgraph", [2], timeout=60)
        frameworks = ("langgraph", "dbos", "google", "agents", "workflows", "crewai", "agent_framework")
        frameworks += ("strands",)
        ours = "pymc_resume.bridge.adapters"
        print([m for m in sys.modules if m.split(".")[0] in frameworks or m.startswith(ours)])
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_a_host_checks_the_class_and_binds_the_options_before_it_builds():
    reference = AdapterRef("reference", "pymc_resume.bridge.adapters.reference:ReferenceAdapter")
    assert load_checked(reference, {"fault": "no-claim"}).__name__ == "ReferenceAdapter"
    with pytest.raises(UnknownOptions, match="colour"):
        load_checked(reference, {"colour": "red"})
    with pytest.raises(NotAnAdapter, match="not a class"):
        load_checked(AdapterRef("x", "pymc_resume.bridge.hosting.registry:BUILT_IN"), {})
