"""`explore`'s terminal report: a verdict per property and each violation as a step table."""

from __future__ import annotations

from pymc_resume.checking.explore_check import ExploreReport, PropertyVerdict
from pymc_resume.cli.tables import table


def verdict_table(report: ExploreReport) -> str:
    states = f"{report.result.distinct_states:,}"
    rows = []
    for v in report.verdicts:
        detail = v.reason or ""
        if v.trace is not None:
            detail = f"shortest trace: {len(v.trace) - 1} steps"
        rows.append([v.name, v.kind, v.verdict, states, detail])
    return table(["property", "kind", "verdict", "states", "detail"], rows)


def trace_text(verdict: PropertyVerdict) -> str:
    rows = []
    for row in verdict.trace:
        changed = row["changes"] or ["-"]
        rows.append([str(row["step"]), row["action"], changed[0]])
        rows.extend(["", "", more] for more in changed[1:])
    return (f"{verdict.name} violated: {verdict.reason}\n"
            + table(["step", "action", "changed"], rows))


def explore_text(report: ExploreReport) -> str:
    r = report.result
    lines = [
        f"{report.target}: {r.distinct_states:,} distinct states, {r.states_generated:,} "
        f"generated, depth {r.depth}, {r.seconds:.1f}s, {report.workers} "
        f"worker{'s' if report.workers > 1 else ''}"
        f"{'' if r.complete else ' (INCOMPLETE: ' + str(r.stopped_because) + ')'}",
        "",
        verdict_table(report) if report.verdicts else "(the model has no property to check)",
    ]
    for verdict in report.verdicts:
        if verdict.trace is not None:
            lines += ["", trace_text(verdict)]
    return "\n".join(lines)
