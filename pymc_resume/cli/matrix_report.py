"""`matrix`'s terminal report: rows by ids, separating mutants per id, and a summary."""

from __future__ import annotations

from pymc_resume.checking.matrix import Cell, Matrix
from pymc_resume.cli.tables import table
from pymc_resume.model.contract import CLAUSE_IDS, CLAUSES
from pymc_resume.model.mutants import MUTANTS


def _split_header(cid: str) -> tuple[str, str]:
    """An id as two header lines, split at the hyphen that makes the wider line narrowest."""
    cuts = [i + 1 for i, ch in enumerate(cid) if ch == "-"]
    if not cuts:
        return cid, ""
    cut = min(cuts, key=lambda i: (max(i, len(cid) - i), i))
    return cid[:cut], cid[cut:]


def cell_text(cell: Cell, is_target: bool) -> str:
    text = cell.verdict if cell.trace_length is None else f"{cell.verdict} {cell.trace_length}"
    return text + ("*" if is_target else "")


def matrix_table(matrix: Matrix) -> str:
    """Rows by ids, with two-line id headers; `*` marks each mutant's target."""
    tops, bottoms = zip(*(_split_header(cid) for cid in CLAUSE_IDS))
    rows = [["", *bottoms, ""]]
    for name, row in matrix.rows.items():
        target = MUTANTS[name].target if name in MUTANTS else None
        cells = [cell_text(row.cells[cid], cid == target) for cid in CLAUSE_IDS]
        rows.append([name, *cells, f"{row.distinct_states:,}"])
    lines = table(["row", *tops, "states"], rows).split("\n")
    # table() puts its rule under the first line; the ids' second halves belong above it.
    return "\n".join([lines[0], lines[2], lines[1], *lines[3:]])


def matrix_text(matrix: Matrix, workers: int | None = None) -> str:
    """The table, the separating mutants per id, failures, and a closing summary."""
    separating = matrix.separating()
    width = max(len(cid) for cid in CLAUSE_IDS)
    lines = [
        f"fault matrix at bounds {matrix.bounds.name!r}"
        f"{'' if matrix.symmetry else ' (no symmetry reduction)'}: "
        f"{len(matrix.rows)} rows x {len(CLAUSE_IDS)} ids",
        "",
        matrix_table(matrix),
        "",
        "cells: holds, or violated N (N = steps in the shortest counterexample); * = the mutant's target",
        "",
        "separating mutants (violate the id, hold on the other eight):",
    ]
    for clause in CLAUSES:
        names = separating[clause.id]
        lines.append(f"  {clause.id:<{width}}  {', '.join(names) if names else 'NONE'}")
    missed = matrix.missed_targets()
    if missed:
        lines += ["", "mutants that do not violate their target: " + ", ".join(missed)]
    for name in matrix.out_of_reach():
        lines += ["", f"out of reach at these bounds (no {MUTANTS[name].needs} node): {name}"]
    lines.append("")
    breaks, unseparated = matrix.reference_breaks(), matrix.unseparated()
    if breaks:
        lines.append(f"FAILED: the reference does not hold on: {', '.join(breaks)}")
    if unseparated:
        lines.append(f"FAILED: no separating mutant for: {', '.join(unseparated)}")
    if matrix.ok:
        lines.append("OK: the reference holds on all nine ids and every id has a separating mutant")
    total = sum(row.distinct_states for row in matrix.rows.values())
    lines.append(f"{total:,} distinct states in all rows")
    run = f" with {workers} worker{'s' if workers != 1 else ''}" if workers else ""
    lines.append(f"took {matrix.seconds:.1f}s{run}")
    return "\n".join(lines)
