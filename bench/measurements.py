"""docs/measurements.md from the benches' JSON: today's figure for each measurement, each with
the command that gives it, the commit it ran on and how busy the machine was.

    python bench/measurements.py                 # rewrite docs/measurements.md
    python bench/measurements.py --check         # exit 1 if the page differs from the JSON

Each bench script writes its JSON with a `bench` name and a `provenance` block
(`bench/provenance.py`); the results the page quotes are kept in `bench/results/` (one file
per measurement: run the command shown under its section again, with `--json` pointing at the
same file, then this script). History is git's: the page holds only the latest run of each.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "measurements.md"

INTRO = """# Measurements

Today's figure for each measurement: what `python bench/measurements.py` writes from the
benches' JSON in `bench/results/` (do not edit this page by hand; run a bench again, then that
script). Under each section: the command, the commit it ran on, when, and the machine's load
average at the start and end of the run. This machine has 2 cores, is shared and its speed
varies 2-3x between days: compare the ratios within one run, not absolute times across runs.
History is git's.
"""


BRIDGE_COLUMNS = ["configuration", "mode", "wall s", "CPU s", "hosts", "s starting hosts"]
BRIDGE_COLUMNS += ["not computing s", "scenarios"]
EXPLORE_COLUMNS = ["model", "tool", "workers", "distinct states", "s", "CPU s", "states/s"]
EXPLORE_COLUMNS += ["peak RSS MiB", "bytes/state"]
LIVENESS_COLUMNS = ["configuration", "states", "edges", "holds", "seconds", "cpu_seconds"]
LIVENESS_COLUMNS += ["pass_peak_mib", "bytes_per_state"]


def provenance_line(document: dict) -> str:
    p = document.get("provenance", {})
    dirty = " with uncommitted changes" if p.get("dirty") else ""
    return (
        f"`{p.get('command', '?')}` on {p.get('commit', '?')}{dirty}, {p.get('date', '?')}, "
        f"{p.get('cores', '?')} cores, load average {p.get('load_at_start', '?')} at the start and "
        f"{p.get('load_at_end', '?')} at the end, {p.get('seconds', '?')} s in all."
    )


def _paragraphs(parts: list[str]) -> str:
    """The non-empty parts, a blank line between each."""
    return "\n\n".join(part for part in parts if part.strip())


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def suite_section(document: dict) -> str:
    slowest = [[s["seconds"], s["phase"], s["test"]] for s in document.get("slowest", [])]
    return _paragraphs(
        [
            "## The suite",
            "`.ci/run` on a clean clone (a fresh virtual environment, the installs, `ruff`, `mypy`, "
            f"then the README's test command): **{document['ci_seconds']:,.0f} s**, exit code "
            f"{document['exit_code']}; pytest: {document['pytest_summary']}. Its slowest steps "
            "(`--durations`, which every CI log prints):",
            table(["seconds", "phase", "test"], slowest),
            "".join(f"\n- failed: `{line}`" for line in document.get("failed", [])).strip(),
            provenance_line(document),
        ]
    )


def bridge_section(document: dict) -> str:
    rows = [
        [
            r["config"],
            r["mode"],
            r.get("wall_seconds"),
            r.get("cpu_seconds"),
            r.get("hosts"),
            r.get("host_start_seconds"),
            r.get("not_computing"),
            r.get("scenarios"),
        ]
        for r in document["runs"]
    ]
    ratios = []
    by = {(r["config"], r["mode"]): r for r in document["runs"] if "wall_seconds" in r}
    for (config, mode), run in by.items():
        fresh = by.get((config, "fresh:1"))
        if mode.startswith("template") and fresh:
            ratios.append(
                f"- {config}, {mode}: {fresh['wall_seconds'] / run['wall_seconds']:.1f}x faster than fresh:1"
            )
    verdicts: dict[str, set] = {}
    for r in document["runs"]:
        verdicts.setdefault(r["config"], set()).add(tuple(r.get("verdicts", ())))
    differ = sorted(config for config, seen in verdicts.items() if len(seen) > 1)
    return _paragraphs(
        [
            "## The bridge",
            "Each configuration's battery at bounds `small`, no fuzzing, no shrinking, with hosts "
            "forked from the command (`fresh`, `--fresh-hosts`) or from a template, on J jobs. CPU "
            'seconds are every process\'s of the run; "not computing" is wall x min(jobs, cores) - '
            "CPU (waiting on servers, I/O, start-up). Every mode of a configuration gives the "
            "same verdicts" + (f" (NOT in this run: {', '.join(differ)})." if differ else "."),
            table(
                [
                    "configuration",
                    "mode",
                    "wall s",
                    "CPU s",
                    "hosts",
                    "s starting hosts",
                    "not computing s",
                    "scenarios",
                ],
                rows,
            ),
            "\n".join(ratios),
            provenance_line(document),
        ]
    )


def explore_section(document: dict) -> str:
    rows = [
        [
            r["model"],
            r["tool"],
            r["workers"],
            r.get("distinct_states"),
            r.get("seconds"),
            r.get("cpu_seconds"),
            r.get("states_per_second"),
            r.get("peak_rss_mib"),
            r.get("bytes_per_state"),
        ]
        for r in document["runs"]
        if "skipped" not in r
    ]
    ratio_lines = []
    runs = {(r["model"], r["tool"], r["workers"]): r for r in document["runs"] if "skipped" not in r}
    for (model, tool, workers), run in runs.items():
        one = runs.get((model, tool, 1))
        if workers > 1 and one:
            ratio_lines.append(
                f"- {model} ({tool}): {workers} workers run {one['seconds'] / run['seconds']:.2f}x "
                f"faster than 1, for {run['cpu_seconds'] / one['cpu_seconds']:.2f}x the CPU"
            )
    models = sorted({r["model"] for r in document["runs"]})
    return _paragraphs(
        [
            f"## The explorer: {', '.join(models)}",
            "Each run in a fresh process (`bench/README.md` says what each model is); peak RSS "
            "sums the processes' peaks.",
            table(
                [
                    "model",
                    "tool",
                    "workers",
                    "distinct states",
                    "s",
                    "CPU s",
                    "states/s",
                    "peak RSS MiB",
                    "bytes/state",
                ],
                rows,
            ),
            "\n".join(ratio_lines),
            provenance_line(document),
        ]
    )


def liveness_section(document: dict) -> str:
    columns = [
        "configuration",
        "states",
        "edges",
        "holds",
        "seconds",
        "cpu_seconds",
        "pass_peak_mib",
        "bytes_per_state",
    ]
    rows = [[r.get(c) for c in columns] for r in document["runs"]]
    ratios = "\n".join(f"- {k.replace('_', ' ')}: {v:.2f}x" for k, v in document.get("ratios", {}).items())
    return _paragraphs(
        [
            "## Temporal properties: the graph pass on EWD840",
            "The temporal pass alone under `WF_vars(System)` (it holds, so every state and edge is "
            "looked at), in three stores, each in a fresh process; memory from a peak reset just "
            "before the pass.",
            table(columns, rows),
            ratios,
            provenance_line(document),
        ]
    )


def ray_hosts_section(document: dict) -> str:
    rows = []
    for name, pair in document["runs"].items():
        found = pair["one_host"]["found"]
        rows.append(
            [
                name,
                found["distinct_states"],
                found["states_generated"],
                found["depth"],
                pair["one_host"]["seconds"],
                pair["two_hosts"]["seconds"],
                "yes" if pair["same"] else "NO",
            ]
        )
    return _paragraphs(
        [
            "## The Ray engine across network hosts",
            "Each run on 2 partitions: on one host (`--workers 2`), and on two Ray nodes in "
            "separate network namespaces of this machine joined by `--engine ray --address` "
            "(`bench/ray_island.py`); both nodes share the machine's two cores, so the seconds show "
            "what the network and Ray cost, not what a cluster gains.",
            table(
                [
                    "run",
                    "distinct states",
                    "generated",
                    "depth",
                    "one host s",
                    "two hosts s",
                    "same counts and verdicts",
                ],
                rows,
            ),
            provenance_line(document),
        ]
    )


def fuzz_section(document: dict) -> str:
    rows = [
        [
            fault,
            cell["target"],
            cell["found_in"],
            cell["median_seconds"],
            cell["median_examples"],
            cell["median_repro_steps"],
            cell["median_shrink_seconds"],
        ]
        for fault, cell in document["faults"].items()
    ]
    return _paragraphs(
        [
            "## Fuzzing the reference runtime's faults",
            f"Per fault, over seeds {document['seeds']} with at most {document['max_seconds']:.0f} s "
            "each: in how many seeds `pymc-resume fuzz reference --fault F` found the fault's target "
            "clause, and medians over those seeds.",
            table(
                ["fault", "target", "found", "s to first failure", "examples", "repro steps", "shrink s"],
                rows,
            ),
            provenance_line(document),
        ]
    )


TLC = """## Validated against TLC

