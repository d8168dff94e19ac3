"""Adapters by name: the built-in ones, or `module:Class` for a user's own; and the framework
families a conformance profile runs, each with its configurations.

Naming an adapter imports nothing: `resolve(spec)` checks the name (and, for one read from a
file, that it is trusted) and returns an `AdapterRef`; the module is imported only in the
processes that run adapter code (`loading.py`). `factory(spec, options)` builds one adapter up
front in a host, to check the options and read what it declares, and returns the builder every
example builds its own adapter with.
"""

from __future__ import annotations

import importlib.machinery
import math
import os
import sys
from collections.abc import Collection
from pathlib import Path

import attrs

from pymc_resume.bridge.hosting.child import ChildProblem, in_child
from pymc_resume.bridge.hosting.host import RAISED, HostProblem, probe
from pymc_resume.bridge.hosting.loading import (
    AdapterBuilder,
    AdapterNotFound,
    AdapterRef,
    NotAnAdapter,
    UnknownOptions,
    check_adapter_class,
)
from pymc_resume.bridge.hosting.template import HostTemplates, TemplateGone
from pymc_resume.errors import AdapterError, BadInput

BUILT_IN = {
    "reference": "pymc_resume.bridge.adapters.reference:ReferenceAdapter",
    "langgraph": "pymc_resume.bridge.adapters.langgraph:LangGraphAdapter",
    "langgraph-async": "pymc_resume.bridge.adapters.langgraph:LangGraphAsync",
    "langgraph-exit": "pymc_resume.bridge.adapters.langgraph:LangGraphExit",
    "langgraph-postgres": "pymc_resume.bridge.adapters.langgraph:LangGraphPostgres",
    "langgraph-gate": "pymc_resume.bridge.adapters.langgraph:LangGraphGated",
    "pydantic-graph": "pymc_resume.bridge.adapters.pydantic_graph:PydanticGraphAdapter",
    "crewai": "pymc_resume.bridge.adapters.crewai:CrewAIAdapter",
    "agent-framework": "pymc_resume.bridge.adapters.agent_framework:AgentFrameworkAdapter",
    "llama-index": "pymc_resume.bridge.adapters.llama_index:LlamaIndexAdapter",
    "google-adk": "pymc_resume.bridge.adapters.google_adk:GoogleAdkAdapter",
    "google-adk-postgres": "pymc_resume.bridge.adapters.google_adk:GoogleAdkPostgres",
    "dbos": "pymc_resume.bridge.adapters.dbos_workflows:DBOSAdapter",
    "openai-agents": "pymc_resume.bridge.adapters.openai_agents:OpenAIAgentsAdapter",
    "strands": "pymc_resume.bridge.adapters.strands_agents:StrandsAdapter",
    "prefect": "pymc_resume.bridge.adapters.prefect_flows:PrefectAdapter",
    "restate": "pymc_resume.bridge.adapters.restate_workflows:RestateAdapter",
}

# Module paths the built-in adapters had before they moved to `bridge/adapters/`: repro files
# written then name them so, and they still resolve (to the same classes, at their new homes).
MOVED = {
    f"pymc_resume.bridge.{old}_adapter": f"pymc_resume.bridge.adapters.{old}"
    for old in ("reference", "langgraph", "langgraph_async", "pydantic_graph", "crewai")
}


def current_path(spec: str) -> str:
    """`spec` with a moved built-in module path replaced by the module's new path."""
    module_name, colon, name = spec.rpartition(":")
    return f"{MOVED[module_name]}:{name}" if colon and module_name in MOVED else spec


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
        """Whether the module `requires` can be found on the import path: looked up package by
        package, without importing any (a framework's package runs code when imported)."""
        if self.requires is None:
            return True
        *packages, module = self.requires.split(".")
        folders = [Path(entry or os.curdir) for entry in sys.path]
        for package in packages:  # a package is a folder (a namespace package has no __init__)
            folders = [folder / package for folder in folders if (folder / package).is_dir()]
        suffixes = importlib.machinery.all_suffixes()
        return any(
            (folder / module).is_dir() or any((folder / f"{module}{suffix}").is_file() for suffix in suffixes)
            for folder in folders
        )


