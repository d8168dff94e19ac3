"""Adapters by name: the built-in ones, or `module:Class` for a user's own.

`make_adapter(spec, options)` builds one adapter per example; `options` are keyword arguments
of the adapter's constructor (the reference adapter takes `fault`).
"""

from __future__ import annotations

import importlib
import inspect

BUILT_IN = {
    "reference": "pymc_resume.bridge.reference_adapter:ReferenceAdapter",
    "langgraph": "pymc_resume.bridge.langgraph_adapter:LangGraphAdapter",
    "langgraph-async": "pymc_resume.bridge.langgraph_adapter:LangGraphAsync",
    "langgraph-exit": "pymc_resume.bridge.langgraph_adapter:LangGraphExit",
    "langgraph-postgres": "pymc_resume.bridge.langgraph_adapter:LangGraphPostgres",
}


class AdapterSpecError(ValueError):
    """An adapter name that cannot be resolved; the message says why."""


def resolve(spec: str):
    """The adapter class for a built-in name or `module:Class`."""
    target = BUILT_IN.get(spec, spec)
    module_name, colon, class_name = target.partition(":")
    if not colon or not module_name or not class_name:
        known = ", ".join(BUILT_IN)
        raise AdapterSpecError(f"unknown adapter {spec!r} (built-in: {known}; or module:Class)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise AdapterSpecError(f"cannot import {module_name!r}: {error}") from None
    adapter = getattr(module, class_name, None)
    if adapter is None:
        raise AdapterSpecError(f"module {module_name!r} has no {class_name!r}")
    return adapter


def factory(spec: str, options: dict | None = None):
    """A zero-argument callable that builds a fresh adapter; checks the options up front."""
    adapter_class = resolve(spec)
    kwargs = {k: v for k, v in (options or {}).items() if v is not None}
    if kwargs:
        try:
            inspect.signature(adapter_class).bind(**kwargs)
        except TypeError:
            raise AdapterSpecError(
                f"adapter {spec!r} does not take option(s) {', '.join(sorted(kwargs))}"
            ) from None
    try:
        adapter_class(**kwargs)  # fail now, with the constructor's own message
    except KeyError as error:
        raise AdapterSpecError(f"adapter {spec!r}: unknown {', '.join(map(str, error.args))}") from None
    except Exception as error:  # noqa: BLE001 - reported as bad input
        raise AdapterSpecError(f"adapter {spec!r} cannot be built: {type(error).__name__}: {error}") from None
    return lambda: adapter_class(**kwargs)
