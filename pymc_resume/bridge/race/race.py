"""The concurrent-resume race: k real processes resume one parked interrupt at once.

For each cell (store x durability mode x k x gate) and each trial: a fresh adapter on a fresh
store starts the workflow `[step, gated]`, which parks at the gated interrupt; then k child
processes each read the thread's head, wait at a barrier until every one of them has read it
(window "after-load", `pymc_resume.bridge.kit.process`), and deliver the approving value at once.
The effect sink (a SQLite file apart from the framework's store) tells what happened:

- consumptions: racers whose node code ran for the gated stage (the value was consumed);
- fires: times the gated effect was sent; `applied` is after the sink's key dedupe;
- per racer: its outcome (ok, refused, crashed), whether it ran the node, the value the node
  acted on, and the host it ran on.

With hosts (`plan_cells(..., hosts=[1, 2])`), the PostgreSQL cells run on a network island
(`pymc_resume.bridge.race.hosts`): a throwaway PostgreSQL server on a store host, and the racers of a cell
with h hosts spread over h network hosts (racer i on host i % h), each a real process in its
own network namespace that reaches the store over TCP. SQLite is a file, so its cells stay on
one host (the machine's).

Saturation of a trial is (fires - 1) / (k - 1): 0 when one racer fired, 1 when all did. The
race is generic over adapters (it uses only the adapter protocol), so the reference adapter
is its control: it must show saturation 0.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable

import attrs

from pymc_resume.bridge.adapter import CRASHED, OK, REFUSED, FuzzSetup
from pymc_resume.bridge.adapter.nodes import FuzzNodes
from pymc_resume.bridge.adapter.sink import Sink
from pymc_resume.bridge.hosting.child import ChildProblem, in_child
from pymc_resume.bridge.hosting.host import HostedAdapter, HostProblem, probe
from pymc_resume.bridge.hosting.loading import (
    AdapterBuilder,
    AdapterNotFound,
    AdapterRef,
    NotAnAdapter,
    UnknownOptions,
    load_checked,
)
from pymc_resume.bridge.hosting.registry import resolve
from pymc_resume.bridge.hosting.template import HostTemplates, TemplateGone, templates_in
from pymc_resume.bridge.hosting.workdirs import make_workdir, sweep
from pymc_resume.bridge.judging.session import (
    AdapterFailure,
    checked_observation,
    checked_outcomes,
    step_deadline,
)
from pymc_resume.bridge.race.hosts import placing
from pymc_resume.errors import AdapterError, BadInput, PymcResumeError
from pymc_resume.model.contract import HOLDS, VIOLATED
from pymc_resume.model.workflow import APPROVE, Workflow

RACE_NODES = ("step", "gated")
WINDOW = "after-load"
STORES = ("sqlite", "postgres")
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
POSTGRES_URL_VARIABLE = "PYMC_RESUME_POSTGRES_URL"
MAX_RACERS = 256  # racers (each a process) of one cell, and network hosts they spread over

# A cell holds or is violated as a clause is; two outcomes are the race's own.
NONE_SERVED, CANNOT_RUN = "none-served", "cannot-run"
LOCAL = "local"  # a racer on the machine itself, the store over loopback (or a file)
INVOKE, AINVOKE = "invoke", "ainvoke"
APIS = (INVOKE, AINVOKE)
# Adapters whose graphs can also run async, and the adapter class that runs them so.
ASYNC_VARIANTS = {
    "pymc_resume.bridge.adapters.langgraph:LangGraphAdapter": (
        "pymc_resume.bridge.adapters.langgraph_async:LangGraphAsyncAdapter"
    ),
}


class RaceInputError(BadInput):
    """A race that cannot be set up as asked (bad option for this adapter); one-line message."""


class CellError(Exception):
    """A cell that cannot run here; the message says why."""


@attrs.frozen
class Cell:
    """One configuration to race: where it runs, how many racers, gated or not."""

    store: str  # "sqlite", "postgres", or "default" for an adapter without a store option
    config: str  # e.g. "sqlite/sync", or the adapter's name
    k: int
    gate: bool
    options: dict  # the adapter constructor's keyword arguments
    hosts: int = 1  # network hosts the racers are spread over
    network: bool = False  # racers on island hosts, the store over the island's network
    api: str = "invoke"  # how the racers run the graph: invoke, or ainvoke (an async graph)
    variant: str | None = None  # the adapter class that runs `api`, when not the race's own


@attrs.frozen
class Racer:
    index: int
    value: int
    status: str  # ok, refused, crashed
    detail: str
    executed: bool  # its node code ran for the gated stage
    fires: int  # gated-effect fires it sent
    acted_on: int | None  # the value its node acted on (from the state it fired with)
    host: str = LOCAL  # the address of the host it ran on, or "local" (the machine, loopback)

    def as_json(self) -> dict:
        return attrs.asdict(self)


@attrs.frozen
class Trial:
    racers: tuple[Racer, ...]
    applied: int  # fires the sink applied (after its key dedupe)
    recorded: int | None  # the gated node's value in the thread's head afterwards
    seconds: float

    @property
    def fires(self) -> int:
        return sum(r.fires for r in self.racers)

    @property
    def consumptions(self) -> int:
        return sum(r.executed for r in self.racers)

    def saturation(self, k: int) -> float:
        return max(self.fires - 1, 0) / (k - 1)


@attrs.define
class CellResult:
    cell: Cell
    trials: list[Trial] = attrs.field(factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def saturations(self) -> list[float]:
        return [t.saturation(self.cell.k) for t in self.trials]

    @property
    def saturation_mean(self) -> float | None:
        return statistics.fmean(self.saturations) if self.trials else None

    @property
    def saturation_stdev(self) -> float | None:
        return statistics.pstdev(self.saturations) if self.trials else None

    @property
    def verdict(self) -> str:
        if self.error is not None:
            return CANNOT_RUN
        if any(t.fires > 1 or t.consumptions > 1 for t in self.trials):
            return VIOLATED
        if any(t.consumptions == 0 for t in self.trials):
            return NONE_SERVED
        return HOLDS

    def as_json(self) -> dict:
        cell, trials = self.cell, self.trials
        return {
            "store": cell.store,
            "config": cell.config,
            "k": cell.k,
            "gate": cell.gate,
            "hosts": cell.hosts,
            "network": cell.network,
            "api": cell.api,
            "options": cell.options,
            "trials": len(trials),
            "verdict": self.verdict,
            "error": self.error,
            "fires": [t.fires for t in trials],
            "consumptions": [t.consumptions for t in trials],
            "applied": [t.applied for t in trials],
            "served": [sum(r.status == OK for r in t.racers) for t in trials],
            "refused": [sum(r.status == REFUSED for r in t.racers) for t in trials],
            "recorded": [t.recorded for t in trials],
            "saturation": self.saturations,
            "saturation_mean": self.saturation_mean,
            "saturation_stdev": self.saturation_stdev,
            "seconds": round(self.seconds, 3),
            "trial_seconds": [round(t.seconds, 3) for t in trials],
            "racers": [[r.as_json() for r in t.racers] for t in trials],
        }


@attrs.define
class RaceReport:
    adapter: str
    version: str
    cells: list[CellResult]
    seconds: float = 0.0

    @property
    def violated(self) -> bool:
        return any(c.verdict in (VIOLATED, NONE_SERVED) for c in self.cells)

    @property
    def unrunnable(self) -> list[CellResult]:
        return [c for c in self.cells if c.verdict == CANNOT_RUN]

    def as_json(self) -> dict:
        return {
            "adapter": self.adapter,
            "version": self.version,
            "workflow": list(RACE_NODES),
            "window": WINDOW,
            "seconds": round(self.seconds, 3),
            "by_hosts": [dict(zip(SATURATION_HEADERS, row)) for row in saturation_by_hosts(self)],
            "cells": [c.as_json() for c in self.cells],
        }


# -- planning: which cells an adapter can race ------------------------------------------------


def plan_cells(
    adapter: str,
    ks: list[int],
    stores: list[str] | None = None,
    durabilities: list[str] | None = None,
    gates: list[bool] | None = None,
    hosts: list[int] | None = None,
    apis: list[str] | None = None,
    timeout: float | None = 120.0,
) -> list[Cell]:
    """Cells for `adapter`: stores x API x durability modes x gate x hosts x k. An option left None
    takes the adapter's own default (every durability mode its module declares, for the base
    class); an option the adapter does not take is a `RaceInputError`.

    `hosts` (None: every racer on the machine, the store over loopback) puts the PostgreSQL
    cells on a network island, once per host count; a SQLite store is a file on one host, so
    its cells run on one host only, whatever `hosts` says. `apis` (default: invoke) adds the
    racers' async graphs (ainvoke) for an adapter that has them (`ASYNC_VARIANTS`). What the
    adapter's constructor takes is read in a child process (`constructor_of`), within `timeout`."""
    ref = resolve(adapter)
    constructor = constructor_of(ref, timeout)
    parameters = constructor.defaults
    if not ks or any(not 2 <= k <= MAX_RACERS for k in ks):
        raise RaceInputError(
            f"--k: every k must be at least 2 (a race needs two racers) "
            f"and at most {MAX_RACERS} (each is a process)"
        )
    stores = _choices(adapter, parameters, "store", stores, [_default(parameters, "store")])
    durabilities = _choices(adapter, parameters, "durability", durabilities, _modes(constructor))
    gates = _choices(adapter, parameters, "gate", gates, [bool(_default(parameters, "gate"))])
    host_counts = _host_counts(adapter, stores, hosts)
    variants = _variants(adapter, ref, apis)
    cells = []
    for store, (api, variant) in itertools.product(stores, variants.items()):
        networked = hosts is not None and store == "postgres"
        for durability in durabilities:
            for gate in gates:
                for count in host_counts if networked else [1]:
                    for k in ks:
                        options = {
                            name: value
                            for name, value in (("store", store), ("durability", durability), ("gate", gate))
                            if name in parameters
                        }
                        cells.append(
                            Cell(
                                store or "default",
                                _config_name(adapter, store, durability),
                                k,
                                bool(gate),
                                options,
                                count,
                                networked,
                                api,
                                variant,
                            )
                        )
    for options in {tuple(sorted(c.options.items())) for c in cells}:
        _check_options(ref, dict(options), timeout)
    return cells


