"""Adapters by name: the built-in ones, or `module:Class` for a user's own; and the framework
families a conformance profile runs, each with its configurations.

`factory(spec, options)` builds one adapter per example; `options` are keyword arguments
of the adapter's constructor (the reference adapter takes `fault`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import select
import signal
import sys
import time
from collections.abc import Collection
from pathlib import Path

import attrs

from pymc_resume.bridge.hosting.host import (
    HELD_SIGNALS,
    RAISED,
    AdapterInfo,
    HostProblem,
    fork_holding_signals,
    kill_tree,
    probe,
    release_held_signals,
)
from pymc_resume.bridge.hosting.stats import HostStats
from pymc_resume.bridge.hosting.template import HostTemplate, HostTemplates, TemplateGone
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
}


def family_of(spec: str) -> Family:
    """The family a `profile ADAPTER` argument names: a family, a built-in name (its one
    configuration), an installed adapter's entry-point name, or `module:Class` (a user's
    adapter, run as it is)."""
    if spec in FAMILIES:
        return FAMILIES[spec]
    installed = installed_adapters()
    if spec in installed and spec not in BUILT_IN:
        return installed_family(spec, installed[spec])
    if spec in local_adapters() and spec not in BUILT_IN:  # typed on the command line: the user's choice
        target = next(point.value for point, _ in _entry_points() if point.name == spec)
        module_name = target.rpartition(":")[0]
        if module_name and module_name not in sys.modules:
            _trial_import(module_name, spec, 60.0)  # local code: imported first where it cannot hang us
        return installed_family(spec, target)
    resolve(spec)  # raises AdapterSpecError with the reason
    return Family(spec, (Configuration("default", spec),))


def installed_family(name: str, target: str) -> Family:
    """The family an installed package offers under entry-point `name`: the `Family` object
    `target` names (a framework with several configurations), or, for an adapter class, a
    family with that one adapter as its "default" configuration."""
    module_name, colon, attribute = target.rpartition(":")
    if not colon or not module_name:
        raise AdapterSpecError(f"installed adapter {name!r}: entry point {target!r} is not module:Object")
    offered = getattr(_import(module_name, name), attribute, None)
    if isinstance(offered, Family):
        return offered
    resolve(name)  # an adapter class, checked as any other (raises with the reason)
    return Family(name, (Configuration("default", name),))


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

# Methods every adapter class has (an operation its framework cannot express, declared in
# `unsupported`, may be missing). Attributes such as `name` and `version` may be set by the
# constructor, so they are checked on the built adapter.
REQUIRED_METHODS = ("options", "open", "close", "start", "recover", "observe")
OPERATION_METHODS = {
    "resume": "resume",
    "resume-together": "resume_together",
    "fork": "fork",
    "update": "update",
}


def installed_adapters() -> dict[str, str]:
    """Adapters that installed packages offer through the `pymc_resume.adapters` entry points:
    name -> `module:Class`; only the trusted ones (see `local_adapters`)."""
    return {point.name: point.value for point, trusted in _entry_points() if trusted}


def local_adapters() -> dict[str, Path]:
    """Entry points that are not trusted: name -> where their distribution was found.

    `importlib.metadata` finds distributions on `sys.path`, and `python -m pymc_resume` puts
    the current directory first on it, so a folder holding a crafted `*.dist-info` would offer
    adapters as if they were installed. An entry point is trusted when its distribution lies
    outside the current directory, or in one of this interpreter's own installation directories
    (site-packages, the user's site-packages: a virtual environment inside the project is
    installed code). A local one is used only when it is named on the command line (the user
    typed it, as a `module:Class` spec imports from the current directory too), or, from a repro
    file, with `--allow-adapter NAME`; `profile --all` lists it as skipped."""
    return {point.name: _location(point) or Path("?") for point, trusted in _entry_points() if not trusted}


def _entry_points() -> list[tuple[object, bool]]:
    """Every entry point of `ENTRY_POINT_GROUP`, with whether it is trusted."""
    from importlib.metadata import entry_points

    cwd = _resolved(os.getcwd())
    installation = _installation_dirs()
    found = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        location = _location(point)
        trusted = location is not None and (
            location in installation or cwd is None or not location.is_relative_to(cwd)
        )
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


def resolve(spec: str, allowed: Collection[str] | None = None, timeout: float | None = 60.0):
    """The adapter class a spec names: a built-in name, an installed adapter's entry-point
    name, `module:Class` or `path/to/file.py:Class`.

    `allowed=None` accepts any spec: the user typed it on the command line. A spec read from a
    file (a repro) is untrusted: then only built-in and installed adapters, and the specs in
    `allowed` (`--allow-adapter`), are resolved; nothing else is imported, so a repro cannot
    make pymc-resume call an arbitrary function such as `os:system`.

    A module that is neither built in nor installed is imported first in a forked child within
    `timeout` seconds (`_trial_import`): one that hangs or ends its process at import is
    stopped there, in one line, before this process imports it.
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
        trial = True
    elif target is None:
        if allowed is not None and spec not in allowed:
            known = ", ".join([*BUILT_IN, *installed])
            raise AdapterSpecError(
                f"adapter {spec!r} is neither built in nor installed (known: {known}); a repro names "
                "other adapters only with --allow-adapter " + spec
            )
        target = spec
    trial = target == spec
    module_name, colon, class_name = target.rpartition(":")
    if not colon or not module_name or not class_name.isidentifier():
        known = ", ".join(BUILT_IN)
        raise AdapterSpecError(
            f"unknown adapter {spec!r} (built-in: {known}; or module:Class or path/to/file.py:Class)"
        )
    if trial and module_name not in sys.modules:  # user code, not yet imported
        _trial_import(module_name, spec, timeout)
    module = _import(module_name, spec)
    adapter = getattr(module, class_name, None)
    if adapter is None:
        raise AdapterSpecError(f"adapter {spec!r}: {module_name!r} has no {class_name!r}")
    check_adapter_class(adapter, spec)
    return adapter


