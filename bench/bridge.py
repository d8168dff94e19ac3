"""Where a profile's wall time goes: with and without host templates, on 1 and 2 jobs.

    python bench/bridge.py --json b.json                        # reference, LangGraph, CrewAI
    python bench/bridge.py --configs langgraph:sqlite/sync dbos:postgres --json b.json
    python bench/bridge.py --all --modes template:2 --json b.json

For each configuration (FAMILY:CONFIG) and mode, the script runs, in a fresh process,

    pymc-resume profile FAMILY --config CONFIG --bounds small --examples 0 --no-shrink \\
        --json OUT --jobs J [--fresh-hosts]

and prints one JSON record per run:

  wall_seconds         the command's wall time
  cpu_seconds          user + system CPU of every process of the run (the command, its host
                       templates, hosts and the framework's client processes: each is reaped by
                       its parent, so the command's rusage holds them all)
  bridge_cpu_seconds   of that, the command's own (judging, the battery, every thread)
  not_computing        wall x min(jobs, cores) - cpu_seconds: processor time the run could have
                       used and did not: waiting on a database server, on I/O, on sleeps and
                       polls, on process start-up's page faults
  postgres_cpu_seconds CPU seconds the local PostgreSQL server's processes spent meanwhile (read
                       from /proc; the server is not the run's child, so its work for the run is
                       part of `not_computing`)
  scenarios            the battery's scenarios; `framework_operations`: calls into the adapter
                       that ran client operations (start, resume, resume-together, recover,
                       fork, update)
  hosts, host_start_seconds         hosts started, and the seconds forking and building them
  templates, template_start_seconds templates started (their preloads)
  calls                seconds in each kind of call into the adapter (round trips; jobs overlap)
  verdicts             the row, so that the modes can be seen to agree

`--modes` is a list of `fresh:J` (every host forked from the command, importing the framework
anew) and `template:J` (hosts forked from a template); the default compares `fresh:1`,
`template:1` and `template:2`. Runs go one at a time: the machine may be shared, so compare the
modes of one configuration within one run of this script (ratios), not across days.
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

from pymc_resume.files import write_atomically

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import provenance

DEFAULT_CONFIGS = ["reference:sqlite", "langgraph:sqlite/sync", "crewai:sqlite/persist"]
DEFAULT_MODES = ["fresh:1", "template:1", "template:2"]
OPERATIONS = ("start", "resume", "resume_together", "recover", "fork", "update")


def every_configuration() -> list[str]:
    from pymc_resume.bridge.hosting.registry import FAMILIES

    return [f"{name}:{c.name}" for name, family in FAMILIES.items() for c in family.configurations]


def postgres_cpu() -> float:
    """User + system CPU seconds of every process of this machine named `postgres` (the local
    server, its backends among them), from /proc; 0 where there is no /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")", 1)[1].split()
        if name == "postgres":
            total += sum(int(field) for field in fields[11:15])  # its own, and its reaped backends
    return total / ticks


def run_one(config: str, mode: str, workdir: Path) -> dict:
    family, _, name = config.partition(":")
    kind, _, jobs = mode.partition(":")
    out = workdir / f"{family}-{name.replace('/', '_')}-{kind}-{jobs}.json"
    command = [
        sys.executable,
        "-m",
        "pymc_resume",
        "profile",
        family,
        "--config",
        name,
        "--bounds",
        "small",
        "--examples",
        "0",
        "--no-shrink",
        "--json",
        str(out),
        "--jobs",
        jobs,
        "--repro-dir",
        str(workdir / "repros"),
    ] + (["--fresh-hosts"] if kind == "fresh" else [])
    server_before = postgres_cpu()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=workdir)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    cpu = usage.ru_utime + usage.ru_stime
    record = {
        "config": config,
        "mode": mode,
        "exit_code": process.returncode,
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "postgres_cpu_seconds": round(postgres_cpu() - server_before, 2),
    }
    try:
        [profile] = json.loads(out.read_text())["profiles"]
    except (OSError, ValueError):
        record["error"] = stderr.decode(errors="replace").strip()[-500:]
        return record
    hosting = profile.get("hosting") or {}
    calls = hosting.get("calls", {})
    used = min(int(jobs), os.cpu_count() or 1)
    record.update(
        bridge_cpu_seconds=hosting.get("bridge_cpu_seconds"),
        not_computing=round(max(0.0, wall * used - cpu), 2),
        scenarios=profile["scenarios"],
        framework_operations=sum(calls.get(op, {}).get("calls", 0) for op in OPERATIONS),
        hosts=hosting.get("hosts"),
        host_start_seconds=hosting.get("host_start_seconds"),
        templates=hosting.get("templates"),
        template_start_seconds=hosting.get("template_start_seconds"),
        calls={method: entry["seconds"] for method, entry in calls.items()},
        verdicts=[profile["clauses"][cid]["verdict"] for cid in profile["clauses"]],
    )
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=None, metavar="FAMILY:CONFIG")
    parser.add_argument("--all", action="store_true", help="every configuration of every family")
    parser.add_argument("--modes", nargs="+", default=DEFAULT_MODES, metavar="fresh:J|template:J")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    configs = every_configuration() if args.all else (args.configs or DEFAULT_CONFIGS)
    for mode in args.modes:
        kind, _, jobs = mode.partition(":")
        if kind not in ("fresh", "template") or not jobs.isdigit() or int(jobs) < 1:
            parser.error(f"--modes: {mode!r} is not fresh:J or template:J")
    records: list[dict] = []
    began = time.perf_counter()
    document = {"bench": "bridge", "provenance": provenance.started(argv), "runs": records}
    with tempfile.TemporaryDirectory(prefix="pymc-resume-bench-bridge-") as folder:
        for config in configs:
            for mode in args.modes:
                record = run_one(config, mode, Path(folder))
                records.append(record)
                print(json.dumps(record), flush=True)
                if args.json_path:
                    write_atomically(args.json_path, json.dumps(document, indent=2) + "\n")
    document["provenance"] = provenance.finished(document["provenance"], time.perf_counter() - began)
    if args.json_path:
        write_atomically(args.json_path, json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