@attrs.frozen
class Constructor:
    """What planning needs of an adapter's constructor, read in a child process: each parameter
    and its default (None when it has none, or one that is not a plain value), and the
    durability modes its module declares (`DURABILITY`)."""

    defaults: dict[str, object]
    durability_modes: tuple


def constructor_of(ref: AdapterRef, timeout: float | None) -> Constructor:
    """The adapter's constructor, read in a child (`hosting/child.py`): the command never
    imports the adapter's module. A module that cannot be imported is bad input; one that
    hangs, exits or raises otherwise is one line, exit 2."""
    try:
        return in_child(lambda: _read_constructor(ref), timeout)
    except ChildProblem as problem:
        if problem.error_type in (AdapterNotFound.__name__, NotAnAdapter.__name__):
            raise RaceInputError(f"adapter {ref.spec!r}: {problem.reason}") from None
        raise AdapterError(f"adapter {ref.spec!r}: reading its constructor {_said(problem)}") from None


def _read_constructor(ref: AdapterRef) -> Constructor:
    """In a child: the class, checked, and its constructor's parameters."""
    adapter_class = load_checked(ref, {})
    plain = (str, int, float, bool, type(None))
    defaults = {
        name: (parameter.default if isinstance(parameter.default, plain) else None)
        for name, parameter in inspect.signature(adapter_class).parameters.items()
    }
    module = sys.modules[adapter_class.__module__]
    return Constructor(defaults, tuple(getattr(module, "DURABILITY", ())))


