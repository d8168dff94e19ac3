"""`pymc-resume profile ADAPTER | --all`: conformance profiles, one row per configuration."""

from __future__ import annotations

import signal
import sys
from collections import defaultdict
from pathlib import Path

import attrs
import click
from click.core import ParameterSource

from pymc_resume.cli import Terminated, main
from pymc_resume.cli.errors import fail, printable
from pymc_resume.cli.options import (
    MAX_STEPS,
    Seconds,
    adapter_option_flag,
    adapter_options,
    budget_flags,
    host_flags,
    jobs_or_cores,
    json_option,
)
from pymc_resume.cli.paths import writable_file, writable_folder
from pymc_resume.cli.tables import table
from pymc_resume.errors import AdapterError
from pymc_resume.files import write_atomically, write_json
from pymc_resume.model.bounds import BoundsError, load_bounds
from pymc_resume.model.contract import CLAUSE_IDS, HOLDS, NOT_APPLICABLE, SKIPPED, VIOLATED

CELL = {
    HOLDS: "holds",
    VIOLATED: "violated",
    NOT_APPLICABLE: "n/a",
    SKIPPED: "skipped",
    "unconfirmed": "unconfirmed",
}


@main.command("profile")
@click.argument("adapter", required=False)
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Profile every built-in framework (those installed) and every adapter that installed "
    "packages offer (entry points `pymc_resume.adapters`).",
)
@click.option(
    "--config",
    "only_configs",
    multiple=True,
    metavar="NAME",
    help="Only these configurations of the framework (e.g. sqlite/sync); repeatable.",
)
@click.option(
    "--examples",
    type=click.IntRange(min=0),
    default=25,
    show_default=True,
    help="Fuzzed examples per configuration after the targeted scenarios (0: scenarios only).",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1, max=MAX_STEPS),
    default=12,
    show_default=True,
    help="Most client steps per fuzzed example.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Hypothesis seed (deterministic runs).")
@click.option(
    "--bounds",
    "bounds_name",
    default="default",
    show_default=True,
    help="Bounds whose workflow, values and processes to use (name or TOML path).",
)
@click.option(
    "--repro-dir",
    type=click.Path(file_okay=False),
    default="pymc-resume-repros",
    show_default=True,
    help="Where repros of violations are written.",
)
@click.option(
    "--step-timeout",
    type=Seconds(low=0.1),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Stop an adapter that takes longer to build, open or run a step (a hang).",
)
@budget_flags
@json_option("the profiles", again=True)
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the table as Markdown to this path (atomically).",
)
@click.option(
    "--operations",
    "operations",
    is_flag=True,
    help="Print each configuration's operation table (contract operation -> the framework call "
    "its adapter declares); alone, without running anything else (exit 0); with --examples, "
    "before the profiles.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the HTML conformance report of the run to this path (as `pymc-resume report` "
    "does; with --baseline, the baseline's rows beside the run's).",
)
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="A profile JSON to compare the run with: exit 1 when a cell is worse than in it (held "
    "and is now violated or unconfirmed, or is newly skipped), 0 otherwise, however many cells "
    "are violated in both.",
)
@adapter_option_flag
@host_flags
@click.pass_context
def profile_command(
    context,
    adapter,
    every,
    only_configs,
    examples,
    steps,
    seed,
    bounds_name,
    repro_dir,
    step_timeout,
    max_seconds,
    shrink_seconds,
    no_shrink,
    json_path,
    markdown_path,
    operations,
    html_path,
    baseline_path,
    adapter_option_pairs,
    jobs,
    fresh_hosts,
):
    """The conformance profile of ADAPTER (a framework such as `langgraph`, a built-in adapter
    name, or module:Class), or of every framework with --all."""
    if every == (adapter is not None):
        fail("give either ADAPTER or --all")
    baseline = read_baseline(baseline_path)  # checked before anything else is done
    try:
        bounds = load_bounds(bounds_name)
    except BoundsError as error:
        fail(f"--bounds: {error}")
    runs, planned, skipped = plan_runs(adapter, every, only_configs, adapter_option_pairs, step_timeout)
    if baseline is not None:  # a baseline that shares no configuration with the run gates nothing
        from pymc_resume.report.changes import require_common_configuration

        require_common_configuration(baseline, planned, "this run")
    run = ProfileCommand(bounds, seed, examples, steps, max_seconds, shrink_seconds, no_shrink, json_path)
    writable_file(json_path, "--json")
    if operations:
        tables = operation_tables(runs, every, skipped, step_timeout)
        click.echo(operations_text(tables))
        if context.get_parameter_source("examples") is not ParameterSource.COMMANDLINE:
            if json_path:  # the tables alone: no battery, no fuzzing
                write_json(json_path, run.document([], skipped, tables, examples=0))
            return
        click.echo("")
    writable_folder(repro_dir, "--repro-dir")
    writable_file(markdown_path, "--markdown")
    writable_file(html_path, "--html")
    profiles = run.profile_each(
        runs, every, skipped, repro_dir, step_timeout, jobs_or_cores(jobs), fresh_hosts
    )
    finish(run, profiles, skipped, markdown_path, html_path, baseline, baseline_path)


