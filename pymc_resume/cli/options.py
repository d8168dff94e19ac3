"""Option types shared by the commands: values a user can mistype get one line, exit 2."""

from __future__ import annotations

import json
import math

import click

from pymc_resume.checking.check import MAX_WORKERS as MAX_WORKERS  # a snapshot's limit too

# Most client steps per fuzzed example (`--steps`): a thousand already takes tens of seconds an
# example; past it, a number is a mistake, not a plan.
MAX_STEPS = 1000


class Seconds(click.ParamType):
    """A finite number of seconds within [low, high]: `nan`, `inf` and negatives are refused
    (a nan deadline never expires; an infinite one is a hang)."""

    name = "seconds"

    def __init__(self, low: float = 0.0, high: float = 7 * 24 * 3600.0) -> None:
        self.low, self.high = low, high

    def convert(self, value, param, ctx) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        else:
            try:
                seconds = float(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not self.low <= seconds <= self.high:
            self.fail(f"{value!r} is not a number of seconds from {self.low:g} to {self.high:g}", param, ctx)
        return seconds


class AdapterOption(click.ParamType):
    """`KEY=VALUE`, one keyword argument of the adapter's constructor: the value is read as a
    JSON scalar when it parses as one (`3`, `0.5`, `true`, `null`, `"text"`), else taken as the
    string it is (`sqlite`). Whether the adapter takes the key is checked later, against its
    constructor (`bridge.hosting.registry.check_options`)."""

    name = "key=value"

    def convert(self, value, param, ctx) -> tuple[str, object]:
        if isinstance(value, tuple):
            return value
        key, equals, text = str(value).partition("=")
        if not equals or not key.strip().isidentifier():
            self.fail(f"{value!r} is not KEY=VALUE with KEY an identifier", param, ctx)
        return key.strip(), _json_scalar(text)


def _json_scalar(text: str) -> object:
    """The JSON scalar `text` spells, or `text` itself (a bare word, or JSON that is not a scalar)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, (dict, list)) or (isinstance(value, float) and not math.isfinite(value)):
        return text
    return value


def adapter_options(pairs, fixed: dict | None = None) -> dict:
    """The constructor options of repeated `--adapter-option KEY=VALUE` (the last of a key
    wins), over `fixed` (options another flag sets, such as `--fault`)."""
    options = dict(fixed or {})
    options.update(dict(pairs))
    return options


def adapter_option_flag(function):
    """The `--adapter-option KEY=VALUE` flag (repeatable), shared by `fuzz` and `profile`."""
    return click.option(
        "--adapter-option",
        "adapter_option_pairs",
        type=AdapterOption(),
        multiple=True,
        metavar="KEY=VALUE",
        help="A keyword argument of the adapter's constructor (repeatable); VALUE is read as a JSON "
        "scalar when it parses as one, else as a string.",
    )(function)


def simulation_flags(function):
    """`--simulate` and its options (`--seed`, `--depth`, `--walks`), shared by `check` and
    `explore`."""
    flags = [
        click.option(
            "--simulate",
            is_flag=True,
            help="Take seeded random walks instead of enumerating every state (for "
            "bounds too large to enumerate): finds violations, proves nothing; "
            "traces are walks, not promised shortest.",
        ),
        click.option(
            "--seed",
            type=click.IntRange(min=0),
            default=None,
            help="With --simulate: the walks' seed; a seed gives the same walks  [default: 0].",
        ),
        click.option(
            "--depth",
            type=click.IntRange(min=1),
            default=None,
            help="With --simulate: steps a walk takes at most  [default: 100].",
        ),
        click.option(
            "--walks",
            type=click.IntRange(min=1),
            default=None,
            help="With --simulate: walks to take (and --max-seconds, whichever comes "
            "first)  [default: 1000 without --max-seconds, else no limit].",
        ),
    ]
    return _stacked(function, flags)


def _stacked(function, flags: list):
    """`function` under `flags`, listed in the order `--help` shows them."""
    for flag in reversed(flags):
        function = flag(function)
    return function


def budget_flags(function):
    """`--max-seconds`, `--shrink-seconds` and `--no-shrink`, shared by `fuzz` and `profile`."""
    return _stacked(
        function,
        [
            click.option(
                "--max-seconds",
                type=Seconds(low=1.0),
                default=None,
                metavar="SECONDS",
                help="Stop the whole run (every configuration of a profile) after this long and "
                "report what it found  [default: no limit].",
            ),
            click.option(
                "--shrink-seconds",
                type=Seconds(low=0.0),
                default=None,
                metavar="SECONDS",
                help="Stop shrinking one violation after this long (Hypothesis's pass, then the "
                "step pass of each clause it violates)  [default: no limit].",
            ),
            click.option(
                "--no-shrink",
                "no_shrink",
                is_flag=True,
                help="Report each violation's failing steps as found, without minimizing them "
                "(every minimizing replay is a full run of real processes).",
            ),
        ],
    )


# Most runs side by side (`--jobs`): each holds a host, a work folder and, for a framework on
# PostgreSQL, a connection; past this a number is a mistake, not a plan.
MAX_JOBS = 64


def fresh_hosts_flag(function):
    """`--fresh-hosts`, shared by every command that hosts adapters: whether hosts come from a
    template."""
    return click.option(
        "--fresh-hosts",
        is_flag=True,
        help="Fork every adapter host from this process, importing the framework anew, "
        "instead of from a template that imported it once (slower; for comparing).",
    )(function)


def host_flags(function):
    """`--jobs N` and `--fresh-hosts`, shared by `fuzz`, `profile` and `replay`: how many
    independent runs go side by side, and whether hosts come from a template."""
    jobs = click.option(
        "--jobs",
        type=click.IntRange(min=1, max=MAX_JOBS),
        default=None,
        help="Independent runs side by side (scenarios, fuzz shards, replays); the "
        "verdicts are the same for any number  [default: the machine's cores].",
    )
    return jobs(fresh_hosts_flag(function))


def jobs_or_cores(jobs: int | None) -> int:
    """`--jobs`, or this machine's cores (the ones this process may run on)."""
    if jobs is not None:
        return jobs
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _not_empty(ctx, param, value):
    """A folder option given as "" would mean the current directory: refused."""
    if value is not None and not str(value).strip():
        raise click.BadParameter("an empty path is not a folder", ctx=ctx, param=param)
    return value


def snapshot_flags(recovered_from_checkpoint: str):
    """`--max-states`, `--max-memory`, `--checkpoint-dir`, `--checkpoint-every` and `--recover`,
    shared by `check` and `explore`; `recovered_from_checkpoint` names what a recovery takes
    from the checkpoint rather than from the command line."""
    flags = [
        click.option(
            "--max-states",
            type=click.IntRange(min=1),
            default=None,
            help="Stop after this many distinct states (unproved properties are 'skipped').",
        ),
        click.option(
            "--max-memory",
            type=click.IntRange(min=64),
            default=None,
            metavar="MIB",
            help="Stop cleanly, with the counts so far, before the run's resident memory (every "
            "process) exceeds this.",
        ),
        click.option(
            "--checkpoint-dir",
            type=click.Path(file_okay=False),
            callback=_not_empty,
            default=None,
            help="Save the explorer's own state here between levels, atomically (the first "
            "snapshot after the first level).",
        ),
        click.option(
            "--checkpoint-every",
            type=Seconds(low=0.0),
            default=None,
            metavar="SECONDS",
            help="The wait between snapshots grows from 1 s up to this (0: after every level), "
            "and is at least nine times what the last snapshot took, so that snapshots take "
            "at most a tenth of the run  "
            "[default: 60, or the recovered run's].",
        ),
        click.option(
            "--recover",
            "recover_dir",
            type=click.Path(file_okay=False),
            callback=_not_empty,
            default=None,
            help="Continue the run checkpointed in this folder (and keep checkpointing there); "
            f"{recovered_from_checkpoint} come from the checkpoint, and so do --checkpoint-every, "
            "--max-states and --max-memory unless given again.",
        ),
    ]
    return lambda function: _stacked(function, flags)


def refuse_for_simulation(simulate: bool, simulation_only: dict, exhaustive_only: dict) -> None:
    """One line, exit 2, for an option the chosen mode does not use: `simulation_only` and
    `exhaustive_only` map an option's flag to its value (None or False when not given)."""
    if simulate:
        given = [flag for flag, value in exhaustive_only.items() if value not in (None, False)]
        if given:
            raise click.UsageError(
                f"{given[0]}: does not apply to --simulate (random walks keep no visited store)"
            )
    else:
        given = [flag for flag, value in simulation_only.items() if value is not None]
        if given:
            raise click.UsageError(f"{given[0]}: only with --simulate")


# `--exact`, shared by `check` and `explore`: the visited store (explore/store/fingerprints.py).
def json_option(what: str = "the result", again: bool = False):
    """`--json PATH` (the parameter `json_path`): where a command writes `what` as JSON,
    atomically (and, with `again`, again at every finding, so that a killed run keeps them)."""
    extra = ", and again at every finding" if again else ""
    return click.option(
        "--json",
        "json_path",
        type=click.Path(dir_okay=False),
        default=None,
        help=f"Write {what} as JSON to this path (atomically{extra}).",
    )


quiet_flag = click.option("--quiet", is_flag=True, help="No progress lines on stderr.")

exact_flag = click.option(
    "--exact",
    is_flag=True,
    help="Store whole states instead of 64-bit fingerprints: more memory, no collision possible.",
)


def engine_flags(function):
    """`--engine` and `--address`, shared by `check` and `explore`."""
    function = click.option(
        "--address",
        default=None,
        metavar="HOST:PORT",
        help="With --engine ray: join the Ray cluster there ('auto': the one this host "
        "belongs to)  [default: start a local Ray instance for the run].",
    )(function)
    return click.option(
        "--engine",
        type=click.Choice(["multiprocess", "ray"]),
        default="multiprocess",
        show_default=True,
        help="What runs the partitions: worker processes on this host, or Ray actors (the "
        "ray extra), one per partition, on a local instance or the cluster at "
        "--address.",
    )(function)


def refuse_lone_address(engine: str, address: str | None) -> None:
    """`--address` only with Ray, and only `auto` or HOST:PORT with a port Ray can dial."""
    if address is None:
        return
    if engine != "ray":
        raise click.UsageError("--address: only with --engine ray")
    if address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise click.UsageError(
            f"--address: {address[:80]!r} is not 'auto' or HOST:PORT with a port from 1 to 65535"
        )