def _said(problem: ChildProblem) -> str:
    return problem.reason if problem.error_type is None else f"raised {problem.error_type}: {problem.reason}"


def _variants(adapter: str, ref: AdapterRef, apis: list[str] | None) -> dict[str, str | None]:
    """The adapter class spec (None: the race's own) that runs each asked API."""
    apis = list(dict.fromkeys(apis or [INVOKE]))
    unknown = [a for a in apis if a not in APIS]
    if unknown:
        raise RaceInputError(f"--api: unknown {', '.join(unknown)} (one of {', '.join(APIS)})")
    variants = {}
    for api in apis:
        if api == INVOKE:
            variants[api] = None
            continue
        spec = ASYNC_VARIANTS.get(ref.target)
        if spec is None:
            raise RaceInputError(
                f"adapter {adapter!r} has no async graphs to race (--api ainvoke): "
                f"only {', '.join(sorted(ASYNC_VARIANTS))}"
            )
        variants[api] = spec
    return variants


def _host_counts(adapter: str, stores: list, hosts: list[int] | None) -> list[int]:
    if hosts is None:
        return [1]
    if not hosts or any(not 1 <= h <= MAX_RACERS for h in hosts):
        raise RaceInputError(f"--hosts: every host count must be at least 1 and at most {MAX_RACERS}")
    if "postgres" not in stores:
        raise RaceInputError(
            f"--hosts needs a network store: adapter {adapter!r} races on "
            f"{', '.join(str(s) for s in stores)} here, a file on one host (add --store postgres)"
        )
    return list(dict.fromkeys(hosts))