Not a measurement that drifts, but checked on every CI run: `tests/explore/test_tlc_counts.py`
holds the explorer's distinct-state counts (and, where recorded, generated states and depth)
against TLC's for the tlaplus/Examples specifications ported under `examples/`, and
`tests/explore/test_tlc_liveness.py` holds temporal verdicts under fairness against TLC 2.20's.
docs/tlc.md lists where the semantics differ from TLC's and why."""

SECTIONS: dict[str, Callable[[dict], str]] = {
    "suite": suite_section,
    "bridge": bridge_section,
    "explore": explore_section,
    "liveness": liveness_section,
    "ray_hosts": ray_hosts_section,
    "fuzz": fuzz_section,
}


def page(results: Path = RESULTS) -> str:
    """The page: the sections in SECTIONS' order, each bench's files in name order."""
    documents = [json.loads(path.read_text()) for path in sorted(results.glob("*.json"))]
    parts = [INTRO]
    for bench, render in SECTIONS.items():
        parts += [render(d) for d in documents if d.get("bench") == bench]
    parts.append(TLC)
    return "\n\n".join(part.strip() for part in parts) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs")
    args = parser.parse_args(argv)
    text = page()
    if args.check:
        if PAGE.read_text() != text:
            print(f"{PAGE} differs from bench/results/: run python bench/measurements.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
