"""Adapters for live frameworks, one module each: the only modules that import a framework
library (tests/test_layers.py checks it). `reference` drives the project's own runtime.

An adapter is named by its key in `bridge.hosting.registry.BUILT_IN`; repro files written before the
adapters moved here name them by their old module paths, which the registry still resolves.

May import: `bridge.adapter`, `bridge.kit`, `bridge.adapters`, `pymc_resume.model`,
`pymc_resume.runtime` and `pymc_resume.gate` (and its framework's library, only here).
"""
