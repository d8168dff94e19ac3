"""Adapters for live frameworks, one module each: the only modules that import a framework
library (tests/test_layers.py checks it). `reference` drives the project's own runtime.

An adapter is named by its key in `bridge.registry.BUILT_IN`; repro files written before the
adapters moved here name them by their old module paths, which the registry still resolves.
"""