def _check_options(ref: AdapterRef, options: dict, timeout: float | None) -> None:
    """Build the adapter with `options` in a child, within `timeout`: a bad option value (the
    constructor's KeyError) is bad input; a constructor that exits, raises a BaseException or
    hangs is one line, exit 2; anything else the environment lacks (a driver that is not
    installed) is reported by the cell that needs it."""
    try:
        in_child(lambda: _built(ref, options), timeout)
    except ChildProblem as problem:
        if problem.error_type == "KeyError":
            raise RaceInputError(f"adapter {ref.spec!r}: unknown {problem.reason}") from None
        if problem.error_type in (AdapterNotFound.__name__, NotAnAdapter.__name__, UnknownOptions.__name__):
            raise RaceInputError(f"adapter {ref.spec!r}: {problem.reason}") from None
        if problem.error_type is None or problem.error_type in ("SystemExit", "KeyboardInterrupt"):
            raise AdapterError(f"adapter {ref.spec!r}: building it with {options} {_said(problem)}") from None


def _built(ref: AdapterRef, options: dict) -> None:
    """In a child: the adapter built with `options` (nothing returned: only whether it could)."""
    load_checked(ref, options)(**options)


def _choices(adapter: str, parameters, name: str, asked: list | None, default: list) -> list:
    if asked is None:
        return default
    if name not in parameters:
        raise RaceInputError(f"adapter {adapter!r} has no {name} option")
    if name == "store":
        unknown = [s for s in asked if s not in STORES]
        if unknown:
            raise RaceInputError(f"--store: unknown {', '.join(unknown)} (one of {', '.join(STORES)})")
    return list(dict.fromkeys(asked))


def _default(parameters: dict, name: str):
    return parameters.get(name)


def _modes(constructor: Constructor) -> list:
    """Every durability mode the adapter's module declares when the adapter defaults to the
    first of them (the generic class); else the one mode the adapter is named for."""
    default = constructor.defaults.get("durability")
    declared = constructor.durability_modes
    if declared and default == declared[0]:
        return list(declared)
    return [default]


def _config_name(adapter: str, store: str | None, durability: str | None) -> str:
    parts = [p for p in (store, durability) if p]
    return "/".join(parts) if parts else adapter


# -- running ----------------------------------------------------------------------------------


def postgres_url(url: str | None = None) -> str:
    return url or os.environ.get(POSTGRES_URL_VARIABLE, DEFAULT_POSTGRES_URL)