FAMILIES: dict[str, Family] = {
    "reference": Family("reference", (Configuration("sqlite", "reference"),)),
    "langgraph": Family(
        "langgraph",
        (
            Configuration("sqlite/sync", "langgraph", {"durability": "sync"}),
            # The contract's effect-then-interrupt as one LangGraph node (effect, then interrupt()).
            Configuration(
                "sqlite/sync+one-node",
                "langgraph",
                {"durability": "sync", "effect_then_interrupt": "one-node"},
            ),
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
        (
            Configuration("sqlite/persist", "crewai"),  # CrewAI's FlowState as it comes
            # Pydantic's validate_assignment on the flow state: the validation is ours, not CrewAI's.
            Configuration("sqlite/persist+validated", "crewai", {"validate_assignment": True}),
            # The contract's effect-then-interrupt as one @human_feedback method (effect in its body).
            Configuration("sqlite/persist+one-method", "crewai", {"effect_then_interrupt": "one-method"}),
        ),
        requires="crewai",
        install="pip install 'pymc-resume[crewai]'",
    ),
    "pydantic-graph": Family(
        "pydantic-graph",
        (Configuration("file", "pydantic-graph"),),
        requires="pydantic_graph.persistence",  # 2.x has no persistence: not this adapter's framework
        install="pip install 'pymc-resume[pydantic-graph]'",
    ),
    "agent-framework": Family(
        "agent-framework",
        (
            # FileCheckpointStorage as it comes: it refuses to store an application type it was
            # not told about (and the workflow runs on without a durable checkpoint).
            Configuration("file", "agent-framework", {"allowed_types": False}),
            # The state type registered in allowed_checkpoint_types, as the framework documents.
            Configuration("file+allowed-types", "agent-framework", {"allowed_types": True}),
        ),
        requires="agent_framework",
        install="pip install 'pymc-resume[agent-framework]'",
    ),
    "llama-index": Family(
        "llama-index",
        # The run's Context serialized with its JsonSerializer to a JSON file, as the docs persist one.
        (Configuration("context-json", "llama-index"),),
        requires="workflows",
        install="pip install 'pymc-resume[llama-index]'",
    ),
    "google-adk": Family(
        "google-adk",
        (
            # A resumable App, its sessions in DatabaseSessionService on SQLite (aiosqlite).
            Configuration("database/sqlite", "google-adk", {"store": "sqlite"}),
            # The same on the PostgreSQL server (psycopg's async driver).
            Configuration("database/postgres", "google-adk", {"store": "postgres"}),
        ),
        requires="google.adk",
        install="pip install 'pymc-resume[google-adk]'",
    ),
    "dbos": Family(
        "dbos",
        (
            Configuration("sqlite", "dbos"),  # a SQLite system database, DBOS's defaults
            Configuration("postgres", "dbos", {"store": "postgres"}),  # a schema of its own per example
        ),
        requires="dbos",
        install="pip install 'pymc-resume[dbos]'",
    ),
    "openai-agents": Family(
        "openai-agents",
        (
            # The RunState saved with to_string() to a file whenever a run returns, as the SDK's
            # human-in-the-loop example does.
            Configuration("state-file", "openai-agents", {"store": "state-file"}),
            # The same, with the conversation in a SQLiteSession (written as each turn ends).
            Configuration("sqlite-session", "openai-agents", {"store": "sqlite-session"}),
        ),
        requires="agents",
        install="pip install 'pymc-resume[openai-agents]'",
    ),
    "strands": Family(
        "strands",
        (
            # The FileSessionManager as the store; the interrupt raised by a BeforeToolCallEvent
            # callback (the docs' ApprovalHook) or by the tool itself (tool_context.interrupt).
            Configuration("file-session/hook", "strands", {"interrupt": "hook"}),
            Configuration("file-session/tool", "strands", {"interrupt": "tool"}),
        ),
        requires="strands",
        install="pip install 'pymc-resume[strands]'",
    ),
    "prefect": Family(
        "prefect",
        (
            # suspend_flow_run(wait_for_input=...): the process exits, a resume reschedules the run.
            Configuration("sqlite/suspend", "prefect", {"mode": "suspend"}),
            # pause_flow_run(wait_for_input=...): the flow's process blocks until the run is resumed.
            Configuration("sqlite/pause", "prefect", {"mode": "pause"}),
        ),
        requires="prefect",
        install="pip install 'pymc-resume[prefect]'",
    ),
    "restate": Family(
        "restate",
        # Restate as it comes: a restate-server per example (its data in the example's workdir),
        # the workflow's service process registered through the admin API, awakeables for input.
        (
            Configuration("awakeable", "restate"),  # a crash point kills the service process
            # The same, and the crash point then kills the restate-server too (restarted on its
            # data directory before the next call).
            Configuration("awakeable/server-kill", "restate", {"crash": "server"}),
            # A Virtual Object's shared handler in place of the Workflow: restart-as-new (the
            # fork) is allowed on its completed invocations (docs/restate.md).
            Configuration("object", "restate", {"handler": "object"}),
        ),
        requires="restate",
        install="pip install 'pymc-resume[restate]'",
    ),
}


def family_of(spec: str, timeout: float | None = 60.0) -> Family:
    """The family a `profile ADAPTER` argument names: a family, a built-in name (its one
    configuration), an installed adapter's entry-point name, or `module:Class` (a user's
    adapter, run as it is)."""
    if spec in FAMILIES:
        return FAMILIES[spec]
    installed = installed_adapters()
    if spec in installed and spec not in BUILT_IN:
        return installed_family(spec, installed[spec], timeout)
    if spec in local_adapters() and spec not in BUILT_IN:  # typed on the command line: the user's choice
        target = next(point.value for point, _ in _entry_points() if point.name == spec)
        return installed_family(spec, target, timeout)
    resolve(spec)  # raises AdapterSpecError with the reason
    return Family(spec, (Configuration("default", spec),))


def installed_family(name: str, target: str, timeout: float | None = 60.0) -> Family:
    """The family an installed package offers under entry-point `name`: the `Family` object
    `target` names (a framework with several configurations), or, for an adapter class, a
    family with that one adapter as its "default" configuration. Which of the two it is, a child
    process finds out (`child.py`): the package's module is never imported here."""
    module_name, colon, attribute = target.rpartition(":")
    if not colon or not module_name:
        raise AdapterSpecError(f"installed adapter {name!r}: entry point {target!r} is not module:Object")
    try:
        offered = in_child(lambda: _offered(AdapterRef(name, target)), timeout)
    except ChildProblem as problem:
        if problem.error_type == AdapterNotFound.__name__:
            raise AdapterSpecError(f"adapter {name!r}: {problem.reason}") from None
        if problem.error_type == NotAnAdapter.__name__:
            raise AdapterSpecError(f"adapter {name!r} {problem.reason}") from None
        raise AdapterError(f"adapter {name!r}: reading entry point {target!r} {_what(problem)}") from None
    if isinstance(offered, Family):
        return offered
    return Family(name, (Configuration("default", name),))


def _offered(ref: AdapterRef) -> Family | None:
    """In a child: the Family the entry point names, or None for an adapter class (checked
    here against the protocol: anything else raises NotAnAdapter)."""
    offered = ref.load()
    if isinstance(offered, Family):
        return offered
    check_adapter_class(offered)
    return None


def _what(problem: ChildProblem) -> str:
    if problem.error_type is None:
        return problem.reason
    return f"raised {problem.error_type}: {problem.reason}"


def all_families() -> tuple[list[Family], list[dict]]:
    """What `profile --all` runs: the built-in families, then every installed one (entry
    points of `ENTRY_POINT_GROUP`, a built-in name taking precedence); and, as `profile`'s
    skipped entries, the installed ones that cannot be loaded, each with the reason."""
    families, skipped = list(FAMILIES.values()), []
    for name, target in sorted(installed_adapters().items()):
        if name in FAMILIES or name in BUILT_IN:
            continue
        try:
            families.append(installed_family(name, target))
        except (AdapterSpecError, AdapterError) as error:
            skipped.append({"adapter": name, "reason": str(error), "install": None})
    for name, location in sorted(local_adapters().items()):
        if name not in FAMILIES and name not in BUILT_IN:
            reason = _untrusted(name, location, f"profile it by name (pymc-resume profile {name})")
            skipped.append({"adapter": name, "reason": reason, "install": None})
    return families, skipped


class AdapterSpecError(BadInput):
    """An adapter name that cannot be resolved; the message says why."""


def _untrusted(name: str, location: Path, how: str) -> str:
    """Why a local entry point (`local_adapters`) is not used, and how to use it."""
    return (
        f"adapter {name!r} is offered by a package found under the current directory ({location}), "
        "which is not trusted (trusted: entry points of packages installed in this interpreter's "
        f"site-packages, or outside the current directory); {how}, or run from another directory"
    )


# The entry-point group through which an installed package offers adapters by name.
ENTRY_POINT_GROUP = "pymc_resume.adapters"


def installed_adapters() -> dict[str, str]:
    """Adapters that installed packages offer through the `pymc_resume.adapters` entry points:
    name -> `module:Class`; only the trusted ones (see `local_adapters`)."""
    return {point.name: point.value for point, trusted in _entry_points() if trusted}


def local_adapters() -> dict[str, Path]:
    """Entry points that are not trusted: name -> where their distribution was found.

    `importlib.metadata` finds distributions on `sys.path`, and `python -m pymc_resume` puts
    the current directory first on it (`PYTHONPATH=..` puts its parent), so a folder holding a
    crafted `*.dist-info` would offer adapters as if they were installed. An entry point is
    trusted when its distribution lies in one of this interpreter's own installation
    directories (site-packages, the user's site-packages: a virtual environment inside the
    project is installed code), or elsewhere on `sys.path` but neither in the current
    directory, nor in one of its parents, nor in a folder `PYTHONPATH` names. A local one is
    used only when it is named on the command line (the user typed it, as a `module:Class` spec
    imports from the current directory too), or, from a repro file, with `--allow-adapter
    NAME`; `profile --all` lists it as skipped."""
    return {point.name: _location(point) or Path("?") for point, trusted in _entry_points() if not trusted}


def _entry_points() -> list[tuple[object, bool]]:
    """Every entry point of `ENTRY_POINT_GROUP`, with whether it is trusted."""
    from importlib.metadata import entry_points

    cwd = _resolved(os.getcwd())
    installation = _installation_dirs()
    named = {_resolved(entry) for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry}
    found = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        location = _location(point)
        local = (
            cwd is None
            or location in named
            or location.is_relative_to(cwd)  # the current directory, or a folder in it
            or cwd.is_relative_to(location)  # one of its parents
        )
        trusted = location is not None and (location in installation or not local)
        found.append((point, trusted))
    return found


def _location(point) -> Path | None:
    """The folder on `sys.path` where an entry point's distribution was found (None: unknown)."""
    dist = getattr(point, "dist", None)
    if dist is None:
        return None
    try:
        return _resolved(dist.locate_file(""))
    except Exception:  # a distribution of a kind that has no files on disk
        return None


def _installation_dirs() -> set[Path]:
    """This interpreter's own installation directories (site-packages and the user's)."""
    import site
    import sysconfig

    paths = [sysconfig.get_paths().get(key) for key in ("purelib", "platlib")]
    paths += list(getattr(site, "getsitepackages", list)())
    if site.ENABLE_USER_SITE:
        paths.append(site.getusersitepackages())
    return {resolved for path in paths if path and (resolved := _resolved(path)) is not None}


def _resolved(path) -> Path | None:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError, ValueError):
        return None


