"""What CI costs: `.ci/run` on a clean clone of this repository's HEAD, timed.

    python bench/suite.py --json bench/results/suite.json

Clones HEAD into a temporary folder, runs `bash .ci/run` there (a fresh virtual environment,
the installs, ruff, mypy, then the README's test command), and records the wall time, the exit
code, pytest's summary line, its slowest steps (`--durations=25`, which .ci/run asks for) and
the tests that failed, if any.
The clone is removed afterwards; its output is kept in the JSON only as those lines.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import provenance
from pymc_resume.files import write_atomically

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = re.compile(r"^=*\s*(?P<line>(?:\d+ \w+(?:, )?)+ in (?P<seconds>[\d.]+)s.*?)\s*=*$")
DURATION = re.compile(r"^(?P<seconds>[\d.]+)s (?P<phase>setup|call|teardown)\s+(?P<test>\S.*)$")


def run_ci(clone: Path) -> tuple[int, float, list[str]]:
    """(exit code, wall seconds, output lines) of `.ci/run` in `clone`."""
    began = time.perf_counter()
    run = subprocess.run(["bash", ".ci/run"], cwd=clone, capture_output=True, text=True)
    return run.returncode, time.perf_counter() - began, (run.stdout + run.stderr).splitlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", dest="json_path", required=True)
    args = parser.parse_args(argv)
    started = provenance.started(argv)
    with tempfile.TemporaryDirectory(prefix="pymc-resume-bench-suite-") as folder:
        clone = Path(folder) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        code, seconds, lines = run_ci(clone)
    summary = next((m for m in map(SUMMARY.match, reversed(lines)) if m), None)
    slowest = [m.groupdict() for m in map(DURATION.match, lines) if m][:10]
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    document = {
        "bench": "suite",
        "provenance": provenance.finished(started, seconds),
        "exit_code": code,
        "ci_seconds": round(seconds, 1),
        "pytest_summary": summary.group("line") if summary else None,
        "pytest_seconds": float(summary.group("seconds")) if summary else None,
        "slowest": [{**d, "seconds": float(d["seconds"])} for d in slowest],
        "failed": [line[:300] for line in failed],
    }
    if code != 0 and not failed:  # (lint, install: the output's end says what)
        document["tail"] = lines[-20:]
    write_atomically(args.json_path, json.dumps(document, indent=2) + "\n")
    print(json.dumps({k: v for k, v in document.items() if k != "slowest"}, indent=2))
    return code


if __name__ == "__main__":
    sys.exit(main())