def postgres_unreachable(url: str) -> str | None:
    """Why the PostgreSQL server at `url` cannot be used, or None when it answers."""
    try:
        import psycopg
    except ImportError as error:
        return f"psycopg is not installed ({error}); pip install 'pymc-resume[langgraph]'"
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as error:
        return f"no PostgreSQL server at {url}: {str(error).strip().splitlines()[0]}"
    return None


def run_race(
    adapter: str,
    cells: list[Cell],
    trials: int,
    *,
    timeout: float = 120.0,
    postgres: str | None = None,
    progress: Callable[[str], None] | None = None,
    templates: HostTemplates | None = None,
) -> RaceReport:
    """Run every cell `trials` times; a cell that cannot run keeps its reason.

    Each trial's host is forked from the adapter's host template (`templates`, or the run's own),
    which imported the framework once; racers are forked from the host, as before. A networked
    cell's hosts are forked from this process (their adapter is placed on the island).

    The networked cells share one island (`pymc_resume.bridge.race.hosts.Island`) with as many hosts as the
    largest host count, made before the first of them and removed after the last, on every path.
    """
    started = time.monotonic()
    sweep()  # work directories a killed run left behind (then an adapter's open sweeps its schemas)
    url = postgres_url(postgres)
    ref = resolve(adapter)
    local = [c for c in cells if not c.network]
    unreachable = postgres_unreachable(url) if any(c.store == "postgres" for c in local) else None
    results = [CellResult(cell) for cell in cells]
    with contextlib.ExitStack() as stack:
        templates = stack.enter_context(templates_in(templates, progress))
        version = _version(ref, cells, timeout, templates)
        island = None
        networked = [c.hosts for c in cells if c.network]
        for number, (cell, result) in enumerate(zip(cells, results), 1):
            where = f"[{number}/{len(cells)}] {_label(cell)}"
            if cell.network and island is None:
                from pymc_resume.bridge.race.hosts import Island

                try:
                    island = stack.enter_context(Island(max(networked)))
                except PymcResumeError as error:
                    for other in results:
                        if other.cell.network:
                            other.error = str(error)
                    _say(progress, f"{where}: cannot run: {error}")
                    island = False  # tried once: every networked cell says why
                else:
                    _say(progress, f"island: store {island.url}, hosts {', '.join(island.addresses)}")
            if cell.network and island is False:
                continue
            if cell.store == "postgres" and not cell.network and unreachable:
                result.error = unreachable
                _say(progress, f"{where}: cannot run: {unreachable}")
                continue
            # The adapters (and their child processes) read the server's URL from the environment.
            os.environ[POSTGRES_URL_VARIABLE] = island.url if cell.network else url
            runner = resolve(cell.variant) if cell.variant else ref
            on_island = island if cell.network else None
            _run_cell(runner, result, trials, timeout, on_island, where, progress, templates)
    os.environ[POSTGRES_URL_VARIABLE] = url
    return RaceReport(adapter, version, results, time.monotonic() - started)


def _run_cell(
    ref: AdapterRef,
    result: CellResult,
    trials: int,
    timeout: float,
    island,
    where: str,
    progress,
    templates: HostTemplates,
) -> None:
    cell = result.cell
    cell_started = time.monotonic()
    hosts = island.hosts[: cell.hosts] if island is not None else None
    for trial in range(1, trials + 1):
        try:
            template = None if island is not None else templates.template_for(ref, timeout)
            # Built in each trial's host (forked from the template when there is one).
            make_adapter = AdapterBuilder(ref.spec, ref, dict(cell.options), template=template)
            with step_deadline(timeout, f"trial {trial} of {_label(cell)}"):
                outcome = race_once(make_adapter, cell.k, island=island, hosts=hosts, timeout=timeout)
        except (AdapterFailure, Exception) as error:
            known = isinstance(error, (CellError, AdapterFailure, TemplateGone))  # in the adapter's terms
            result.error = str(error) if known else f"{type(error).__name__}: {error}"
            _say(progress, f"{where} trial {trial}: cannot run: {result.error}")
            break
        templates.tell_fallback(template)
        result.trials.append(outcome)
        _say(
            progress,
            f"{where} trial {trial}/{trials}: "
            f"{outcome.fires} fires, {outcome.consumptions} consumptions ({outcome.seconds:.1f}s)",
        )
    result.seconds = time.monotonic() - cell_started


