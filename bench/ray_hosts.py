"""The Ray engine across network hosts: the same runs on one host and on two Ray nodes in separate
network namespaces of this machine (`bench/ray_island.py`), counts and verdicts side by side.

    python bench/ray_hosts.py --json bench/results/ray_hosts.json    # root; a few minutes

Runs, each a fresh `pymc-resume` command, on 2 partitions: packed TwoPhase with N resource
managers (`--n`, default 8: 2^8 + 4^8 + 6^8 = 1,745,408 states) through `explore`, and the
reference semantics at `--bounds` (default `default`) through `check`; each once on one host
(`--workers 2`, the multiprocess engine) and once on the island (`--engine ray --address`, one
partition's actor on each node, every batch crossing between network stacks over TCP).
Reported per run: the counts, the verdicts, wall seconds; `same` says whether the island's counts
and verdicts equal the single host's. Both nodes share this machine's two cores, so the seconds
say what the network and Ray's object store cost, not what a cluster would gain.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import provenance
from bench.ray_island import RayIsland
from pymc_resume.files import write_atomically

ROOT = Path(__file__).resolve().parents[1]
# The model as `explore` loads it (a file naming a factory); the bench's package on PYTHONPATH.
TARGET = (
    "from bench.two_phase_packed import TwoPhasePacked\n\n\ndef model():\n    return TwoPhasePacked({n})\n"
)
HOW_IT_RAN = ("engine", "seconds", "peak_rss_mib", "worker_peak_rss_mib", "elapsed_seconds")


def _found(path: Path) -> dict:
    """What a run's --json says it found, without how it ran."""
    document = json.loads(path.read_text())
    return {key: value for key, value in document.items() if key not in HOW_IT_RAN}


def _timed(run, argv: list[str], out: Path) -> dict:
    began = time.perf_counter()
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "pymc_resume", *argv, "--quiet", "--json", str(out)]
    done = run(argv, env=environment, stdout=subprocess.DEVNULL)
    seconds = round(time.perf_counter() - began, 1)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}")
    return {"seconds": seconds, "found": _found(out)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8, help="TwoPhase's resource managers (default 8)")
    parser.add_argument("--bounds", default="default", help="check's bounds (default: default)")
    parser.add_argument("--json", help="write the runs here (atomically)")
    args = parser.parse_args()
    began, started = time.perf_counter(), provenance.started()
    with tempfile.TemporaryDirectory(prefix="pmr-rayhosts-") as scratch:
        folder = Path(scratch)
        target = folder / "two_phase_target.py"
        target.write_text(TARGET.format(n=args.n))
        runs = {
            f"twophase-{args.n}": ["explore", f"{target}:model", "--workers", "2"],
            f"check-{args.bounds}": ["check", "--bounds", args.bounds, "--workers", "2"],
        }
        found = {}
        with RayIsland(nodes=2) as island:
            for name, argv in runs.items():
                print(f"{name}: one host ...", file=sys.stderr, flush=True)
                alone = _timed(subprocess.run, argv, folder / f"{name}-alone.json")
                print(f"{name}: two Ray nodes on two network hosts ...", file=sys.stderr, flush=True)
                ray = ["--engine", "ray", "--address", island.address]
                hosts = _timed(island.run, [*argv, *ray], folder / f"{name}-hosts.json")
                found[name] = {
                    "one_host": alone,
                    "two_hosts": hosts,
                    "same": alone["found"] == hosts["found"],
                }
    for name, pair in found.items():
        states = pair["one_host"]["found"]["distinct_states"]
        print(
            f"{name}: {states:,} states; one host {pair['one_host']['seconds']} s, "
            f"two hosts {pair['two_hosts']['seconds']} s; same counts and verdicts: {pair['same']}"
        )
    if args.json:
        document = {
            "bench": "ray_hosts",
            "provenance": provenance.finished(started, time.perf_counter() - began),
            "runs": found,
        }
        write_atomically(args.json, json.dumps(document, indent=2))
    return 0 if all(pair["same"] for pair in found.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