def plan_runs(adapter, every: bool, only_configs, adapter_option_pairs, step_timeout) -> tuple:
    """(family, configuration) for each configuration to profile, (family name, configuration
    name) for each one asked for, installed or not, and the skipped entries so far (families
    not installed, with --all). A bad name or option is one line, exit 2, before anything runs."""
    from pymc_resume.bridge.hosting.registry import AdapterSpecError, all_families, family_of

    try:
        families, skipped = all_families() if every else ([family_of(adapter)], [])
    except (AdapterSpecError, AdapterError) as error:
        fail(str(error))
    runs, planned = [], []
    for family in families:
        configurations = [c for c in family.configurations if not only_configs or c.name in only_configs]
        planned += [(family.name, c.name) for c in configurations]
        if not family.installed():
            if not every:
                fail(f"{family.name} is not installed: {family.install}")
            reason = f"not installed (no module {family.requires})"
            skipped.append({"adapter": family.name, "reason": reason, "install": family.install})
            continue
        if not configurations:
            known = ", ".join(c.name for c in family.configurations)
            fail(f"--config: {family.name} has no configuration {', '.join(only_configs)} (known: {known})")
        runs += [
            (family, with_options(configuration, adapter_option_pairs, step_timeout))
            for configuration in configurations
        ]
    return runs, planned, skipped