def _trial_import(module_name: str, spec: str, timeout: float | None) -> None:
    """Import `module_name` in a forked child, in a process group of its own, and wait for it
    at most `timeout` seconds; on a hang, the child's whole group and every descendant is
    killed. An import that raises is left for the real import to report."""
    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = fork_holding_signals()
    if pid == 0:  # the child: import, say so, end without running the parent's cleanup
        for signum in HELD_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)
        release_held_signals()
        os.close(read)
        os.setpgid(0, 0)
        try:
            _import(module_name, spec)
        except BaseException:
            pass
        os.write(write, b"imported")
        os._exit(0)
    os.close(write)
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        said = b""
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([read], [], [], left)
            if not ready:
                raise AdapterError(
                    f"adapter {spec!r}: importing {module_name!r} did not finish within {timeout:g}s"
                )
            chunk = os.read(read, 64)
            if not chunk:
                break
            said += chunk
        if said != b"imported":
            raise AdapterError(f"adapter {spec!r}: importing {module_name!r} ended the process it ran in")
    finally:
        os.close(read)
        kill_tree(pid)
        os.waitpid(pid, 0)


def _import(module_name: str, spec: str):
    """The module a spec names (a dotted name, or a .py file path); any failure is one line."""
    if module_name.endswith(".py") or "/" in module_name:
        return _import_file(Path(module_name), spec)
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise AdapterSpecError(f"adapter {spec!r}: {module_name!r} is not a module name")
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise AdapterSpecError(f"adapter {spec!r}: cannot import {module_name!r}: {error}") from None
    except BaseException as error:
        raise AdapterError(
            f"adapter {spec!r}: importing {module_name!r} failed: {type(error).__name__}: {error}"
        ) from None


