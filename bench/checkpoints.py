"""What the explorer's checkpoints cost: seconds and bytes of each snapshot, and of a recovery.

    python bench/checkpoints.py --bounds default --workers 2 --json ck.json
    python bench/checkpoints.py --bounds default --workers 2 --whole --json ck-whole.json
    PYTHONPATH=../main python bench/checkpoints.py --bounds default --workers 2 --json ck-main.json

Runs `pymc-resume check`'s exploration of the reference semantics with `--checkpoint-dir` (a
temporary folder) and `--checkpoint-every` (default 0: a snapshot after every level), and
records each snapshot: its depth, the states stored then, the seconds `snapshot.save` took (the
pieces written where each partition lives, the manifest, published) and the bytes it wrote (the
files of its fresh folder: with increments, only the new pieces and the manifest). `--whole`
makes every snapshot a base, as before increments (`chain.MAX_INCREMENTS` 0), on the same code.
Then it recovers from the last snapshot and times `load` (the chain's files read and checked
against the manifest, `snapshot.load`) and `restore` (the pieces joined and checked, the
partitions refilled, `load_state`), with the bytes read.

The script uses only what the code before increments also has (`snapshot.save`, `load`, the
engines' `load_state`), so the same script measures another checkout put first on the module
path; `code` in the output says which ran. Prints a summary, and with `--json` writes every
snapshot's figures and the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pymc_resume
from pymc_resume.checking.check import peak_rss_mib
from pymc_resume.explore import explore
from pymc_resume.explore.engines.inprocess import InProcess
from pymc_resume.explore.engines.workers import WorkerPool
from pymc_resume.explore.search import SnapshotSchedule
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel

RESTORES: list[float] = []


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _code() -> str:
    """Which checkout ran: its folder and commit."""
    where = Path(pymc_resume.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "?"
    return f"{where} @ {commit}"


def _recorded_saves(folder: Path, records: list[dict]):
    """`snapshot.save`, recording each snapshot's depth, states, seconds and bytes written."""
    save = snapshot.save

    def recorded(directory, run, depth, elapsed, write_partitions, *rest):
        started = time.perf_counter()
        taken = save(directory, run, depth, elapsed, write_partitions, *rest)
        seconds = time.perf_counter() - started
        written = folder / f"level-{depth:06d}"
        manifest = json.loads((written / "manifest.json").read_text())
        records.append(
            {
                "depth": depth,
                "elapsed": round(elapsed, 3),  # (the run's seconds when the snapshot began)
                "states": sum(entry["states"] for entry in manifest["partitions"]),
                "seconds": round(seconds, 4),
                "bytes": _folder_bytes(written),
                "chain": len(manifest.get("chain", [depth])),
            }
        )
        return taken

    return recorded


def _timed_restores(backend) -> None:
    load_state = backend.load_state

    def timed(self, saved):
        started = time.perf_counter()
        try:
            return load_state(self, saved)
        finally:
            RESTORES.append(time.perf_counter() - started)

    backend.load_state = timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bounds", default="default")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--every", type=float, default=0.0, help="--checkpoint-every seconds")
    parser.add_argument("--whole", action="store_true", help="every snapshot a base (as before increments)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if args.whole:
        from pymc_resume.explore.snapshots import chain  # (only in the code with increments)

        chain.MAX_INCREMENTS = 0
    for backend in (WorkerPool, InProcess):
        _timed_restores(backend)
    load_before = os.getloadavg()
    model = ResumeModel(load_bounds(args.bounds))
    folder = Path(tempfile.mkdtemp(prefix="pymc-resume-bench-"))
    records: list[dict] = []
    snapshot.save = _recorded_saves(folder, records)
    try:
        started = time.perf_counter()
        result = explore(
            model,
            canonical=model.canonical,
            workers=args.workers,
            snapshots=SnapshotSchedule(str(folder), every=args.every),
        )
        seconds = time.perf_counter() - started
        read = _folder_bytes(folder)  # (only the published chain is left)
        loading = time.perf_counter()
        saved = snapshot.load(folder)
        load_seconds = time.perf_counter() - loading
        explore(model, canonical=model.canonical, workers=args.workers, from_snapshot=saved, max_states=1)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    figures = {
        "code": _code(),
        "mode": "whole" if args.whole else "as the code does",
        "bounds": args.bounds,
        "workers": args.workers,
        "every": args.every,
        "states": result.distinct_states,
        "seconds": round(seconds, 2),
        "peak_rss_mib": peak_rss_mib(result),
        "snapshots": records,
        "snapshot_seconds": round(sum(r["seconds"] for r in records), 3),
        "snapshot_bytes": sum(r["bytes"] for r in records),
        "recovery": {
            "bytes_read": read,
            "load_seconds": round(load_seconds, 3),
            "restore_seconds": round(RESTORES[-1], 3),
        },
        "load_average": {"before": load_before, "after": os.getloadavg()},
    }
    _print(figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


def _print(figures: dict) -> None:
    records = figures["snapshots"]
    print(
        f"{figures['bounds']}, {figures['workers']} workers ({figures['mode']}; {figures['code']}): "
        f"{figures['states']:,} states, {figures['seconds']:.1f} s with {len(records)} snapshots, "
        f"{figures['snapshot_seconds']:.2f} s and {figures['snapshot_bytes'] / 2**20:.1f} MiB in all"
    )
    for record in records[-5:]:
        print(
            f"  depth {record['depth']:3}: {record['states']:>10,} states, {record['seconds']:.3f} s, "
            f"{record['bytes'] / 2**20:7.2f} MiB (chain of {record['chain']})"
        )
    recovery = figures["recovery"]
    print(
        f"  recovery: {recovery['bytes_read'] / 2**20:.1f} MiB, load {recovery['load_seconds']:.3f} s, "
        f"restore {recovery['restore_seconds']:.3f} s; load average {figures['load_average']}"
    )


if __name__ == "__main__":
    main()