@attrs.define
class ProfileCommand:
    """One `profile` command's run: its settings, and the profiles it made, written as they
    come (`--json`, atomically, at every finding)."""

    bounds: object
    seed: int
    examples: int
    steps: int
    max_seconds: float | None
    shrink_seconds: float | None
    no_shrink: bool
    json_path: str | None
    profiles: list = attrs.Factory(list)

    def document(self, profiles: list, skipped: list[dict], tables=None, examples: int | None = None) -> dict:
        """The JSON document of `profiles`, with the budget as documents say it."""
        asked = {"examples": self.examples if examples is None else examples, "steps": self.steps}
        asked |= {"max_seconds": self.max_seconds, "shrink_seconds": self.shrink_seconds}
        asked |= {"shrink": not self.no_shrink}
        return _document(self.bounds, self.seed, asked, profiles, skipped, tables)

    def profile_each(
        self, runs, every: bool, skipped: list[dict], repro_dir, step_timeout, jobs, fresh
    ) -> list:
        """Profile every configuration in turn, hosts from one set of templates; with --all, a
        configuration whose adapter cannot be built is a skipped entry. Returns the profiles."""
        from pymc_resume.bridge.fuzzing.budget import Budget, stop_on_signal
        from pymc_resume.bridge.hosting.registry import AdapterSpecError
        from pymc_resume.bridge.hosting.template import HostTemplates
        from pymc_resume.bridge.profile import run_profile

        budget = Budget(self.max_seconds, self.shrink_seconds)
        say = lambda message: click.echo(printable(message), err=True)
        templates = HostTemplates(say, enabled=not fresh)

        def publish(current) -> None:  # the profiles so far, the one running included
            if self.json_path:
                write_json(self.json_path, self.document([*self.profiles, current], skipped))

        with stop_on_signal(budget, signal.SIGTERM, Terminated), templates:
            for family, configuration in runs:
                entry = {"adapter": family.name, "config": configuration.name}
                if budget.spent():
                    skipped.append(
                        {**entry, "reason": f"not run: {budget.stopped_reason()}", "install": None}
                    )
                    continue
                try:
                    profile = run_profile(
                        family.name,
                        configuration,
                        self.bounds,
                        examples=self.examples,
                        steps=self.steps,
                        seed=self.seed,
                        repro_dir=repro_dir,
                        step_timeout=step_timeout,
                        shrink=not self.no_shrink,
                        progress=say,
                        budget=budget,
                        publish=publish,
                        jobs=jobs,
                        templates=templates,
                    )
                except (AdapterSpecError, AdapterError) as error:
                    if not every:
                        raise
                    skipped.append({**entry, "reason": str(error), "install": family.install})
                    continue
                self.profiles.append(profile)
        return self.profiles


def finish(
    run: ProfileCommand,
    profiles: list,
    skipped: list[dict],
    markdown_path,
    html_path,
    baseline,
    baseline_path,
):
    """Write the outputs, print the table, and exit: 2 for an adapter that failed, then the
    baseline's verdict when there is one, else 1 for any violated cell."""
    document = run.document(profiles, skipped)
    if run.json_path:
        write_json(run.json_path, document)
    if markdown_path:
        write_atomically(markdown_path, markdown_table(profiles, skipped) + "\n")
    click.echo(profile_text(profiles, skipped))
    if html_path:
        write_report(html_path, document, run.json_path, baseline)
    failed = [p for p in profiles if p.error]
    if failed:
        first = failed[0]
        raise AdapterError(
            f"adapter {first.configuration.adapter!r} ({first.family} {first.configuration.name}): "
            f"{first.error}"
        )
    if baseline is not None:
        sys.exit(compare_with_baseline(baseline, document, run.json_path, baseline_path))
    if any(p.violated for p in profiles):
        sys.exit(1)


def read_baseline(path: str | None):
    """The baseline profile document, read and checked before anything runs (exit 2 when it is
    not one, or has two profiles of one configuration)."""
    if path is None:
        return None
    from pymc_resume.report.changes import one_row_per_configuration
    from pymc_resume.report.profiles import read_document

    baseline = read_document(path)
    one_row_per_configuration(baseline)
    return baseline


def _run_name(json_path: str | None) -> str:
    return Path(json_path).name if json_path else "this run"


def write_report(path: str, document: dict, json_path: str | None, baseline) -> None:
    """The run's HTML report; with a baseline, its rows of the configurations run beside them."""
    import attrs

    from pymc_resume.report.page import render
    from pymc_resume.report.profiles import document_of

    run = document_of(document, _run_name(json_path))
    documents = [run]
    if baseline is not None:
        keys = {row.key for row in run.rows}
        documents.insert(0, attrs.evolve(baseline, rows=tuple(r for r in baseline.rows if r.key in keys)))
    write_atomically(path, render(documents))


def compare_with_baseline(baseline, document: dict, json_path: str | None, baseline_path: str) -> int:
    """Print the cells that changed from the baseline, worse first; the exit code: 1 when any
    is worse, 0 otherwise."""
    from pymc_resume.cli.diff import comparison_text
    from pymc_resume.report.changes import compare
    from pymc_resume.report.profiles import document_of

    comparison = compare(baseline, document_of(document, _run_name(json_path)))
    click.echo("")
    click.echo(comparison_text(comparison, baseline_path))
    return 1 if comparison.worse else 0