def _version(ref: AdapterRef, cells: list[Cell], timeout: float, templates: HostTemplates) -> str:
    """The version the adapter declares, read in a host process (adapter code never runs in
    the command's own)."""
    for cell in cells:
        try:
            template = templates.template_for(ref, timeout)
            return str(probe(AdapterBuilder(ref.spec, ref, dict(cell.options)), timeout, template).version)
        except (HostProblem, TemplateGone):
            continue
    return "?"


class _Placed:
    """An adapter whose concurrent deliveries are forked onto the island's hosts: built in the
    host process, which is the one that forks the racers (`hosts.placing` places the children
    of the process it runs in)."""

    def __init__(self, adapter, hosts: list[str]) -> None:
        self._adapter, self._hosts = adapter, hosts

    def resume_together(self, *args, **kwargs):
        with placing(self._hosts):
            return self._adapter.resume_together(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._adapter, name)


def race_once(
    make_adapter: Callable[[], object],
    k: int,
    *,
    island=None,
    hosts: list[str] | None = None,
    timeout: float | None = 120.0,
) -> Trial:
    """One trial: park the thread at the gated interrupt, then k racers resume it at once.

    The adapter runs in a host process, as under `fuzz` and `profile`, with `timeout` on
    every call: whatever it does (exits, blocks signals, hangs, forks a session of its own),
    the trial ends and the host's process group is killed. On an `island`, this process works
    from the store's host (it parks the thread and reads the outcome there), and racer i is
    forked onto `hosts[i % len(hosts)]`."""
    started = time.monotonic()
    workflow = Workflow.of(RACE_NODES)
    gated = workflow.consuming[-1]
    on_island = island is not None and hosts
    with contextlib.ExitStack() as stack:
        workdir = make_workdir()  # named after its owner: a killed race's is swept by the next run
        stack.callback(shutil.rmtree, workdir, ignore_errors=True)  # last out, on every path
        if on_island:
            stack.enter_context(island.entered(island.store))
        build = (lambda: _Placed(make_adapter(), list(hosts))) if on_island else make_adapter
        try:
            adapter = HostedAdapter(build, timeout, getattr(build, "template", None))
        except HostProblem as problem:
            raise CellError(f"the adapter could not be built: it {problem.reason}") from None
        stack.callback(adapter.stop)  # the host's whole process group, on every path
        try:
            sink = Sink.create(workdir / "sink.db")
            adapter.open(FuzzSetup(workflow, 2, workdir, FuzzNodes(workflow, sink)))
            _park(adapter, gated)
            values = [APPROVE] * k
            outcomes = checked_outcomes(
                adapter.resume_together(0, values, WINDOW, "race"), k, "resume-together"
            )
            head = checked_observation(adapter.observe()).threads[0].chain[-1]
            events = sink.events()
            adapter.close()
        except HostProblem as problem:
            raise CellError(f"the adapter {problem.reason}") from None
    where = [island.host_of(hosts[i % len(hosts)]) if on_island else LOCAL for i in range(k)]
    racers = tuple(
        _racer(i, v, o, events, gated, workflow, where[i]) for i, (v, o) in enumerate(zip(values, outcomes))
    )
    applied = sum(e.applied for e in events if e.kind == "fire" and e.stage == gated)
    recorded = head.app[workflow.stages[gated].node] if head.pc > gated else None
    return Trial(racers, applied, recorded, time.monotonic() - started)


def _park(adapter, gated: int) -> None:
    [outcome] = checked_outcomes([adapter.start(0, None, "start")], 1, "start")
    if outcome.status != OK:
        raise CellError(f"the start did not park the thread ({outcome.status}: {outcome.detail})")
    pc = checked_observation(adapter.observe()).threads[0].chain[-1].pc
    if pc != gated:
        raise CellError(f"the start left the thread at stage {pc}, not parked at the gated interrupt {gated}")