def _import_file(path: Path, spec: str):
    if not path.is_file():
        raise AdapterSpecError(f"adapter {spec!r}: no file {str(path)!r}")
    name = "pymc_resume_user_adapter_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise AdapterSpecError(f"adapter {spec!r}: {str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # before running it, as an import does (dataclasses need it)
    try:
        module_spec.loader.exec_module(module)
    except BaseException as error:
        del sys.modules[name]
        raise AdapterError(
            f"adapter {spec!r}: loading {str(path)!r} failed: {type(error).__name__}: {error}"
        ) from None
    return module


def check_adapter_class(adapter, spec: str) -> None:
    """Refuse, in one line, what cannot be an adapter class: not a class, or a class without
    a method of the adapter protocol (`bridge.adapter.Adapter`)."""
    if not inspect.isclass(adapter):
        raise AdapterSpecError(f"adapter {spec!r} is not a class (got {type(adapter).__name__})")
    unsupported = getattr(adapter, "unsupported", None)
    declared = set(unsupported) if isinstance(unsupported, dict) else set()
    wanted = [
        *REQUIRED_METHODS,
        *(method for operation, method in OPERATION_METHODS.items() if operation not in declared),
    ]
    missing = [method for method in wanted if not callable(getattr(adapter, method, None))]
    if missing:
        raise AdapterSpecError(
            f"adapter {spec!r} does not implement the adapter protocol: missing "
            f"{', '.join(missing)} (see pymc_resume.bridge.adapter.Adapter)"
        )


JSON_SCALARS = (str, int, float, bool, type(None))


def check_options(spec: str, adapter_class, options: dict) -> dict:
    """The keyword arguments `options` give the adapter's constructor: plain JSON values, each
    a parameter the constructor declares."""
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
    if kwargs:
        try:
            inspect.signature(adapter_class).bind(**kwargs)
        except TypeError:
            raise AdapterSpecError(
                f"adapter {spec!r} does not take option(s) {', '.join(sorted(kwargs))}"
            ) from None
        except ValueError:  # no signature to read (a builtin)
            raise AdapterSpecError(f"adapter {spec!r} declares no options") from None
    return kwargs


@attrs.frozen
class AdapterBuilder:
    """Builds a fresh adapter of one configuration when called (`Session` calls it in the
    adapter's host process). `info` is what the adapter declares, read when `factory` built
    one up front; `template`, when there is one, is where its hosts are forked from
    (`template.py`). Pickled (to a template), it is only what builds the adapter."""

    spec: str
    adapter_class: type
    kwargs: dict
    info: AdapterInfo | None = None
    template: HostTemplate | None = attrs.field(default=None, eq=False, repr=False)
    stats: HostStats | None = attrs.field(default=None, eq=False, repr=False)  # the run's counts

    def __call__(self):
        return self.adapter_class(**self.kwargs)

    def __reduce__(self):
        return (AdapterBuilder, (self.spec, self.adapter_class, self.kwargs))


def factory(
    spec: str,
    options: dict | None = None,
    allowed: Collection[str] | None = None,
    timeout: float | None = 30.0,
    templates: HostTemplates | None = None,
) -> AdapterBuilder:
    """A zero-argument callable that builds a fresh adapter; checks the options up front.
    `allowed`: see `resolve` (None for a spec the user typed). `templates`: the run's host
    templates; the builder's hosts are forked from the adapter class's (see `template.py`).

    The up-front check builds one adapter in a host process (`bridge/hosting/host.py`) within
    `timeout` seconds, so that a constructor that fails says so now, in one line, and one that
    hangs or exits is stopped; what it declares is kept as the builder's `info`."""
    adapter_class = resolve(spec, allowed, timeout)
    template = None
    if templates is not None:
        try:
            template = templates.template_for(adapter_class, timeout)
        except TemplateGone as gone:
            raise AdapterError(f"adapter {spec!r}: {gone}") from None
    builder = AdapterBuilder(spec, adapter_class, check_options(spec, adapter_class, options or {}))
    stats = templates.stats if templates is not None else None
    builder = attrs.evolve(builder, template=template, stats=stats)
    try:
        info = probe(builder, timeout, template, stats)
    except HostProblem as problem:
        if problem.error_type == "KeyError":  # an option naming something unknown (a fault)
            raise AdapterSpecError(f"adapter {spec!r}: unknown {problem.error_args}") from None
        if problem.kind == RAISED:  # with the constructor's own message
            raise AdapterSpecError(
                f"adapter {spec!r} cannot be built: {problem.reason.removeprefix('raised ')}"
            ) from None
        raise AdapterError(f"adapter {spec!r}: building the adapter {problem.reason}") from None
    return attrs.evolve(builder, info=info)
