"""`check`'s terminal report: the verdict table and each counterexample as a step table."""

from __future__ import annotations

from pymc_resume.checking.check import CheckReport
from pymc_resume.cli.errors import MAX_NAME, printable
from pymc_resume.cli.tables import table
from pymc_resume.model.contract import CLAUSES


def verdict_table(report: CheckReport) -> str:
    simulated = report.result.mode == "simulate"
    states = f"{visited_states(report.result):,}"
    rows = []
    for clause in CLAUSES:
        verdict = report.verdicts[clause.id]
        detail = verdict.reason or ""
        if verdict.trace is not None:
            detail = trace_detail(len(verdict.trace) - 1, simulated)
        rows.append([clause.id, clause.kind, verdict.verdict, states, detail])
    return table(["id", "kind", "verdict", "states" + (" visited" if simulated else ""), "detail"], rows)


def visited_states(result) -> int:
    """The states column: distinct states, or, for a simulation, every state a walk visited."""
    return result.states_visited if result.mode == "simulate" else result.distinct_states


def trace_detail(steps: int, simulated: bool) -> str:
    if simulated:
        return f"trace: {steps} steps (a walk: not promised shortest)"
    return f"shortest trace: {steps} steps"


def store_line(result) -> str:
    """How the visited states were stored, and the chance that a fingerprint collision hid a
    state (as TLC prints it; there, two states with one fingerprint count as one)."""
    risk = result.collision_probability
    if risk is None:
        return "store: whole states (--exact): no collision possible"
    if risk == 0.0:
        return "store: 64-bit fingerprints, each the state's own key: no collision possible"
    return f"store: 64-bit fingerprints; probability that a collision hid a state: at most {risk:.1e}"


def simulation_line(result) -> str:
    """A simulation's counts, in one line."""
    return (
        f"{result.walks:,} walks of up to {result.max_depth} steps (seed {result.seed}), "
        f"{result.states_visited:,} states visited, {result.states_generated:,} generated, "
        f"longest walk {result.longest_walk} steps, {result.seconds:.1f}s, "
        f"{result.walks_per_second:,.1f} walks/s; {result.stopped_because}"
    )


def trace_text(
    clause_id: str, trace: tuple[dict, ...], reason: str | None = None, simulated: bool = False
) -> str:
    rows = []
    for row in trace:
        changes = row["changes"] or ["-"]
        rows.append([str(row["step"]), row["actor"], row["action"], changes[0]])
        rows.extend(["", "", "", more] for more in changes[1:])
    because = f": {reason}" if reason else ""
    walk = " (a walk's trace, not promised shortest)" if simulated else ""
    return f"{clause_id} violated{walk}{because}\n" + table(["step", "actor", "action", "store / sink"], rows)


def check_text(report: CheckReport) -> str:
    r = report.result
    simulated = r.mode == "simulate"
    title = "reference semantics" if report.mutant is None else f"mutant {report.mutant}"
    name = printable(repr(report.bounds.name), MAX_NAME)  # a checkpoint's manifest may hold any
    if simulated:
        headline = f"{title} at bounds {name}, simulated: {simulation_line(r)}"
    else:
        headline = (
            f"{title} at bounds {name}: {r.distinct_states:,} distinct states, "
            f"{r.states_generated:,} generated, depth {r.depth}, {r.seconds:.1f}s, "
            f"{report.workers} worker{'s' if report.workers > 1 else ''}"
            f"{' (Ray actors)' if report.engine == 'ray' else ''}"
            f"{'' if report.symmetry else ', no symmetry reduction'}"
            f"{'' if r.complete else ' (INCOMPLETE: ' + str(r.stopped_because) + ')'}"
        )
    lines = [headline, "", verdict_table(report)]
    if not simulated:
        lines.insert(1, store_line(r))
    for clause_id, verdict in report.verdicts.items():
        if verdict.trace is not None:
            lines += ["", trace_text(clause_id, verdict.trace, verdict.reason, simulated)]
    return "\n".join(lines)
