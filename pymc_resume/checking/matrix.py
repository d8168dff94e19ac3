"""The fault matrix: the reference semantics and every mutant, checked exhaustively, by the nine ids.

A row is one exhaustive exploration (the reference, or the reference with one mutant's faults
switched on); a cell is the verdict on one contract id, with the length of the shortest
counterexample when it is violated. A mutant *separates* an id when it violates that id and
holds on the other eight. The matrix passes when the reference holds everywhere and every id
has at least one separating mutant: then each clause names a fault no other clause catches.

Rows are independent explorations, so `workers` > 1 checks that many rows at once in separate
processes, each row explored by one process. Everything in a `Matrix` except its timings is a
function of the bounds and the catalogue alone: the same for any number of workers.

This module is pure apart from calling the explorer: no printing, no files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import attrs

from pymc_resume.checking.check import judge
from pymc_resume.explore import ExplorationResult, explore
from pymc_resume.model.bounds import Bounds
from pymc_resume.model.contract import CLAUSE_IDS, HOLDS, VIOLATED
from pymc_resume.model.mutants import MUTANTS
from pymc_resume.model.semantics import ResumeModel

REFERENCE = "reference"

# row name -> the explorer's progress callback for that row (or None). With workers > 1 it is
# called (and its result used) in the worker process, so it must be picklable.
RowProgress = Callable[[str], Callable | None]


@attrs.frozen
class Cell:
    verdict: str  # holds, violated, or skipped (an incomplete exploration)
    trace_length: int | None = None  # actions in the shortest counterexample (violated only)

    def as_json(self) -> dict:
        return {"verdict": self.verdict, "trace_length": self.trace_length}


@attrs.frozen
class Row:
    name: str  # REFERENCE or a mutant id
    cells: dict[str, Cell]  # by contract id, in contract order
    distinct_states: int
    seconds: float
    complete: bool

    @property
    def violated(self) -> tuple[str, ...]:
        return tuple(cid for cid, cell in self.cells.items() if cell.verdict == VIOLATED)

    @property
    def separates(self) -> str | None:
        """The one id this row violates while holding on every other, if there is one."""
        holds = [cid for cid, cell in self.cells.items() if cell.verdict == HOLDS]
        if len(self.violated) == 1 and len(holds) == len(self.cells) - 1:
            return self.violated[0]
        return None


@attrs.frozen
class Matrix:
    bounds: Bounds
    symmetry: bool
    rows: dict[str, Row]  # the reference first, then the mutants in catalogue order
    seconds: float  # wall clock for the whole matrix

    @property
    def mutant_rows(self) -> list[Row]:
        return [row for name, row in self.rows.items() if name != REFERENCE]

    def separating(self) -> dict[str, list[str]]:
        """For every id, the mutants that violate it and hold on the other eight."""
        found: dict[str, list[str]] = {cid: [] for cid in CLAUSE_IDS}
        for row in self.mutant_rows:
            if row.separates is not None:
                found[row.separates].append(row.name)
        return found

    def reference_breaks(self) -> list[str]:
        """The ids on which the reference does not hold (violated, or unproved)."""
        reference = self.rows.get(REFERENCE)
        if reference is None:
            return list(CLAUSE_IDS)
        return [cid for cid, cell in reference.cells.items() if cell.verdict != HOLDS]

    def unseparated(self) -> list[str]:
        return [cid for cid, names in self.separating().items() if not names]

    def missed_targets(self) -> list[str]:
        """Mutants that do not violate the clause they are meant to break, though the bounds
        reach their fault."""
        return [
            row.name
            for row in self.mutant_rows
            if row.cells[MUTANTS[row.name].target].verdict != VIOLATED
            and MUTANTS[row.name].reachable_at(self.bounds.nodes)
        ]

    def out_of_reach(self) -> list[str]:
        """Mutants whose fault acts on a node kind these bounds do not have."""
        return [row.name for row in self.mutant_rows if not MUTANTS[row.name].reachable_at(self.bounds.nodes)]

    @property
    def ok(self) -> bool:
        return not self.reference_breaks() and not self.unseparated()

    def as_json(self) -> dict:
        """The matrix as JSON; only `seconds` and `total_seconds` vary between runs."""
        return {
            "bounds": self.bounds.as_json(),
            "symmetry": self.symmetry,
            "ids": list(CLAUSE_IDS),
            "rows": {
                name: {cid: cell.as_json() for cid, cell in row.cells.items()}
                for name, row in self.rows.items()
            },
            "separating": self.separating(),
            "distinct_states": {name: row.distinct_states for name, row in self.rows.items()},
            "mutants": {
                row.name: {
                    "target": MUTANTS[row.name].target,
                    "fault": MUTANTS[row.name].fault,
                    "mirrors": MUTANTS[row.name].mirrors,
                    "violates": list(row.violated),
                }
                for row in self.mutant_rows
            },
            "reference_holds": not self.reference_breaks(),
            "unseparated": self.unseparated(),
            "ok": self.ok,
            "seconds": {name: round(row.seconds, 3) for name, row in self.rows.items()},
            "total_seconds": round(self.seconds, 3),
        }


def check_row(bounds: Bounds, name: str, *, symmetry: bool = True, progress: Callable | None = None) -> Row:
    """Explore one row exhaustively and judge the nine ids."""
    model = ResumeModel(bounds, None if name == REFERENCE else name)
    result = explore(model, canonical=model.canonical if symmetry else None, progress=progress)
    return row_of(name, model, result)


def row_of(name: str, model: ResumeModel, result: ExplorationResult) -> Row:
    """The row of one finished exploration of `model`: the nine ids judged on `result`."""
    cells = {}
    for cid, verdict in judge(model, result).items():
        length = len(verdict.trace) - 1 if verdict.trace is not None else None
        cells[cid] = Cell(verdict.verdict, length)
    return Row(name, cells, result.distinct_states, result.seconds, result.complete)


def _check_row_task(task: tuple) -> Row:
    bounds, name, symmetry, row_progress = task
    progress = row_progress(name) if row_progress is not None else None
    return check_row(bounds, name, symmetry=symmetry, progress=progress)


def row_names(mutants: Sequence[str] | None = None) -> list[str]:
    """The reference, then the given mutants (default: the whole catalogue, in its order)."""
    names = list(MUTANTS) if mutants is None else list(mutants)
    for name in names:
        if name not in MUTANTS:
            raise KeyError(name)
    return [REFERENCE, *names]


def compute_matrix(
    bounds: Bounds,
    *,
    mutants: Sequence[str] | None = None,
    workers: int = 1,
    symmetry: bool = True,
    row_progress: RowProgress | None = None,
    on_row: Callable[[Row, int, int], None] | None = None,
) -> Matrix:
    """Check the reference and each mutant; `on_row(row, done, total)` as each row finishes.

    With `workers` > 1, up to that many rows are explored at once in worker processes; the
    rows are put back in catalogue order, so the result does not depend on `workers`.
    """
    if workers < 1:
        raise ValueError("workers must be at least 1")
    started = time.monotonic()
    names = row_names(mutants)
    tasks = [(bounds, name, symmetry, row_progress) for name in names]
    done: dict[str, Row] = {}

    def finished(row: Row) -> None:
        done[row.name] = row
        if on_row is not None:
            on_row(row, len(done), len(names))

    if workers == 1 or len(names) == 1:
        for task in tasks:
            finished(_check_row_task(task))
    else:
        import multiprocess

        with multiprocess.Pool(min(workers, len(names))) as pool:
            for row in pool.imap_unordered(_check_row_task, tasks, chunksize=1):
                finished(row)
    rows = {name: done[name] for name in names}
    return Matrix(bounds, symmetry, rows, time.monotonic() - started)
