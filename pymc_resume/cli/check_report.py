"""`check`'s terminal report: the verdict table and each counterexample as a step table."""

from __future__ import annotations

from pymc_resume.checking.check import CheckReport
from pymc_resume.cli.tables import table
from pymc_resume.model.contract import CLAUSES


def verdict_table(report: CheckReport) -> str:
    states = f"{report.result.distinct_states:,}"
    rows = []
    for clause in CLAUSES:
        verdict = report.verdicts[clause.id]
        detail = verdict.reason or ""
        if verdict.trace is not None:
            detail = f"shortest trace: {len(verdict.trace) - 1} steps"
        rows.append([clause.id, clause.kind, verdict.verdict, states, detail])
    return table(["id", "kind", "verdict", "states", "detail"], rows)


def trace_text(clause_id: str, trace: tuple[dict, ...], reason: str | None = None) -> str:
    rows = []
    for row in trace:
        changes = row["changes"] or ["-"]
        rows.append([str(row["step"]), row["actor"], row["action"], changes[0]])
        rows.extend(["", "", "", more] for more in changes[1:])
    because = f": {reason}" if reason else ""
    return f"{clause_id} violated{because}\n" + table(["step", "actor", "action", "store / sink"], rows)


def check_text(report: CheckReport) -> str:
    r = report.result
    title = "reference semantics" if report.mutant is None else f"mutant {report.mutant}"
    lines = [
        f"{title} at bounds {report.bounds.name!r}: {r.distinct_states:,} distinct states, "
        f"{r.states_generated:,} generated, depth {r.depth}, {r.seconds:.1f}s, "
        f"{report.workers} worker{'s' if report.workers > 1 else ''}"
        f"{'' if report.symmetry else ', no symmetry reduction'}"
        f"{'' if r.complete else ' (INCOMPLETE: ' + str(r.stopped_because) + ')'}",
        "",
        verdict_table(report),
    ]
    for clause_id, verdict in report.verdicts.items():
        if verdict.trace is not None:
            lines += ["", trace_text(clause_id, verdict.trace, verdict.reason)]
    return "\n".join(lines)
