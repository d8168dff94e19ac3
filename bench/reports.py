"""What reading profiles from strangers costs: `report`, `diff` and `profile --baseline` on
generated inputs, and `report` on the largest inputs its limits let through.

Not part of the package or the test suite (docs/profile.md quotes its figures):

    python bench/reports.py                 # 1,000 + 1,000 generated inputs, then the sizes
    python bench/reports.py --inputs 200 --skip-sizes

1. Generated inputs, with the generators of `tests/report/test_untrusted_reports.py`: broken
   profile documents against `report`, `diff` (either side) and `profile --baseline`, then
   random mutations of a real profile against `report`, `diff` and `--baseline` (with bounds
   that do not exist, so that a baseline that passes stops there instead of profiling). Each
   runs in-process with the tests' deadline; the table counts the exit codes, the internal
   errors or tracebacks, and the hangs (a case still running after the deadline).
2. Sizes: `report` in a fresh process (wall time and peak RSS, `resource` of the child) on 8 MiB
   of real profiles (copies of `tests/report/profiles/langgraph-sqlite-sync.json`, indented as
   `profile --json` writes) and on crafted files just within the limits: repros of 1,000 tiny
   steps in every cell, stores of 64 threads with 256 inputs a step, a framework call of 50,000
   characters named by every step, 500,000 empty objects under an unknown key.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "report")]

import test_untrusted_reports as cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PROFILES = ROOT / "tests" / "report" / "profiles"


def generated(inputs: int, folder: Path) -> collections.Counter:
    """Outcome counts of `inputs` broken documents and `inputs` mutated ones."""
    counts: collections.Counter = collections.Counter()
    numbered = iter(range(10**9))
    bounded = settings(
        max_examples=inputs, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )

    def run(args: list[str], data: bytes, kind: str) -> None:
        case = folder / f"case-{next(numbered)}"
        case.mkdir(parents=True)
        (case / "p.json").write_bytes(data)
        try:
            counts[kind, f"exit {cases.run_cli(args, case).exit_code}"] += 1
        except cases.TookTooLong:
            counts[kind, "hang"] += 1
        except AssertionError as error:
            counts[kind, "internal error or traceback"] += 1
            print(f"{kind}: {args}: {str(error)[:300]}", file=sys.stderr)

    @bounded
    @given(data=cases.broken_documents(), command=st.sampled_from(sorted(cases.COMMANDS)))
    def broken(data, command):
        run(cases.COMMANDS[command], data, f"broken, {command}")

    mutated_commands = {
        "report": ["report", "p.json", "-o", "r.html"],
        "diff": ["diff", str(cases.OTHER), "p.json"],
        "baseline": ["profile", "reference", "--bounds", "no-such-bounds", "--baseline", "p.json"],
    }

    @bounded
    @given(data=cases.mutated_documents(), command=st.sampled_from(sorted(mutated_commands)))
    def mutated(data, command):
        run(mutated_commands[command], data, f"mutated, {command}")

    broken()
    mutated()
    return counts


def sized_inputs(folder: Path) -> dict[str, Path]:
    """The files of part 2 (see the module docstring)."""
    real = json.loads((PROFILES / "langgraph-sqlite-sync.json").read_text())
    rows = [{**real["profiles"][0], "config": f"c{i}"} for i in range(175)]
    valid = json.loads((PROFILES / "reference-no-claim.json").read_text())
    ids = list(valid["profiles"][0]["clauses"])

    def row(config: str, cell: dict, **extra) -> dict:
        return {
            "adapter": "x",
            "version": "1",
            "config": config,
            "clauses": dict.fromkeys(ids, cell),
            **extra,
        }

    tiny = {"verdict": "violated", "trace": [{"action": "a"}] * 1000}
    inputs = [{str(k): v for k in range(256)} for v in (1, 2)]
    stores = [
        [{"checkpoints": v, "pc": v, "stage": v, "run": "r" * 400, "inputs": inputs[v]}] * 64 for v in (0, 1)
    ]
    call = {"a": [{"name": "n", "call": "C" * 50_000}]}
    documents = {
        "8 MiB of real profiles (175 configurations)": ({**real, "profiles": rows}, 2),
        "repros of 1,000 tiny steps in every cell": (
            {"profiles": [row(f"c{i}", tiny) for i in range(55)]},
            None,
        ),
        "stores of 64 threads with 256 inputs a step": (
            {
                "profiles": [
                    row("c", {**tiny, "trace": tiny["trace"][:200], "observed": {"stores": stores * 3}})
                ]
            },
            None,
        ),
        "a 50,000-character call named by every step": (
            {"profiles": [row("c", {**tiny, "variants": ["a: n"] * 256}, variants=call)]},
            None,
        ),
        "500,000 empty objects under an unknown key": ({**valid, "pad": [{}] * 495_000}, None),
    }
    files = {}
    for i, (name, (document, indent)) in enumerate(documents.items()):
        files[name] = folder / f"sized-{i}.json"
        files[name].write_text(json.dumps(document, indent=indent, separators=None if indent else (",", ":")))
    return files


# `pymc-resume` run so that it says its own peak at exit: the high-water mark of its memory since
# its exec (VmHWM; ru_maxrss would count this big process's memory at the fork).
PEAK = (
    "import atexit, sys; atexit.register(lambda: print(next(line for line in open('/proc/self/status') "
    "if line.startswith('VmHWM')).split()[1], file=sys.stderr)); sys.argv[0] = 'pymc-resume'; "
    "from pymc_resume.cli import main; main()"
)


def measured(file: Path) -> tuple[int, float, float, int]:
    """(exit code, seconds, peak MiB, page bytes) of `pymc-resume report FILE` in a child."""
    page = file.with_suffix(".html")
    search = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", PEAK, "report", str(file), "-o", str(page)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": search},
    )
    seconds = time.monotonic() - start
    peak = int(run.stderr.split()[-1]) / 1024
    return run.returncode, seconds, peak, page.stat().st_size if page.exists() else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1000, help="generated inputs of each kind")
    parser.add_argument("--skip-sizes", action="store_true")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pymc-resume-bench-reports-") as temp:
        folder = Path(temp)
        start = time.monotonic()
        counts = generated(options.inputs, folder / "cases")
        print(f"{sum(counts.values()):,} generated inputs in {time.monotonic() - start:.0f} s:")
        for (kind, outcome), n in sorted(counts.items()):
            print(f"  {kind:<26} {outcome:<30} {n:>6,}")
        if options.skip_sizes:
            return
        print("report on the largest inputs the limits let through (exit, wall, peak RSS, page):")
        for name, file in sized_inputs(folder).items():
            code, seconds, peak, page = measured(file)
            size = file.stat().st_size / 2**20
            said = f"exit {code}, {seconds:4.1f} s, {peak:4.0f} MiB, page {page / 1e6:5.1f} MB"
            print(f"  {name:<46} {size:5.1f} MiB: {said}")


if __name__ == "__main__":
    main()
