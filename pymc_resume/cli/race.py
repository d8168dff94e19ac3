"""`pymc-resume race ADAPTER`: k real processes resume one parked interrupt at once; the
saturation table says how many of them fired the gated effect."""

from __future__ import annotations

import sys

import click

from pymc_resume.cli import main
from pymc_resume.cli.errors import fail, printable
from pymc_resume.cli.options import Seconds, fresh_hosts_flag, json_option
from pymc_resume.cli.tables import table
from pymc_resume.files import write_json

GATE_CHOICES = {"off": [False], "on": [True], "both": [False, True]}


def _list(text: str | None, what: str, convert=str) -> list | None:
    if text is None:
        return None
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        fail(f"{what}: give at least one value")
    if not all(items):
        fail(f"{what}: {text[:80]!r} has an empty entry")
    try:
        return [convert(item) for item in items]
    except ValueError:
        fail(f"{what}: {text!r} is not a comma-separated list of numbers")


def _postgres_url(url: str | None) -> str | None:
    """A libpq URL (postgresql:// or postgres://), else one line, exit 2."""
    if url is not None and not url.startswith(("postgresql://", "postgres://")):
        fail(f"--postgres-url: {url[:80]!r} is not a postgresql:// URL")
    return url


@main.command("race")
@click.argument("adapter")
@click.option(
    "--store",
    default=None,
    metavar="sqlite|postgres[,...]",
    help="Stores to race on  [default: the adapter's own, sqlite for langgraph].",
)
@click.option(
    "--k",
    "ks",
    default="2,4,8,16",
    show_default=True,
    metavar="K[,K...]",
    help="Numbers of concurrent racers (each at least 2).",
)
@click.option("--trials", type=click.IntRange(min=1), default=3, show_default=True, help="Races per cell.")
@click.option(
    "--gate",
    type=click.Choice(list(GATE_CHOICES)),
    default=None,
    is_flag=False,
    flag_value="on",
    help="`--gate`: gated cells only; `--gate=both`: ungated and gated side by side; "
    "`--gate=off`: ungated only  [default: the adapter's own setting, off for langgraph].",
)
@click.option(
    "--durability",
    default=None,
    metavar="MODE[,MODE...]",
    help="Durability modes (sync, async, exit)  [default: every mode the adapter has].",
)
@click.option(
    "--api",
    "apis",
    default=None,
    metavar="invoke|ainvoke[,...]",
    help="How the racers run the graph: `invoke`, `ainvoke` (an async graph on the store's "
    "async saver, gated through `aresume`), or both  [default: invoke].",
)
@click.option(
    "--hosts",
    "hosts",
    default=None,
    metavar="N[,N...]",
    help="Spread the racers of the PostgreSQL cells over N network hosts (network namespaces "
    "this run creates, root only), the store a throwaway PostgreSQL server on the "
    "namespaces' private network; SQLite cells stay on one host  [default: every racer "
    "on this machine, the store over loopback].",
)
@click.option(
    "--postgres-url",
    default=None,
    metavar="URL",
    callback=lambda _ctx, _param, url: _postgres_url(url),
    help="The PostgreSQL server  [default: $PYMC_RESUME_POSTGRES_URL or "
    "postgresql://postgres@127.0.0.1:5432/test].",
)
@click.option(
    "--timeout",
    type=Seconds(low=1.0),
    default=120.0,
    show_default=True,
    metavar="SECONDS",
    help="Stop a trial that takes longer (a hang): its cell cannot run.",
)
@fresh_hosts_flag
@json_option()
def race_command(
    adapter, store, ks, trials, gate, durability, apis, hosts, postgres_url, timeout, fresh_hosts, json_path
):
    """Race k processes resuming one parked interrupt of ADAPTER (`langgraph`, `reference`, or
    module:Class); exit 1 when any cell consumed it more than once."""
    from pymc_resume.bridge.hosting.registry import AdapterSpecError
    from pymc_resume.bridge.race.race import RaceInputError, plan_cells, run_race

    k_values = _list(ks, "--k", int)
    try:
        cells = plan_cells(
            adapter,
            k_values,
            _list(store, "--store"),
            _list(durability, "--durability"),
            GATE_CHOICES[gate] if gate else None,
            _list(hosts, "--hosts", int),
            _list(apis, "--api"),
            timeout=timeout,
        )
    except (AdapterSpecError, RaceInputError) as error:
        fail(str(error))
    progress = lambda line: click.echo(f"race: {printable(line)}", err=True)  # may quote an adapter
    from pymc_resume.bridge.hosting.template import HostTemplates

    with HostTemplates(progress, enabled=not fresh_hosts) as templates:
        options = {"timeout": timeout, "postgres": postgres_url, "progress": progress}
        report = run_race(adapter, cells, trials, templates=templates, **options)
    if json_path:
        write_json(json_path, report.as_json())
    click.echo(race_text(report, trials))
    if report.violated:
        sys.exit(1)
    if report.unrunnable:
        first = report.unrunnable[0]
        fail(
            f"{len(report.unrunnable)} of {len(report.cells)} cells could not run "
            f"({first.cell.config} k={first.cell.k}: {first.error})"
        )


def race_text(report, trials: int) -> str:
    from pymc_resume.bridge.race.race import (
        RACE_HEADERS,
        RACE_NODES,
        SATURATION_HEADERS,
        race_rows,
        saturation_by_hosts,
    )

    lines = [
        f"race {report.adapter!r} ({report.version}): workflow {list(RACE_NODES)}, k racers resume the "
        f"parked gated interrupt at once (after-load barrier), {trials} trial{'s' if trials > 1 else ''} "
        f"per cell, {report.seconds:.1f}s",
        "saturation = (fires - 1) / (k - 1), mean ± spread (population stdev) over trials; per trial: fires "
        "(gated effect sent), applied (after the sink's key dedupe), consumptions (racers whose node ran), "
        "served (racers told ok)",
        "",
        table(RACE_HEADERS, race_rows(report)),
    ]
    by_hosts = saturation_by_hosts(report)
    if by_hosts:
        lines += [
            "",
            'saturation per host count (hosts "local": every racer on this machine, the store over '
            "loopback or a file; SQLite is a file, so it races on one host only):",
            "",
            table(SATURATION_HEADERS, by_hosts),
        ]
    return "\n".join(lines)