def operation_tables(runs, every: bool, skipped: list[dict], step_timeout) -> list[dict]:
    """Each configuration's operation table, read from an adapter built in a host process (as
    every profile builds it); one that cannot be built is a skipped entry with --all, else exit 2."""
    from pymc_resume.bridge.hosting.registry import AdapterSpecError, factory
    from pymc_resume.bridge.profile import operation_table, variant_table

    tables = []
    for family, configuration in runs:
        try:
            info = factory(configuration.adapter, configuration.options, timeout=step_timeout).info
            table_of = operation_table(info)
            variants = variant_table(info)
        except (AdapterSpecError, AdapterError, ValueError) as error:
            if not every:
                fail(f"adapter {configuration.adapter!r}: {error}")
            skipped.append(
                {
                    "adapter": family.name,
                    "config": configuration.name,
                    "reason": str(error),
                    "install": family.install,
                }
            )
            continue
        tables.append(
            {
                "adapter": family.name,
                "version": info.version,
                "config": configuration.name,
                "adapter_spec": configuration.adapter,
                "adapter_options": configuration.options,
                "operations": table_of,
                "variants": variants,
                "clauses": None,
            }
        )
    return tables


def operations_text(tables: list[dict]) -> str:
    """Per configuration: each contract operation, and for each of its variants (the documented
    calls the adapter performs it with) the framework call and where the framework documents it."""
    from pymc_resume.bridge.profile import NOT_APPLICABLE_CALL, NOT_DECLARED

    lines = []
    for entry in tables:
        calls = entry["operations"]
        rows = []
        for op, call in calls.items():
            variants = (entry.get("variants") or {}).get(op) or []
            if not variants:
                rows.append([op, "", call, ""])
            for variant in variants:
                intents = f" ({', '.join(variant['intents'])})" if variant.get("intents") else ""
                rows.append([op, variant["name"] + intents, variant["call"], variant["docs"]])
        lines += [
            f"{entry['adapter']} {entry['config']} ({entry['version']}): operations",
            table(["operation", "variant", "framework call", "docs"], rows),
        ]
        missing = [op for op, call in calls.items() if call == NOT_DECLARED]
        if missing:
            lines.append(f"  performed without naming its framework call: {', '.join(missing)}")
        expressed = [op for op, call in calls.items() if not call.startswith(NOT_APPLICABLE_CALL)]
        lines += [f"  not-applicable: {len(calls) - len(expressed)} of {len(calls)} operations", ""]
    return "\n".join(lines).rstrip()


def with_options(configuration, pairs, step_timeout: float | None = 60.0):
    """`configuration` with the `--adapter-option` pairs over its own options, checked against
    its adapter's constructor now, by building one in a host (one line, exit 2, before any
    configuration runs)."""
    import attrs

    from pymc_resume.bridge.hosting.registry import AdapterSpecError, factory

    if not pairs:
        return configuration
    options = adapter_options(pairs, configuration.options)
    try:
        factory(configuration.adapter, options, timeout=step_timeout)
    except AdapterSpecError as error:
        fail(f"--adapter-option: {error}")
    return attrs.evolve(configuration, options=options)


def _document(
    bounds, seed, budget: dict, profiles, skipped, operations_only: list[dict] | None = None
) -> dict:
    """The JSON document; with `operations_only`, each profile is a configuration's operation
    table alone (`"clauses": null`: nothing was judged). It says what ran it (the budget, the
    pymc-resume version), so that a comparison can say when two runs differ in more than code."""
    from pymc_resume import __version__

    return {
        "pymc_resume_version": __version__,
        "bounds": bounds.as_json(),
        "seed": seed,
        "examples": budget["examples"],
        "budget": budget,
        "profiles": operations_only if operations_only is not None else [p.as_json() for p in profiles],
        "skipped": skipped,
    }


