"""Explorer benchmark: pymc_resume at 1 and 2 workers against minicheck 0.4.0, in one run.

    python bench/explore.py --json bench.json                      # everything (~40 min)
    python bench/explore.py --only twophase --n 8 --engines multiprocess,ray --skip-minicheck \
        --json engines.json                                        # both engines (the ray extra)
    python bench/explore.py --only twophase --n 8 --json tp8.json  # one TwoPhase size
    python bench/explore.py --only plain --n 8 --json b.json       # TwoPhase written plainly
    python bench/explore.py --only checkpoint --json cr.json       # CheckpointResume, N=4 K=5
    python bench/explore.py --only lamport --json lm.json          # LamportMutex, string states
    python bench/explore.py --only lamport --checkpoint-every 5 --json ck.json  # what snapshots cost
    python bench/explore.py --only reference --skip-paper --json ref.json
    python bench/explore.py --only plain --n 8 --stores fingerprints,unspilled --frontier-keys 100000 \
        --skip-minicheck --json spill.json                         # the frontier on disk or not

Models:
  twophase-N         TwoPhase.tla for N resource managers (N = 5..9, or --n), state packed into
                     one int (bench/two_phase_packed.py); run with pymc_resume at each worker count
                     of --workers-list and with minicheck (bench/two_phase_minicheck.py).
  twophase-plain-N   the same TwoPhase written plainly (bench/two_phase_plain.py): tuples,
                     strings and frozensets, no codec; the explorer derives the encoding. With
                     pymc_resume at each worker count and with minicheck.
  checkpoint-resume-N-K  N processes counting to K with checkpoints and crashes
                     (bench/checkpoint_resume.py), plain tuples with strings; with pymc_resume
                     at each worker count and with minicheck (--n N, --k K; default 4 and 5).
  lamport-mutex-3    tlaplus/Examples' LamportMutex at MCLamportMutex.cfg (examples/lamport_mutex.py):
                     states holding strings (message types) and frozensets, a state constraint,
                     no codec; pymc_resume only, at each worker count; TLC's 724,274 states.
  reference-default  the reference semantics at the bundled bounds, with symmetry reduction,
  reference-paper    pymc_resume only (the paper bounds take ~8 minutes per worker count).

Engines (--engines): `multiprocess` is tool `pymc_resume` (one worker: in-process); `ray` is
tool `pymc_resume-ray`, every worker count a Ray actor per partition on a local Ray instance
the run starts before the clock does. For Ray runs, cpu_seconds counts the driver only (the
actors are not its children), and the baseline per worker is the RSS of a Ray worker process
that imported the explorer (about 150 MiB), not of a forked child.

Snapshots (--checkpoint-every SECONDS): tool `pymc_resume-snapshots` is `pymc_resume` saving
the search as `--checkpoint-dir` does (the first after the first level, then 1, 2, 4 ...
seconds up to that interval, each wait at least nine times what the last snapshot took), into
a temporary folder removed after the run; the ratios `snapshots_over_none_cpu_Ww` and
`snapshots_over_none_rss_Ww` say what the snapshots cost against the same run without them,
and the run's `snapshots` and `snapshot_seconds` (`snapshot_share_Ww` of its wall time) how
many were taken and how long they took, a figure the machine's drift between two runs does
not move.

Every run happens in a fresh child process (this script re-invoked with --run-one), so each
run's memory is its own. Reported per run:
  seconds            wall time of the explore / check_safety call (worker start-up included)
  states_per_second  distinct_states / seconds
  cpu_seconds        user + system CPU of the run process and its workers during the call;
  cpu_utilization    cpu_seconds / seconds: near W for a W-worker run on idle cores, lower when
                     other work on the machine took the CPU (then wall-time ratios mislead).
  peak_rss_mib       ru_maxrss of the run process plus, for W > 1 workers, the sum of each
                     worker's own ru_maxrss (reported by the worker after its search; W times the
                     largest reaped child's if unavailable): kernel high-water marks, so an UPPER
                     BOUND on the tree's peak resident memory (per-process peaks need not
                     coincide, and pages a worker shares copy-on-write with the coordinator are
                     counted in both).
  sampled_peak_rss_mib  the largest sum of the tree's current RSS seen by a 0.1 s sampler: a
                     LOWER bound on the same quantity.
  bytes_per_state    (peak_rss - baseline) / distinct_states: memory the search itself took, per
                     state. baseline is the run process's RSS just before the call (imports done,
                     model built) plus, for W > 1, W times the RSS of a child forked at that point
                     (what a worker starts with).
  worker_states, worker_busy_seconds, worker_idle_seconds
                     for W > 1: each partition's states, the seconds it spent stepping levels,
                     and the rest of the search, which it spent waiting (for the slowest worker,
                     and for the coordinator's routing): how even the load is.
  ratios             per model: pymc_resume's speed-up from 1 to W workers, and pymc_resume's
                     states/s over minicheck's (same model, same distinct-state count).

The machine may be shared: compare ratios within one run rather than absolute numbers across runs.
The script checks that every tool and worker count reports the same distinct-state count (and
TLC's, where known) and exits 1 if not, after writing the JSON.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import provenance

MIB = 2**20
TWOPHASE_SIZES = range(5, 10)
# TLC's distinct states for TwoPhase.tla (tlaplus/Examples; N=7 and 8 from TLC runs we know of).
TLC_DISTINCT = {3: 288, 6: 50816, 7: 296448, 8: 1745408}
# ... and for MCLamportMutex.cfg (specifications/lamport_mutex/manifest.json).
LAMPORT_MODEL, LAMPORT_TLC_DISTINCT = "lamport-mutex-3", 724274
MINICHECK_VERSION = "0.4.0"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- one run, in its own process -----------------------------------------------------------


def _rss_bytes(pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _child_pids() -> list[int]:
    pids = []
    for path in glob.glob("/proc/self/task/*/children"):
        try:
            with open(path) as children:
                pids.extend(int(pid) for pid in children.read().split())
        except OSError:
            pass
    return pids


class TreeSampler(threading.Thread):
    """Samples the summed RSS of this process and its children every `interval` seconds."""

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            total = _rss_bytes() + sum(_rss_bytes(pid) for pid in _child_pids())
            self.peak = max(self.peak, total)
            self._done.wait(self.interval)

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


def _forked_rss_bytes() -> int:
    """The RSS of a child forked from this process now: what a forked worker starts with."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once
        os.write(write_end, str(_rss_bytes()).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as reply:
        rss = int(reply.read() or 0)
    os.waitpid(pid, 0)
    return rss


def _cpu_seconds() -> float:
    """User + system CPU time of this process and its reaped children (the workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


RAY_TOOL = "pymc_resume-ray"
EXACT_TOOL = "pymc_resume-exact"  # the multiprocess engine with --exact (whole keys, no fingerprints)
# The multiprocess engine with the whole frontier in memory (`frontier.IN_MEMORY` unbounded).
UNSPILLED_TOOL = "pymc_resume-unspilled"
# The multiprocess engine taking snapshots (`--checkpoint-every`) into a folder of its own.
SNAPSHOTS_TOOL = "pymc_resume-snapshots"


def _start_ray(workers: int) -> int:
    """Start a local Ray instance for the run (before the clock) and return the resident bytes
    of one of its worker processes once it has imported the explorer: what an actor starts
    with, the Ray runs' baseline per worker."""
    import ray

    search_path = os.pathsep.join(folder for folder in sys.path if folder)
    ray.init(
        num_cpus=max(workers, os.cpu_count() or 1),
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        runtime_env={"env_vars": {"PYTHONPATH": search_path}},
    )

    @ray.remote(num_cpus=1)
    def started_worker_rss() -> int:
        import pymc_resume.explore.engines.service  # noqa: F401 - what an actor imports
        from pymc_resume.explore.store.memory import resident_bytes

        return resident_bytes()

    return ray.get(started_worker_rss.remote())


def _prepare_pymc_resume(spec: dict):
    """Import and build everything first (so the baseline RSS includes it); return the run
    (for a Ray run, with the resident bytes a Ray worker starts with: `worker_start_rss`)."""
    from pymc_resume.explore import explore
    from pymc_resume.explore.engines.progress import ProgressPrinter
    from pymc_resume.explore.search import SnapshotSchedule
    from pymc_resume.explore.snapshots import snapshot
    from pymc_resume.explore.store import frontier

    if spec["model"].startswith("twophase-plain-"):
        from bench.two_phase_plain import TwoPhasePlain

        model, canonical = TwoPhasePlain(spec["n"]), None
    elif spec["model"].startswith("twophase-"):
        from bench.two_phase_packed import TwoPhasePacked

        model, canonical = TwoPhasePacked(spec["n"]), None
    elif spec["model"].startswith("checkpoint-resume-"):
        from bench.checkpoint_resume import CheckpointResume

        model, canonical = CheckpointResume(spec["n"], spec["k"]), None
    elif spec["model"] == LAMPORT_MODEL:
        sys.path.insert(0, str(ROOT / "examples"))  # the example imports its helper `tla`
        from lamport_mutex import model as lamport_mutex

        model, canonical = lamport_mutex(), None
    else:
        from pymc_resume.model.bounds import load_bounds
        from pymc_resume.model.semantics import ResumeModel

        model = ResumeModel(load_bounds(spec["bounds"]))
        canonical = model.canonical
    progress = ProgressPrinter(sys.stderr, interval=15.0)
    engine = "ray" if spec["tool"] == RAY_TOOL else "multiprocess"
    exact = spec["tool"] == EXACT_TOOL
    if spec["tool"] == UNSPILLED_TOOL:
        frontier.IN_MEMORY = 2**62  # (this process and the workers it forks)
    elif spec.get("frontier_keys"):
        frontier.IN_MEMORY = spec["frontier_keys"]
    worker_start_rss = _start_ray(spec["workers"]) if engine == "ray" else 0

    saves: list[float] = []  # seconds each snapshot took

    def timed_save(*args, **kwargs):
        started = time.perf_counter()
        try:
            return save(*args, **kwargs)
        finally:
            saves.append(time.perf_counter() - started)

    # The search calls `snapshot.save` through the module: timed here, in this (the
    # coordinator's) process, which waits for every partition's file.
    save, snapshot.save = snapshot.save, timed_save

    def run() -> dict:
        folder = tempfile.mkdtemp(prefix="bench-snapshots-") if spec["tool"] == SNAPSHOTS_TOOL else None
        schedule = None if folder is None else SnapshotSchedule(folder, spec["checkpoint_every"])
        try:
            started = time.perf_counter()
            result = explore(
                model,
                canonical=canonical,
                workers=spec["workers"],
                progress=progress,
                engine=engine,
                exact=exact,
                snapshots=schedule,
            )
            seconds = time.perf_counter() - started
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        if not result.complete:
            raise RuntimeError(f"search stopped early: {result.stopped_because}")
        return {
            "distinct_states": result.distinct_states,
            "states_generated": result.states_generated,
            "depth": result.depth,
            "seconds": seconds,
            "tool_seconds": result.seconds,
            "violations": sorted(result.violations),
            "worker_peak_rss": list(result.worker_peak_rss),
            # how even the partitions are: each worker's states, and its seconds stepping
            # levels against the search's (the rest it waited for the slowest)
            "worker_states": [states for states, _busy in result.worker_load],
            "worker_busy_seconds": [round(busy, 2) for _states, busy in result.worker_load],
            "worker_idle_seconds": [round(result.seconds - busy, 2) for _states, busy in result.worker_load],
            "collision_probability": result.collision_probability,
            **({"snapshots": len(saves), "snapshot_seconds": round(sum(saves), 2)} if schedule else {}),
        }

    run.worker_start_rss = worker_start_rss  # type: ignore[attr-defined]
    return run


def _prepare_minicheck(spec: dict):
    from minicheck import check_safety

    if spec["model"].startswith("checkpoint-resume-"):
        from bench.checkpoint_resume import protocol

        model = protocol(spec["n"], spec["k"])
    else:
        from bench.two_phase_minicheck import protocol

        model = protocol(spec["n"])

    def run() -> dict:
        started = time.perf_counter()
        result = check_safety(model, max_states=10**10)
        seconds = time.perf_counter() - started
        if not result["exhaustive"]:
            raise RuntimeError(f"search stopped early: {result.get('incomplete_reason')}")
        return {
            "distinct_states": result["reachable_states"],
            "seconds": seconds,
            "violations": sorted(name for name, p in result["properties"].items() if not p["holds"]),
        }

    return run


def run_one(spec: dict) -> dict:
    """Run `spec` in this (fresh) process and measure it."""
    extra = {}
    if spec["tool"] == "minicheck":
        try:
            import minicheck
        except ImportError:
            return {"skipped": "minicheck is not installed (pip install -r bench/requirements.txt)"}
        extra["minicheck_version"] = getattr(minicheck, "__version__", "?")
        if extra["minicheck_version"] != MINICHECK_VERSION:
            log(
                f"    note: minicheck {extra['minicheck_version']} is installed, the bench pins "
                f"{MINICHECK_VERSION}"
            )
    prepare = _prepare_minicheck if spec["tool"] == "minicheck" else _prepare_pymc_resume
    run = prepare(spec)
    on_ray = spec["tool"] == RAY_TOOL
    ours = spec["tool"] in ("pymc_resume", EXACT_TOOL, UNSPILLED_TOOL, SNAPSHOTS_TOOL)
    workers = spec["workers"] if on_ray or (ours and spec["workers"] > 1) else 0
    per_worker = run.worker_start_rss if on_ray else (_forked_rss_bytes() if workers else 0)
    baseline = _rss_bytes() + workers * per_worker
    cpu_before = _cpu_seconds()
    sampler = TreeSampler()
    sampler.start()
    try:
        measured = run()
    finally:
        sampled_peak = sampler.stop()
    cpu = _cpu_seconds() - cpu_before
    # Worker processes are reaped by the explorer before explore() returns, so RUSAGE_CHILDREN
    # holds the largest of their high-water marks (Linux: ru_maxrss in KiB). The forked probe
    # child of _forked_rss_bytes is far smaller than any worker, so it never is the largest.
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    largest_child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    reported = measured.pop("worker_peak_rss", None)
    if workers and reported and len(reported) == workers:
        peak = own + sum(reported)  # each worker's own high-water mark, as it reported it
    else:
        peak = own + workers * largest_child
    distinct = measured["distinct_states"]
    return {
        **measured,
        "peak_rss_mib": peak / MIB,
        "sampled_peak_rss_mib": sampled_peak / MIB,
        "baseline_rss_mib": baseline / MIB,
        "states_per_second": distinct / measured["seconds"],
        "cpu_seconds": cpu,
        "cpu_utilization": cpu / measured["seconds"],
        "bytes_per_state": (peak - baseline) / distinct,
        **extra,
    }


# --- the driver ----------------------------------------------------------------------------


def plan(args) -> list[dict]:
    workers_list = [int(w) for w in args.workers_list.split(",")]
    tools = [{"multiprocess": "pymc_resume", "ray": RAY_TOOL}[engine] for engine in args.engines.split(",")]
    stores = args.stores.split(",")
    if "exact" in stores:
        tools.append(EXACT_TOOL)
    if "unspilled" in stores:
        tools.append(UNSPILLED_TOOL)
    if args.checkpoint_every is not None:
        tools.append(SNAPSHOTS_TOOL)
    if "fingerprints" not in stores:
        tools = [tool for tool in tools if tool != "pymc_resume"]
    ours = [tool for tool in tools if tool != RAY_TOOL]
    runs = []
    if args.only in (None, "twophase"):
        for n in [args.n] if args.n else TWOPHASE_SIZES:
            for tool in tools:
                for workers in workers_list:
                    runs.append({"model": f"twophase-{n}", "tool": tool, "workers": workers, "n": n})
            if not args.skip_minicheck:
                runs.append({"model": f"twophase-{n}", "tool": "minicheck", "workers": 1, "n": n})
    if args.only in (None, "plain"):
        for n in [args.n] if args.n else TWOPHASE_SIZES:
            model = f"twophase-plain-{n}"
            runs.extend(
                {"model": model, "tool": tool, "workers": workers, "n": n}
                for tool in ours
                for workers in workers_list
            )
            if not args.skip_minicheck:
                runs.append({"model": model, "tool": "minicheck", "workers": 1, "n": n})
    if args.only in (None, "checkpoint"):
        n, k = args.n or 4, args.k
        model = f"checkpoint-resume-{n}-{k}"
        runs.extend(
            {"model": model, "tool": tool, "workers": workers, "n": n, "k": k}
            for tool in ours
            for workers in workers_list
        )
        if not args.skip_minicheck:
            runs.append({"model": model, "tool": "minicheck", "workers": 1, "n": n, "k": k})
    if args.only in (None, "lamport"):
        runs.extend(
            {"model": LAMPORT_MODEL, "tool": tool, "workers": workers}
            for tool in ours
            for workers in workers_list
        )
    if args.only in (None, "reference"):
        for bounds in ("default", "paper"):
            if bounds == "paper" and args.skip_paper:
                continue
            for tool in ours:
                for workers in workers_list:
                    runs.append(
                        {"model": f"reference-{bounds}", "tool": tool, "workers": workers, "bounds": bounds}
                    )
    for run in runs:
        if run["tool"] == SNAPSHOTS_TOOL:
            run["checkpoint_every"] = args.checkpoint_every
    if args.frontier_keys:
        for run in runs:
            if run["tool"] == "pymc_resume":
                run["frontier_keys"] = args.frontier_keys
    return runs


def run_in_child(spec: dict) -> dict:
    """Run `spec` in a fresh interpreter; its stderr (progress) goes straight to ours."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", prefix="bench-run-") as out:
        completed = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--run-one",
                json.dumps(spec),
                "--result-file",
                out.name,
            ],
            stdin=subprocess.DEVNULL,
            check=False,
        )
        text = out.read()
    if completed.returncode != 0 or not text:
        return {"skipped": f"the run process failed (exit code {completed.returncode})"}
    return json.loads(text)


def ratios(runs: list[dict]) -> dict:
    """Per model: pymc_resume 1 -> W worker speed-up, and pymc_resume / minicheck states/s."""
    by_model: dict[str, dict] = {}
    for run in runs:
        if "skipped" not in run:
            by_model.setdefault(run["model"], {})[(run["tool"], run["workers"])] = run
    out = {}
    for model, done in by_model.items():
        entry = {}
        one = done.get(("pymc_resume", 1))
        mini = done.get(("minicheck", 1))
        for (tool, workers), run in sorted(done.items()):
            same = done.get(("pymc_resume", workers))
            if tool == RAY_TOOL and same:
                entry[f"ray_over_multiprocess_{workers}w"] = (
                    run["states_per_second"] / same["states_per_second"]
                )
            if tool == EXACT_TOOL and same:
                entry[f"fingerprints_over_exact_speed_{workers}w"] = (
                    same["states_per_second"] / run["states_per_second"]
                )
                entry[f"fingerprints_over_exact_bytes_{workers}w"] = (
                    same["bytes_per_state"] / run["bytes_per_state"]
                )
            if tool == SNAPSHOTS_TOOL and same:
                entry[f"snapshots_over_none_cpu_{workers}w"] = run["cpu_seconds"] / same["cpu_seconds"]
                entry[f"snapshots_over_none_rss_{workers}w"] = run["peak_rss_mib"] / same["peak_rss_mib"]
            if tool == SNAPSHOTS_TOOL:
                entry[f"snapshot_share_{workers}w"] = run["snapshot_seconds"] / run["seconds"]
            if tool == UNSPILLED_TOOL and same:
                entry[f"spilled_over_unspilled_speed_{workers}w"] = (
                    same["states_per_second"] / run["states_per_second"]
                )
                entry[f"spilled_over_unspilled_bytes_{workers}w"] = (
                    same["bytes_per_state"] / run["bytes_per_state"]
                )
            if tool != "pymc_resume":
                continue
            if one and workers > 1:
                entry[f"pymc_resume_speedup_1_to_{workers}_workers"] = (
                    run["states_per_second"] / one["states_per_second"]
                )
                entry[f"pymc_resume_cpu_{workers}w_over_1w"] = run["cpu_seconds"] / one["cpu_seconds"]
            if mini:
                entry[f"pymc_resume_{workers}w_over_minicheck"] = (
                    run["states_per_second"] / mini["states_per_second"]
                )
        out[model] = entry
    return out


def checks(runs: list[dict]) -> list[str]:
    """Disagreements on distinct-state counts (between tools, worker counts, and with TLC)."""
    problems = []
    counts: dict[str, set] = {}
    for run in runs:
        if "skipped" in run:
            continue
        counts.setdefault(run["model"], set()).add(run["distinct_states"])
        if run["violations"]:
            problems.append(
                f"{run['model']} {run['tool']} w={run['workers']}: violations {run['violations']}"
            )
        n = run.get("n")
        expected = TLC_DISTINCT.get(n) if run["model"].startswith("twophase") else None
        if "k" in run:
            from bench.checkpoint_resume import distinct_states

            expected = distinct_states(n, run["k"])
        if run["model"] == LAMPORT_MODEL:
            expected = LAMPORT_TLC_DISTINCT
        if expected is not None and run["distinct_states"] != expected:
            problems.append(
                f"{run['model']} {run['tool']} w={run['workers']}: "
                f"{run['distinct_states']:,} distinct states, expected "
                f"{expected:,}"
            )
    for model, seen in counts.items():
        if len(seen) > 1:
            problems.append(f"{model}: tools/worker counts disagree on distinct states: {sorted(seen)}")
    return problems


def write_json(path: str, document: dict) -> None:
    """Write atomically: a temporary file in the same folder, then os.replace."""
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", dir=folder, prefix=".bench-", suffix=".tmp", delete=False) as tmp:
        json.dump(document, tmp, indent=2)
        tmp.write("\n")
    os.replace(tmp.name, path)


def table(runs: list[dict], ratio_table: dict) -> str:
    head = (
        f"{'model':<22} {'tool':<21} {'w':>2} {'distinct':>12} {'seconds':>9} "
        f"{'states/s':>10} {'cpu s':>8} {'peak MiB':>9} {'B/state':>8}"
    )
    lines = [head, "-" * len(head)]
    for run in runs:
        prefix = f"{run['model']:<22} {run['tool']:<21} {run['workers']:>2}"
        if "skipped" in run:
            lines.append(f"{prefix}  skipped: {run['skipped']}")
            continue
        lines.append(
            f"{prefix} {run['distinct_states']:>12,} {run['seconds']:>9.2f} "
            f"{run['states_per_second']:>10,.0f} {run['cpu_seconds']:>8.1f} "
            f"{run['peak_rss_mib']:>9,.0f} "
            f"{run['bytes_per_state']:>8,.0f}"
        )
    lines.append("")
    for model, entry in ratio_table.items():
        shown = ", ".join(f"{key} {value:.2f}" for key, value in entry.items())
        lines.append(f"{model}: {shown or '(no ratio)'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the results here (atomically)")
    parser.add_argument("--only", choices=("twophase", "plain", "checkpoint", "lamport", "reference"))
    parser.add_argument(
        "--n", type=int, help="TwoPhase size (default: 5..9), or CheckpointResume processes (default: 4)"
    )
    parser.add_argument("--k", type=int, default=5, help="CheckpointResume's count (default: 5)")
    parser.add_argument("--workers-list", default="1,2", help="pymc_resume worker counts")
    parser.add_argument(
        "--engines",
        default="multiprocess",
        help="pymc_resume engines for the TwoPhase runs: multiprocess, ray, or "
        "both comma-separated (default: multiprocess)",
    )
    parser.add_argument(
        "--stores",
        default="fingerprints",
        help="pymc_resume visited stores: fingerprints (the default store), exact (--exact), "
        "unspilled (fingerprints, the whole frontier in memory), comma-separated "
        "(default: fingerprints)",
    )
    parser.add_argument(
        "--frontier-keys",
        type=int,
        help="keys a partition keeps in memory before spilling its frontier to disk, for the "
        "fingerprints store (default: the explorer's, frontier.IN_MEMORY)",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=float,
        help="also run pymc_resume taking snapshots at most this many seconds apart (tool "
        "pymc_resume-snapshots, into a temporary folder): what checkpointing costs in CPU and memory",
    )
    parser.add_argument("--skip-paper", action="store_true", help="skip reference-paper")
    parser.add_argument("--skip-minicheck", action="store_true", help="pymc_resume runs only")
    parser.add_argument("--run-one", help=argparse.SUPPRESS)  # internal: one run, this process
    parser.add_argument("--result-file", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not set(args.engines.split(",")) <= {"multiprocess", "ray"}:
        parser.error(f"--engines: multiprocess, ray or both, got {args.engines!r}")
    if args.checkpoint_every is not None and args.checkpoint_every < 0:
        parser.error(f"--checkpoint-every: seconds, 0 or more, got {args.checkpoint_every}")
    if not set(args.stores.split(",")) <= {"fingerprints", "exact", "unspilled"}:
        parser.error(f"--stores: fingerprints, exact, unspilled, comma-separated, got {args.stores!r}")

    if args.run_one:
        measured = run_one(json.loads(args.run_one))
        with open(args.result_file, "w") as out:
            json.dump(measured, out)
        return 0
    if not args.json:
        parser.error("--json PATH is required")

    runs_planned = plan(args)
    began = time.perf_counter()
    document = {
        "bench": "explore",
        "provenance": provenance.started(argv),  # other work on the machine skews the numbers
        "runs": [],
        "ratios": {},
    }
    for position, spec in enumerate(runs_planned, 1):
        log(f"[{position}/{len(runs_planned)}] {spec['model']} {spec['tool']} workers={spec['workers']} ...")
        measured = run_in_child(spec)
        run = {key: spec[key] for key in ("model", "tool", "workers")}
        run.update({key: spec[key] for key in ("n", "k") if key in spec})
        run.update(measured)
        if "skipped" in run:
            log(f"    skipped: {run['skipped']}")
        else:
            log(
                f"    {run['distinct_states']:,} distinct states in {run['seconds']:.2f}s "
                f"({run['states_per_second']:,.0f}/s, {run['cpu_seconds']:.1f}s CPU), "
                f"peak RSS {run['peak_rss_mib']:,.0f} MiB "
                f"(sampled {run['sampled_peak_rss_mib']:,.0f}), "
                f"{run['bytes_per_state']:,.0f} bytes/state"
            )
        document["runs"].append(run)
        document["ratios"] = ratios(document["runs"])
        write_json(args.json, document)  # after every run, so an interrupted bench keeps its runs
    problems = checks(document["runs"])
    document["checks"] = {"ok": not problems, "problems": problems}
    document["provenance"] = provenance.finished(document["provenance"], time.perf_counter() - began)
    write_json(args.json, document)
    print(table(document["runs"], document["ratios"]))
    for problem in problems:
        log(f"CHECK FAILED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
