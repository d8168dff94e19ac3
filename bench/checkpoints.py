"""What the explorer's checkpoints cost: seconds to take and write a snapshot, and to recover.

    python bench/checkpoints.py --bounds default --workers 2
    python bench/checkpoints.py --bounds paper --workers 2 --every 60

Runs `pymc-resume check`'s exploration of the reference semantics with `--checkpoint-dir` (a
temporary folder) and `--checkpoint-every` (default 0: a snapshot after every level), timing each
snapshot, `write` (`snapshot.save`: a fresh folder, the partition files, the manifest, published),
and within it `take` (each worker encodes and writes its partition's file, `save_state`). Then it
recovers from the last snapshot and times `load` (the files read, `snapshot.load`) and `restore`
(the workers check and take their state, `load_state`). Prints one line per part and the run's
peak RSS (the coordinator's and the workers', as `check --json` reports them).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from pymc_resume.checking.check import peak_rss_mib
from pymc_resume.explore import explore
from pymc_resume.explore.engines.inprocess import InProcess
from pymc_resume.explore.engines.workers import WorkerPool
from pymc_resume.explore.search import SnapshotSchedule
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel

TIMES: dict[str, list[float]] = {"take": [], "write": [], "load": [], "restore": []}  # (take: in write)


def timed(name, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            TIMES[name].append(time.perf_counter() - start)

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bounds", default="default")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--every", type=float, default=0.0, help="--checkpoint-every seconds")
    args = parser.parse_args()
    for backend in (WorkerPool, InProcess):
        backend.save_state = timed("take", backend.save_state)
        backend.load_state = timed("restore", backend.load_state)
    snapshot.save = timed("write", snapshot.save)
    model = ResumeModel(load_bounds(args.bounds))
    folder = Path(tempfile.mkdtemp(prefix="pymc-resume-bench-"))
    try:
        started = time.perf_counter()
        result = explore(
            model,
            canonical=model.canonical,
            workers=args.workers,
            snapshots=SnapshotSchedule(str(folder), every=args.every),
        )
        seconds = time.perf_counter() - started
        print(
            f"{args.bounds}, {args.workers} workers: {result.distinct_states:,} states, "
            f"{seconds:.1f} s with {len(TIMES['write'])} snapshots; peak RSS MiB "
            f"{peak_rss_mib(result)}"
        )
        size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
        for part in ("take", "write"):
            values = TIMES[part]
            print(f"  {part:7} last {values[-1]:.3f} s, max {max(values):.3f} s, all {sum(values):.2f} s")
        print(f"  last snapshot: depth {snapshot.load(folder).depth}, {size / 2**20:.1f} MiB")
        saved = timed("load", snapshot.load)(folder)
        explore(
            model, canonical=model.canonical, workers=args.workers, from_snapshot=saved, max_states=1
        )  # restore, then stop at the first level
        print(f"  load    {TIMES['load'][0]:.3f} s, restore {TIMES['restore'][0]:.3f} s")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
