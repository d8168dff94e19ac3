"""Adapters by name: the built-in ones, or `module:Class` for a user's own; and the framework
families a conformance profile runs, each with its configurations.

`factory(spec, options)` builds one adapter per example; `options` are keyword arguments
of the adapter's constructor (the reference adapter takes `fault`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect

import attrs

from pymc_resume.errors import BadInput

BUILT_IN = {
    "reference": "pymc_resume.bridge.reference_adapter:ReferenceAdapter",
    "langgraph": "pymc_resume.bridge.langgraph_adapter:LangGraphAdapter",
    "langgraph-async": "pymc_resume.bridge.langgraph_adapter:LangGraphAsync",
    "langgraph-exit": "pymc_resume.bridge.langgraph_adapter:LangGraphExit",
    "langgraph-postgres": "pymc_resume.bridge.langgraph_adapter:LangGraphPostgres",
    "langgraph-gate": "pymc_resume.bridge.langgraph_adapter:LangGraphGated",
    "pydantic-graph": "pymc_resume.bridge.pydantic_graph_adapter:PydanticGraphAdapter",
    "crewai": "pymc_resume.bridge.crewai_adapter:CrewAIAdapter",
}


@attrs.frozen
class Configuration:
    """One way to run an adapter: a name for tables (e.g. "sqlite/sync"), the adapter spec and
    its constructor options."""

    name: str
    adapter: str
    options: dict = attrs.field(factory=dict)


@attrs.frozen
class Family:
    """A framework as `profile` knows it: its configurations, and how to tell it is installed."""

    name: str
    configurations: tuple[Configuration, ...]
    requires: str | None = None  # a module that the framework's extra installs
    install: str | None = None  # the command that installs it

    def installed(self) -> bool:
        if self.requires is None:
            return True
        try:
            return importlib.util.find_spec(self.requires) is not None
        except ImportError:  # a parent package is missing
            return False


FAMILIES: dict[str, Family] = {
    "reference": Family("reference", (Configuration("sqlite", "reference"),)),
    "langgraph": Family(
        "langgraph",
        (
            Configuration("sqlite/sync", "langgraph", {"durability": "sync"}),
            Configuration("sqlite/async", "langgraph", {"durability": "async"}),
            Configuration("sqlite/exit", "langgraph", {"durability": "exit"}),
            Configuration("postgres/sync", "langgraph", {"durability": "sync", "store": "postgres"}),
            # The same graphs behind pymc_resume.gate: consume-once-consumption is its business.
            Configuration("sqlite/sync+gate", "langgraph", {"durability": "sync", "gate": True}),
        ),
        requires="langgraph.checkpoint.sqlite",
        install="pip install 'pymc-resume[langgraph]'",
    ),
    "crewai": Family(
        "crewai",
        (Configuration("sqlite/persist", "crewai"),),
        requires="crewai",
        install="pip install 'pymc-resume[crewai]'",
    ),
    "pydantic-graph": Family(
        "pydantic-graph",
        (Configuration("file", "pydantic-graph"),),
        requires="pydantic_graph.persistence",  # 2.x has no persistence: not this adapter's framework
        install="pip install 'pymc-resume[pydantic-graph]'",
    ),
}


def family_of(spec: str) -> Family:
    """The family a `profile ADAPTER` argument names: a family, a built-in name (its one
    configuration) or `module:Class` (a user's adapter, run as it is)."""
    if spec in FAMILIES:
        return FAMILIES[spec]
    resolve(spec)  # raises AdapterSpecError with the reason
    return Family(spec, (Configuration("default", spec),))


class AdapterSpecError(BadInput):
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