def _racer(index: int, value: int, outcome, events, gated: int, workflow: Workflow, host: str) -> Racer:
    op = f"race.{index}"
    mine = [e for e in events if e.op == op and e.stage == gated]
    fires = [e for e in mine if e.kind == "fire"]
    node = workflow.stages[gated].node
    acted_on = fires[0].app[node] if fires and fires[0].app is not None else None
    status = outcome.status if outcome.status in (OK, REFUSED, CRASHED) else str(outcome.status)
    return Racer(
        index,
        value,
        status,
        outcome.detail,
        any(e.kind == "execute" for e in mine),
        len(fires),
        acted_on,
        host,
    )


def _label(cell: Cell) -> str:
    where = f" hosts={cell.hosts}" if cell.network else ""
    return f"{cell.config} {cell.api}{where} k={cell.k} {'gated' if cell.gate else 'ungated'}"


def _say(progress, line: str) -> None:
    if progress is not None:
        progress(line)


# -- the table --------------------------------------------------------------------------------


def race_rows(report: RaceReport) -> list[list[str]]:
    rows = []
    for result in report.cells:
        cell = result.cell
        where = [cell.store, cell.config, cell.api, _hosts_column(cell), _gate_column(cell), str(cell.k)]
        if result.error is not None:
            rows.append([*where, "-", "-", "-", "-", "-", CANNOT_RUN, f"cannot run: {result.error}"])
            continue
        fires = ",".join(str(t.fires) for t in result.trials)
        consumptions = ",".join(str(t.consumptions) for t in result.trials)
        applied = ",".join(str(t.applied) for t in result.trials)
        served = ",".join(str(sum(r.status == OK for r in t.racers)) for t in result.trials)
        saturation = f"{result.saturation_mean:.2f} ± {result.saturation_stdev:.2f}"
        rows.append(
            [
                *where,
                fires,
                applied,
                consumptions,
                served,
                saturation,
                result.verdict,
                f"{result.seconds:.1f}s",
            ]
        )
    return rows


def _hosts_column(cell: Cell) -> str:
    """The number of network hosts the racers were spread over, or "local": every racer on the
    machine itself, the store over loopback (PostgreSQL) or a file (SQLite)."""
    return str(cell.hosts) if cell.network else LOCAL


def _gate_column(cell: Cell) -> str:
    """on / off for an adapter with a gate option; "-" for one without (its own claim, if any)."""
    if "gate" not in cell.options:
        return "-"
    return "on" if cell.gate else "off"


RACE_HEADERS = [
    "store",
    "config",
    "api",
    "hosts",
    "gate",
    "k",
    "fires",
    "applied",
    "consumptions",
    "served",
    "saturation",
    "verdict",
    "time",
]


def saturation_by_hosts(report: RaceReport) -> list[list[str]]:
    """Per store, API, host count and gate: the cells that ran, the mean saturation over their trials
    with the lowest and highest cell mean, and how many cells had exactly one consumption in
    every trial."""
    groups: dict[tuple, list[CellResult]] = {}
    for result in report.cells:
        if result.error is None and result.trials:
            cell = result.cell
            groups.setdefault((cell.store, cell.api, _hosts_column(cell), _gate_column(cell)), []).append(
                result
            )
    rows = []
    for (store, api, hosts, gate), results in groups.items():
        saturations = [s for r in results for s in r.saturations]
        means = [r.saturation_mean for r in results]
        once = sum(all(t.consumptions == 1 for t in r.trials) for r in results)
        ks = ",".join(str(k) for k in sorted({r.cell.k for r in results}))
        rows.append(
            [
                store,
                api,
                hosts,
                gate,
                ks,
                str(len(results)),
                f"{statistics.fmean(saturations):.2f}",
                f"{min(means):.2f}-{max(means):.2f}",
                f"{once}/{len(results)}",
            ]
        )
    return rows


SATURATION_HEADERS = [
    "store",
    "api",
    "hosts",
    "gate",
    "k",
    "cells",
    "saturation",
    "cell range",
    "one consumption",
]
