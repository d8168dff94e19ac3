"""What deciding temporal properties costs: the graph pass on EWD840, by store and by where edges live.

    python bench/liveness.py --json live.json            # EWD840 N=7 (172,286 states), ~1 minute
    python bench/liveness.py --n 8 --json live8.json     # N=8 (about 1.2 million states)

The temporal pass (`pymc_resume/explore/properties/liveness.py`) enumerates the graph again after the safety
search. This script runs that pass alone, on tlaplus/Examples' EWD840 (`examples/ewd840.py`, its
`Liveness` under `WF_vars(System)`, which holds, so every state and edge is looked at), in three
configurations, each in a fresh child process so that its memory is its own:

  fingerprints  the default: states by 64-bit fingerprint, edges in memory up to
                `adjacency.IN_MEMORY` (4 million) and on disk beyond it
  exact         `--exact`: states kept whole in a dict
  in-memory     fingerprints, with every edge kept in memory (what the disk saves, and costs)

Reported per run: `states` and `edges` of the graph, `seconds` and `cpu_seconds` of the pass,
`pass_peak_mib` (the process's peak resident memory during the pass, counted from a peak reset
just before it, minus the memory resident then) and `bytes_per_state` (that over the states).
`ratios` compare the runs of one invocation (exact and in-memory over fingerprints), which is
what survives a shared, noisy machine. A table goes to stdout, the JSON (written atomically) to
--json.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from pymc_resume.files import write_atomically

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import provenance

ROOT = Path(__file__).resolve().parent.parent
CONFIGURATIONS = ("fingerprints", "exact", "in-memory")
EVERY_EDGE = 1 << 40  # an `adjacency.IN_MEMORY` no graph reaches


def run_one(configuration: str, n: int) -> dict:
    """The temporal pass on EWD840(n), in this process."""
    sys.path.insert(0, str(ROOT / "examples"))
    from ewd840 import EWD840

    from pymc_resume.explore.properties import adjacency, liveness
    from pymc_resume.explore.result import ExplorationResult
    from pymc_resume.explore.store.limits import Limits
    from pymc_resume.explore.store.memory import peak_bytes, resident_bytes
    from pymc_resume.explore.validate import validated

    if configuration == "in-memory":
        adjacency.IN_MEMORY = EVERY_EDGE
    sizes = {}
    build_graph = liveness.build_graph

    def measured_build(*args, **kwargs):
        graph = build_graph(*args, **kwargs)
        sizes.update(states=len(graph), edges=graph.edges.edge_count(), on_disk=graph.edges.on_disk)
        return graph

    liveness.build_graph = measured_build
    model = validated(EWD840(n))
    gc.disable()  # as `explore` runs the pass: the cyclic collector would only rescan states
    searched = ExplorationResult(0, 0, 0, 0.0, True, {}, collision_probability=0.0)
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from here
    before = resident_bytes()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    started = time.monotonic()
    result = liveness.decide(model, searched, None, Limits(), started, exact=configuration == "exact")
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    peak = peak_bytes() - before
    return {
        "model": f"ewd840-{n}",
        "configuration": configuration,
        **sizes,
        "holds": result.holds("Liveness"),
        "seconds": round(seconds, 2),
        "cpu_seconds": round(after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, 2),
        "pass_peak_mib": round(peak / 2**20, 1),
        "bytes_per_state": round(peak / sizes["states"], 1),
    }


def run_in_child(configuration: str, n: int) -> dict:
    completed = subprocess.run(
        [sys.executable, __file__, "--run-one", configuration, "--n", str(n)],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if completed.returncode != 0:
        raise SystemExit(f"run {configuration} failed: {completed.stderr.strip().splitlines()[-1:]}")
    return json.loads(completed.stdout)


def ratios(runs: list[dict]) -> dict:
    by = {run["configuration"]: run for run in runs}
    base = by["fingerprints"]
    found = {}
    for other in CONFIGURATIONS[1:]:
        run = by[other]
        found[f"{other}_over_fingerprints_cpu"] = round(run["cpu_seconds"] / base["cpu_seconds"], 2)
        found[f"{other}_over_fingerprints_memory"] = round(run["pass_peak_mib"] / base["pass_peak_mib"], 2)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=7, help="EWD840's ring size (default 7)")
    parser.add_argument("--json", help="write the runs and ratios here")
    parser.add_argument("--run-one", choices=CONFIGURATIONS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_one:
        print(json.dumps(run_one(args.run_one, args.n)))
        return 0
    runs = []
    began, started = time.perf_counter(), provenance.started()
    for configuration in CONFIGURATIONS:
        print(f"ewd840-{args.n} {configuration} ...", file=sys.stderr, flush=True)
        runs.append(run_in_child(configuration, args.n))
    found = ratios(runs)
    columns = (
        "configuration",
        "states",
        "edges",
        "on_disk",
        "holds",
        "seconds",
        "cpu_seconds",
        "pass_peak_mib",
        "bytes_per_state",
    )
    print("  ".join(f"{c:>15}" for c in columns))
    for run in runs:
        print("  ".join(f"{run[c]!s:>15}" for c in columns))
    print(json.dumps(found, indent=2))
    if args.json:
        document = {
            "bench": "liveness",
            "provenance": provenance.finished(started, time.perf_counter() - began),
            "runs": runs,
            "ratios": found,
        }
        write_atomically(args.json, json.dumps(document, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