def _row_name(profile) -> list[str]:
    return [profile.family, profile.version, profile.configuration.name]


def identical_line(profiles) -> str:
    """Which rows share every verdict, or that none do."""
    groups = defaultdict(list)
    for profile in profiles:
        groups[profile.signature()].append(f"{profile.family} {profile.configuration.name}")
    shared = [names for names in groups.values() if len(names) > 1]
    if not shared:
        return "identical profiles: none (no two rows share every verdict)"
    return "identical profiles: " + "; ".join(" = ".join(names) for names in shared)


def profile_text(profiles, skipped) -> str:
    """The table, then per configuration every cell's explanation as its JSON has it (reason,
    repro, replays, notes): the text says nothing the JSON does not."""
    rows = [_row_name(p) + [CELL[p.clauses[cid].verdict] for cid in CLAUSE_IDS] for p in profiles]
    lines = [table(["framework", "version", "config", *CLAUSE_IDS], rows), "", identical_line(profiles)]
    for entry in skipped:
        config = f" {entry['config']}" if entry.get("config") else ""
        install = f" ({entry['install']})" if entry.get("install") else ""
        lines.append(f"skipped: {entry['adapter']}{config}: {entry['reason']}{install}")
    unconfirmed = [(p, cid) for p in profiles for cid in p.unconfirmed]
    if unconfirmed:
        lines += [
            "",
            "unconfirmed (seen in a live run, never reproduced by a replay of its repro; "
            "not counted as violated):",
        ]
        lines += [
            f"  {p.family} {p.configuration.name} {cid}: {p.clauses[cid].repro}" for p, cid in unconfirmed
        ]
    for profile in profiles:
        lines += ["", *_profile_lines(profile.as_json())]
    return "\n".join(lines)


def _profile_lines(data: dict) -> list[str]:
    """One configuration's explanations, read from its profile JSON."""
    lines = [
        f"{data['adapter']} {data['config']} ({data['version']}): {data['scenarios']} targeted "
        f"scenarios, {data['examples']} fuzzed examples, {data['seconds']:.0f}s"
    ]
    if data["error"]:
        lines.append(f"  ERROR (verdicts incomplete): {data['error']}")
    if data["stopped"]:
        lines.append(f"  stopped early: {data['stopped']}; everything found until then is reported")
    for cid, cell in data["clauses"].items():
        lines.append(f"  {cid} {cell['verdict']}: {cell['reason']}")
        if cell["verdict"] in (VIOLATED, "unconfirmed"):
            lines.append(f"    repro ({cell['repro_steps']} steps): {cell['repro']}")
        lines += [f"    note: {note}" for note in cell["notes"]]
    lines += [f"  note: {note}" for note in data["notes"]]
    return lines


def markdown_table(profiles, skipped) -> str:
    def cell(result) -> str:
        if result.verdict in (VIOLATED, "unconfirmed") and result.repro:
            return f"{result.verdict} ([repro]({result.repro}))"
        return CELL[result.verdict]

    header = ["framework", "version", "config", *(f"`{cid}`" for cid in CLAUSE_IDS)]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for profile in profiles:
        cells = _row_name(profile) + [cell(profile.clauses[cid]) for cid in CLAUSE_IDS]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", identical_line(profiles)]
    unconfirmed = [(p, cid) for p in profiles for cid in p.unconfirmed]
    if unconfirmed:  # apart from the violations: seen once, never reproduced, never counted
        lines += [
            "",
            "Unconfirmed (seen in a live run, never reproduced by a replay of its repro; not counted "
            "as violated):",
            "",
        ]
        lines += [
            f"- {p.family} {p.configuration.name} `{cid}`: [repro]({p.clauses[cid].repro})"
            for p, cid in unconfirmed
        ]
    lines += [f"\nskipped: {e['adapter']}: {e['reason']} ({e.get('install') or ''})" for e in skipped]
    return "\n".join(lines)