def resolve(spec: str, allowed: Collection[str] | None = None) -> AdapterRef:
    """Where the adapter a spec names is: a built-in name, an installed adapter's entry-point
    name, `module:Class` or `path/to/file.py:Class`. Nothing is imported (`loading.py`).

    `allowed=None` accepts any spec: the user typed it on the command line. A spec read from a
    file (a repro) is untrusted: then only built-in and installed adapters, and the specs in
    `allowed` (`--allow-adapter`), are resolved, so a repro cannot make pymc-resume import and
    call an arbitrary function such as `os:system`.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise AdapterSpecError(f"adapter spec {spec!r}: expected a name or module:Class")
    installed = installed_adapters()
    target = BUILT_IN.get(spec) or installed.get(spec)
    if target is None and current_path(spec) in {*BUILT_IN.values(), *installed.values()}:
        target = current_path(spec)  # a built-in or installed adapter named by its module path
    local = local_adapters() if target is None else {}
    if spec in local:
        if allowed is not None and spec not in allowed:
            raise AdapterSpecError(
                _untrusted(spec, local[spec], "a repro names it only with --allow-adapter " + spec)
            )
        target = next(point.value for point, _ in _entry_points() if point.name == spec)
    elif target is None:
        if allowed is not None and spec not in allowed:
            known = ", ".join([*BUILT_IN, *installed])
            raise AdapterSpecError(
                f"adapter {spec!r} is neither built in nor installed (known: {known}); a repro names "
                "other adapters only with --allow-adapter " + spec
            )
        target = spec
    module_name, colon, class_name = target.rpartition(":")
    if not colon or not module_name or not all(part.isidentifier() for part in class_name.split(".")):
        known = ", ".join(BUILT_IN)
        raise AdapterSpecError(
            f"unknown adapter {spec!r} (built-in: {known}; or module:Class or path/to/file.py:Class)"
        )
    is_file = module_name.endswith(".py") or "/" in module_name
    if is_file and not Path(module_name).is_file():
        raise AdapterSpecError(f"adapter {spec!r}: no file {module_name!r}")
    if not is_file and not all(part.isidentifier() for part in module_name.split(".")):
        raise AdapterSpecError(f"adapter {spec!r}: {module_name!r} is not a module name")
    return AdapterRef(spec, target)


JSON_SCALARS = (str, int, float, bool, type(None))


def check_options(spec: str, options: dict) -> dict:
    """The keyword arguments `options` give the adapter's constructor: plain JSON values. Whether
    the constructor takes them is checked where the adapter is built (`loading.load_checked`)."""
    if not isinstance(options, dict):
        raise AdapterSpecError(f"adapter {spec!r}: options must be a JSON object")
    kwargs = {}
    for key, value in options.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise AdapterSpecError(f"adapter {spec!r}: option name {key!r} is not an identifier")
        if not isinstance(value, JSON_SCALARS) or (isinstance(value, float) and not math.isfinite(value)):
            raise AdapterSpecError(
                f"adapter {spec!r}: option {key!r} must be a string, number, "
                f"boolean or null, not {type(value).__name__}"
            )
        if value is not None:
            kwargs[key] = value
    return kwargs


def factory(
    spec: str,
    options: dict | None = None,
    allowed: Collection[str] | None = None,
    timeout: float | None = 30.0,
    templates: HostTemplates | None = None,
) -> AdapterBuilder:
    """A zero-argument callable that builds a fresh adapter (in a host); checks the spec and
    the options up front. `allowed`: see `resolve` (None for a spec the user typed).
    `templates`: the run's host templates; the builder's hosts are forked from its template.

    The up-front check builds one adapter in a host process (`bridge/hosting/host.py`) within
    `timeout` seconds: a module that cannot be imported, a class that is no adapter, an option
    the constructor does not take, a constructor that fails, hangs or exits, is one line now;
    what the adapter declares is kept as the builder's `info`."""
    ref = resolve(spec, allowed)
    kwargs = check_options(spec, options or {})
    template = None
    if templates is not None:
        try:
            template = templates.template_for(ref, timeout)
        except TemplateGone as gone:
            raise AdapterError(f"adapter {spec!r}: {gone}") from None
    stats = templates.stats if templates is not None else None
    builder = AdapterBuilder(spec, ref, kwargs, template=template, stats=stats)
    try:
        info = probe(builder, timeout, template, stats)
    except HostProblem as problem:
        raise built_error(spec, problem) from None
    if templates is not None:
        templates.tell_fallback(template)
    return attrs.evolve(builder, info=info)


# How a build's failure in the host reads: by the exception's class, the words that follow.
_SPEC_ERRORS = {
    AdapterNotFound.__name__: ": ",
    NotAnAdapter.__name__: " ",
    UnknownOptions.__name__: " ",
}


def built_error(spec: str, problem: HostProblem) -> Exception:
    """The one-line error for an adapter that could not be built in its host."""
    if problem.kind == RAISED and problem.error_type in _SPEC_ERRORS:
        return AdapterSpecError(f"adapter {spec!r}{_SPEC_ERRORS[problem.error_type]}{problem.error_args}")
    if problem.error_type == "KeyError":  # an option naming something unknown (a fault)
        return AdapterSpecError(f"adapter {spec!r}: unknown {problem.error_args}")
    if problem.kind == RAISED:  # with the constructor's own message
        return AdapterSpecError(f"adapter {spec!r} cannot be built: {problem.reason.removeprefix('raised ')}")
    return AdapterError(f"adapter {spec!r}: building the adapter {problem.reason}")
