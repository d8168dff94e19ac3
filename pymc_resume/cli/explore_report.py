"""`explore`'s terminal report: a verdict per property and each violation as a step table."""

from __future__ import annotations

from pymc_resume.checking.explore_check import ExploreReport, PropertyVerdict
from pymc_resume.cli.check_report import simulation_line, store_line, trace_detail, visited_states
from pymc_resume.cli.tables import table


def verdict_table(report: ExploreReport) -> str:
    simulated = report.result.mode == "simulate"
    states = f"{visited_states(report.result):,}"
    rows = []
    for v in report.verdicts:
        detail = v.reason or ""
        if v.trace is not None and v.cycle_start is not None:
            lasso = f"{len(v.trace)} state{'s' if len(v.trace) > 1 else ''}"
            detail = f"lasso: {lasso}, cycle from step {v.cycle_start}"
        elif v.trace is not None:
            detail = trace_detail(len(v.trace) - 1, simulated)
        rows.append([v.name, v.kind, v.verdict, states, detail])  # (the run's states, every row)
    return table(
        ["property", "kind", "verdict", "states" + (" visited" if simulated else ""), "detail"], rows
    )


def trace_text(verdict: PropertyVerdict, simulated: bool = False) -> str:
    rows = []
    for row in verdict.trace:
        changed = row["changes"] or ["-"]
        step = str(row["step"])
        if row["step"] == verdict.cycle_start:
            step += " (cycle)"  # the cycle's first state
        rows.append([step, row["action"], changed[0]])
        rows.extend(["", "", more] for more in changed[1:])
    if verdict.cycle_start is not None:  # the last state loops back, as TLC's "Back to state"
        rows.append([f"back to {verdict.cycle_start}", verdict.loops_back or "", "-"])
    walk = " (a walk's trace, not promised shortest)" if simulated else ""
    return f"{verdict.name} violated{walk}: {verdict.reason}\n" + table(["step", "action", "changed"], rows)


def fault_text(rows) -> str:
    """The path to the state where the model raised (`trace_rows`), as a step table."""
    lines = []
    for row in rows:
        changed = row["changes"] or ["-"]
        lines.append([str(row["step"]), row["action"], changed[0]])
        lines.extend(["", "", more] for more in changed[1:])
    steps = len(rows) - 1
    head = f"the model raised in the last state of this path ({steps} step{'s' * (steps != 1)}):"
    return head + "\n" + table(["step", "action", "changed"], lines)


def explore_text(report: ExploreReport) -> str:
    r = report.result
    simulated = r.mode == "simulate"
    if simulated:
        headline = f"{report.target}, simulated: {simulation_line(r)}"
    else:
        headline = (
            f"{report.target}: {r.distinct_states:,} distinct states, {r.states_generated:,} "
            f"generated, depth {r.depth}, {r.seconds:.1f}s, {report.workers} "
            f"worker{'s' if report.workers > 1 else ''}"
            f"{' (Ray actors)' if report.engine == 'ray' else ''}"
            f"{'' if r.complete else ' (INCOMPLETE: ' + str(r.stopped_because) + ')'}"
        )
    lines = [
        headline,
        *([] if simulated else [store_line(r)]),
        "",
        verdict_table(report) if report.verdicts else "(the model has no property to check)",
    ]
    coverage = getattr(r, "coverage", None)
    if coverage is not None:
        lines += ["", coverage_text(coverage)]
    for verdict in report.verdicts:
        if verdict.trace is not None:
            lines += ["", trace_text(verdict, simulated)]
    return "\n".join(lines)


def coverage_text(rows) -> str:
    """Per action: the successors it generated and the new states it found (TLC's coverage)."""
    never = [action for action, taken, _new in rows if taken == 0]
    body = table(
        ["action", "taken", "new states"], [[action, f"{taken:,}", f"{new:,}"] for action, taken, new in rows]
    )
    tail = f"\nnever taken: {', '.join(never)}" if never else ""
    return (
        "coverage (taken: successors generated; new states: distinct states it found first)\n" + body + tail
    )
