"""docs/measurements.md is what bench/measurements.py writes from bench/results/: a figure on
the page always has its bench JSON, command, commit and machine state behind it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_measurements_page_is_generated_from_the_bench_results():
    run = subprocess.run(
        [sys.executable, "bench/measurements.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
