"""Fuzzing benchmark: how fast `pymc-resume fuzz` finds every fault of the reference runtime.

    python bench/fuzz.py --json f.json                         # every fault, seeds 1-3
    python bench/fuzz.py --faults no-claim stuck-claim --seeds 1 --json some.json

For every fault of the reference runtime's catalogue (`runtime.RUNTIME_FAULTS`, the model's
mutant names) and every seed, the script runs

    pymc-resume fuzz reference --fault F --seed S --max-seconds M --json OUT

in a fresh process (one at a time: the machine may be shared), reads OUT as `fuzz` rewrites it
at every finding, and stops the run (SIGTERM) once the fault's target clause has its repro:
the time the fuzzer would spend looking for other clauses is not part of this benchmark.
Reported per run:

  found               whether the fault's target clause (`Mutant.target`) was violated
  examples            examples generated until the target was first violated
  seconds             seconds until then (`first_failure`)
  repro_steps         client steps in the target's repro after shrinking
  shrink_seconds      seconds from the first failure until its repro was written: shrinking,
                      confirming and writing it (every replay is a full run of real processes)
  violated            every id the run found violated
  exit_code           the run's: 143 when stopped (SIGTERM) once the target had its repro, else 1 when
                      anything was violated and 0 when nothing was

and per fault, over its seeds: found in how many, the median seconds and examples to first
failure and the median repro length. The script exits 1 if some fault was not found in some
seed (after writing the JSON), else 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pymc_resume.files import write_atomically
from pymc_resume.model.mutants import MUTANTS
from pymc_resume.runtime import RUNTIME_FAULTS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import provenance


def run_one(fault: str, seed: int, max_seconds: float, workdir: Path) -> dict:
    """One fuzz run of the reference runtime with `fault`, as the CLI reports it."""
    out = workdir / f"{fault}-{seed}.json"
    command = [
        sys.executable,
        "-m",
        "pymc_resume",
        "fuzz",
        "reference",
        "--fault",
        fault,
        "--seed",
        str(seed),
        "--max-seconds",
        str(max_seconds),
        "--json",
        str(out),
        "--repro-dir",
        str(workdir / f"repros-{fault}-{seed}"),
    ]
    target = MUTANTS[fault].target
    started = time.perf_counter()
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=workdir)
    report, repro_at = None, None
    while run.poll() is None:
        time.sleep(0.5)
        report = _read(out)
        cell = (report or {}).get("clauses", {}).get(target, {})
        if cell.get("verdict") == "violated" and cell.get("repro_steps"):
            repro_at = time.perf_counter() - started
            run.send_signal(signal.SIGTERM)  # the target has its repro: stop looking further
            break
    stderr = run.communicate()[1]
    wall = time.perf_counter() - started
    report = _read(out) or report
    row = {
        "fault": fault,
        "seed": seed,
        "target": target,
        "exit_code": run.returncode,
        "wall_seconds": round(wall, 1),
    }
    if report is None:
        return {**row, "found": False, "error": stderr.strip().splitlines()[-1:] or ["no output"]}
    clauses = report["clauses"]
    violated = [cid for cid, cell in clauses.items() if cell["verdict"] == "violated"]
    cell = clauses.get(target, {})
    first = cell.get("first_failure")
    found = cell.get("verdict") == "violated"
    row.update(found=found, violated=violated)
    if found and first is not None:
        # Seconds in the run's own clock; the repro's time in ours, less the start-up.
        startup = wall - report.get("seconds", wall) if repro_at is None else 0.0
        written = repro_at if repro_at is not None else report.get("seconds", wall) + startup
        row.update(
            examples=first["examples"],
            seconds=first["seconds"],
            repro_steps=cell.get("repro_steps"),
            shrink_seconds=round(max(0.0, written - first["seconds"]), 1),
            repro=cell.get("trace"),
        )
    return row


def _read(path: Path) -> dict | None:
    """The run's JSON as last published (atomically), or None before the first write."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def summary(rows: list[dict]) -> dict:
    """Per fault: in how many seeds it was found, medians over the seeds that found it."""
    by_fault: dict[str, list[dict]] = {}
    for row in rows:
        by_fault.setdefault(row["fault"], []).append(row)
    result = {}
    for fault, runs in by_fault.items():
        found = [r for r in runs if r["found"] and "seconds" in r]
        result[fault] = {
            "target": MUTANTS[fault].target,
            "found_in": f"{len(found)}/{len(runs)}",
            "median_seconds": statistics.median(r["seconds"] for r in found) if found else None,
            "median_examples": statistics.median(r["examples"] for r in found) if found else None,
            "median_repro_steps": statistics.median(r["repro_steps"] for r in found) if found else None,
            "median_shrink_seconds": statistics.median(r["shrink_seconds"] for r in found) if found else None,
        }
    return result


def table(result: dict) -> str:
    lines = [
        f"{'fault':<32} {'target':<26} {'found':>5} {'s to 1st':>9} {'examples':>8} "
        f"{'repro':>5} {'shrink s':>8}"
    ]
    for fault, cell in result.items():

        def show(value, spec):
            return "-" if value is None else format(value, spec)

        lines.append(
            f"{fault:<32} {cell['target']:<26} {cell['found_in']:>5} "
            f"{show(cell['median_seconds'], '9.1f')} {show(cell['median_examples'], '8.0f')} "
            f"{show(cell['median_repro_steps'], '5.0f')} {show(cell['median_shrink_seconds'], '8.1f')}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--faults",
        nargs="*",
        default=sorted(RUNTIME_FAULTS),
        help="faults to run (default: the whole catalogue)",
    )
    parser.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    parser.add_argument("--max-seconds", type=float, default=60.0, help="per run (default 60)")
    parser.add_argument("--json", help="write the rows and the summary here")
    args = parser.parse_args()
    rows = []
    began, started = time.perf_counter(), provenance.started()
    with tempfile.TemporaryDirectory(prefix="pymc-resume-bench-fuzz-") as folder:
        for fault in args.faults:
            for seed in args.seeds:
                row = run_one(fault, seed, args.max_seconds, Path(folder))
                rows.append(row)
                shown = (
                    f"{row['seconds']:.1f}s, {row['examples']} examples, {row['repro_steps']} steps"
                    if "seconds" in row
                    else "NOT FOUND"
                )
                print(f"{fault} seed {seed}: {shown}", file=sys.stderr, flush=True)
    result = summary(rows)
    print(table(result))
    if args.json:
        document = {
            "bench": "fuzz",
            "provenance": provenance.finished(started, time.perf_counter() - began),
            "max_seconds": args.max_seconds,
            "seeds": args.seeds,
            "faults": result,
            "runs": rows,
        }
        write_atomically(Path(args.json), json.dumps(document, indent=2) + "\n")
    return 0 if all(row["found"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
