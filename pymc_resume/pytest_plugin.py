"""The resume contract in a framework author's own test suite: a pytest plugin.

Installed with pymc-resume (the `pytest11` entry point `pymc_resume`), it gives every suite:

- the fixture `resume_contract`: `resume_contract(adapter, **options)` fuzzes the adapter
  against the contract (`pymc-resume fuzz`'s engine) and fails the test, one paragraph per
  violated id with its reason, its minimal steps, the repro file and the command that replays it,
  ready to paste (`env PYTHONPATH=DIR pymc-resume replay FILE --allow-adapter SPEC`); it returns the run's
  `FuzzReport` when every id holds;
- the marker `@pytest.mark.resume_contract("module:Class", **options)`, or
  `resume_contract(adapter=Class, ...)` (a class as the marker's only positional argument would
  be taken by pytest as the thing the marker decorates): the same check, run as the marked
  test's first act;
- command-line options for the budget, seed and repro directory of every check in the run:
  `--resume-examples N` (default 25), `--resume-steps N` (12), `--resume-seed S` (0: runs are
  reproducible; `random` for a fresh seed), `--resume-bounds NAME|PATH` (`default`),
  `--resume-repro-dir DIR` (`pymc-resume-repros`), `--resume-step-timeout SECONDS` (30),
  `--resume-max-seconds SECONDS` (each check; default no limit), `--resume-no-shrink`.
  A check's keywords (`examples=`, `seed=`, `bounds=`, ...) override them for that check.

The terminal summary says what every check in the run did (section "resume contract"): the
adapter, the examples and steps, and each id's verdict with its reason (which examples exercised
it, or why it was skipped).

`adapter` is what `pymc-resume fuzz` takes (a built-in name, `module:Class`,
`path/to/file.py:Class`, an installed adapter's name) or an adapter class; `options` are its
constructor's keyword arguments, checked against it. Shrinking and repros need the adapter by
name, and a replay typed in a shell must find it. So a class, or a `module:Class` that is neither
built in nor installed, is named by its module path, as the command line names it
(`mypkg.adapters:MyAdapter`; a module of a package keeps its relative imports working, which a
file path would break), and the printed replay command sets `PYTHONPATH` to the folder the module
was imported from (before the run's own `PYTHONPATH`) and allows the adapter, so that it
reproduces when pasted into a shell in any directory. A module whose name does not lead to its
file from any folder is named by its file (`/abs/path/mine.py:MyAdapter`). A class defined in a
test module works either way. `adapter` may also be any
zero-argument factory (`lambda: MyAdapter(store=url)`): it is fuzzed as `contract_test_case`
does, and a violation fails the test with Hypothesis's minimal steps but no repro file (a replay
rebuilds an adapter by name).

Hypothesis keeps its files under the repro directory, never in the test's working directory:
the example database (failures saved by one run are tried first by the next) in
`DIR/hypothesis-db/<adapter>-<options>-<digest>`, one per adapter and option set, and its other
files in `DIR/.hypothesis`.

Nothing here is imported until a check runs, so the plugin costs a suite that does not use it
nothing.
"""

from __future__ import annotations

import importlib
import os
import shlex
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest

MARKER = "resume_contract"
DEFAULTS = {
    "examples": 25,
    "steps": 12,
    "seed": 0,
    "bounds": "default",
    "repro_dir": "pymc-resume-repros",
    "step_timeout": 30.0,
    "max_seconds": None,
    "shrink": True,
}
CHECK_KEYWORDS = frozenset(DEFAULTS)
SUMMARY = "resume_contract"  # the user property a check notes what it did under


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pymc-resume", "the resume contract (pymc-resume)")
    group.addoption(
        "--resume-examples",
        type=int,
        default=None,
        metavar="N",
        help="Fuzzed examples per resume_contract check (default 25).",
    )
    group.addoption(
        "--resume-steps",
        type=int,
        default=None,
        metavar="N",
        help="Most client steps per example (default 12).",
    )
    group.addoption(
        "--resume-seed",
        default=None,
        metavar="SEED",
        help="Hypothesis seed of every check (default 0), or 'random'.",
    )
    group.addoption(
        "--resume-bounds",
        default=None,
        metavar="NAME|PATH",
        help="Bounds whose workflow, values and processes to use (default 'default').",
    )
    group.addoption(
        "--resume-repro-dir",
        default=None,
        metavar="DIR",
        help="Where repros of violations are written (default ./pymc-resume-repros).",
    )
    group.addoption(
        "--resume-step-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="Stop an adapter that takes longer to build, open or run a step (default 30).",
    )
    group.addoption(
        "--resume-max-seconds",
        type=float,
        default=None,
        metavar="SECONDS",
        help="Stop each check after this long and judge what it saw (default no limit).",
    )
    group.addoption(
        "--resume-no-shrink",
        action="store_true",
        default=False,
        help="Keep each violation's failing steps as found, without minimizing them.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(adapter=..., **options): fuzz the adapter against the resume contract first "
        "(pymc-resume's pytest plugin)",
    )


@attrs.frozen
class Settings:
    """One check's budget, seed and outputs: the command line's, then the check's keywords."""

    examples: int
    steps: int
    seed: int | None
    bounds: str
    repro_dir: str
    step_timeout: float
    max_seconds: float | None
    shrink: bool

    @classmethod
    def of(cls, config: pytest.Config, overrides: dict) -> Settings:
        given = {
            "examples": config.getoption("--resume-examples"),
            "steps": config.getoption("--resume-steps"),
            "seed": _seed(config.getoption("--resume-seed")),
            "bounds": config.getoption("--resume-bounds"),
            "repro_dir": config.getoption("--resume-repro-dir"),
            "step_timeout": config.getoption("--resume-step-timeout"),
            "max_seconds": config.getoption("--resume-max-seconds"),
            "shrink": False if config.getoption("--resume-no-shrink") else None,
        }
        values = {key: DEFAULTS[key] if value is None else value for key, value in given.items()}
        return cls(**{**values, **overrides})


def _seed(text: str | None) -> int | None | str:
    if text is None:
        return None  # the default applies
    if text == "random":
        return "random"
    try:
        return int(text)
    except ValueError:
        raise pytest.UsageError(f"--resume-seed: {text!r} is neither an integer nor 'random'") from None


def adapter_spec(adapter) -> str:
    """The spec `pymc-resume fuzz` takes for `adapter`, in a form a shell can replay: a built-in
    or installed adapter as it is named; a class, or a `module:Class` that is neither, by its
    module path when the module's name leads to its file from some folder (`import_root`), else
    by its file."""
    if isinstance(adapter, type):
        if "<locals>" in adapter.__qualname__:
            raise pytest.UsageError(
                f"resume_contract: {adapter.__qualname__} is defined inside a function; "
                "define the adapter class at module level so replays can import it"
            )
        spec = f"{adapter.__module__}:{adapter.__qualname__}"
    elif isinstance(adapter, str):
        spec = adapter
    else:
        raise pytest.UsageError(
            f"resume_contract: expected an adapter class, spec or factory, not {type(adapter).__name__}"
        )
    return spec if is_known(spec) else by_module(spec)


def is_known(spec: str) -> bool:
    """Whether `spec` names a built-in or installed adapter (a replay needs no --allow-adapter)."""
    from pymc_resume.bridge.hosting.registry import BUILT_IN, installed_adapters

    installed = installed_adapters()
    return spec in {*BUILT_IN, *BUILT_IN.values(), *installed, *installed.values()}


def by_module(spec: str) -> str:
    """`module:Class` as it is when the module (imported here, as pytest imported it) is found
    by its name from the folder `import_root` gives, else as `/absolute/path/module.py:Class`; a
    file spec made absolute; a spec whose module is not found as it was given."""
    module_name, colon, name = spec.rpartition(":")
    if not colon or not module_name:
        return spec
    if module_name.endswith(".py") or "/" in module_name:
        return f"{Path(module_name).resolve()}:{name}"
    module = _module(module_name)
    if module is None:
        return spec  # fuzzing it says what is wrong, in one line
    if import_root(module) is not None:
        return spec
    file = getattr(module, "__file__", None)
    return f"{Path(file).resolve()}:{name}" if file else spec


def _module(name: str):
    try:
        return sys.modules.get(name) or importlib.import_module(name)
    except Exception:
        return None


def import_root(module) -> Path | None:
    """The folder from which `module` is imported by its name and finds its own file
    (`/src` for `mypkg.sub.mod` in `/src/mypkg/sub/mod.py`), or None (no file, or a name that
    does not lead to it: a module loaded from a path under another name)."""
    file = getattr(module, "__file__", None)
    parts = module.__name__.split(".")
    if not file or not all(part.isidentifier() for part in parts):
        return None
    path = Path(file).resolve()
    package = path.name == "__init__.py"  # mypkg/__init__.py is the package mypkg
    depth = len(parts) if package else len(parts) - 1
    if depth >= len(path.parents):
        return None
    root = path.parents[depth]
    expected = (
        root.joinpath(*parts, "__init__.py") if package else root.joinpath(*parts[:-1], parts[-1] + ".py")
    )
    return root if expected == path else None


def replay_command(repro: str, spec: str) -> str:
    """The command that replays `repro`, as a shell takes it from anywhere: absolute paths, the
    adapter allowed when it is neither built in nor installed, its module's folder on
    `PYTHONPATH` when it is named by module path (`env PYTHONPATH=... `: an assignment survives
    quoting only as an argument of `env`), and `pymc-resume` as this environment runs it (the
    script beside this Python, else this Python with -m)."""
    script = shutil.which("pymc-resume")
    here = Path(sys.executable).parent
    runner = (
        ["pymc-resume"] if script and Path(script).parent == here else [sys.executable, "-m", "pymc_resume"]
    )
    command = [*runner, "replay", str(Path(repro).resolve())]
    if is_known(spec):
        return shlex.join(command)
    module_name = spec.rpartition(":")[0]
    module = None if module_name.endswith(".py") or "/" in module_name else sys.modules.get(module_name)
    root = None if module is None else import_root(module)
    prefix = []
    if root is not None:
        search = [str(root), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        prefix = ["env", "PYTHONPATH=" + os.pathsep.join(dict.fromkeys(search))]
    return shlex.join([*prefix, *command, "--allow-adapter", spec])


@contextmanager
def hypothesis_files_in(directory: Path):
    """Hypothesis's own files (its constants cache; the default database, unused here) under
    `directory` while a check runs, then back where they were."""
    from hypothesis.configuration import set_hypothesis_home_dir, storage_directory

    before = storage_directory(intent_to_write=False).home_directory
    set_hypothesis_home_dir(directory)
    try:
        yield
    finally:
        set_hypothesis_home_dir(before)


def check(node: pytest.Item, adapter, **keywords):
    """Fuzz `adapter` against the contract; fail the test on a violation or a broken adapter.
    What the check did is noted on the test (`user_properties`) for the terminal summary."""
    config = node.config
    if callable(adapter) and not isinstance(adapter, (str, type)):
        return check_factory(node, adapter, **keywords)
    from pymc_resume.bridge.fuzzing.budget import Budget
    from pymc_resume.bridge.fuzzing.fuzz import run_fuzz
    from pymc_resume.errors import PymcResumeError
    from pymc_resume.model.bounds import BoundsError, load_bounds

    overrides = {key: keywords.pop(key) for key in list(keywords) if key in CHECK_KEYWORDS}
    settings = Settings.of(config, overrides)
    spec = adapter_spec(adapter)
    seed = None if settings.seed == "random" else settings.seed
    try:
        bounds = load_bounds(settings.bounds)
        with hypothesis_files_in(Path(settings.repro_dir) / ".hypothesis"):
            report = run_fuzz(
                spec,
                keywords,
                bounds,
                examples=settings.examples,
                steps=settings.steps,
                seed=seed,
                repro_dir=settings.repro_dir,
                use_database=True,
                step_timeout=settings.step_timeout,
                shrink=settings.shrink,
                budget=Budget(settings.max_seconds, None),
            )
    except (BoundsError, PymcResumeError) as error:
        pytest.fail(f"resume contract: {error}", pytrace=False)
    node.user_properties.append((SUMMARY, checked_text(report)))
    if report.error is not None:
        pytest.fail(f"resume contract: adapter {spec!r}: {report.error}", pytrace=False)
    if report.violated:
        pytest.fail(violation_text(report), pytrace=False)
    return report


def check_factory(node: pytest.Item, factory, **keywords) -> None:
    """Fuzz the adapters a zero-argument `factory` builds (`contract_test_case`): a violation
    fails the test with the clause and Hypothesis's minimal steps. No repro file: a replay
    rebuilds its adapter by name, which a factory does not have."""
    config = node.config
    from pymc_resume.bridge.fuzzing.machine import contract_test_case
    from pymc_resume.bridge.judging.session import AdapterFailure, Violation

    unknown = sorted(set(keywords) - CHECK_KEYWORDS)
    if unknown:
        raise pytest.UsageError(
            f"resume_contract: a factory takes no adapter options ({', '.join(unknown)}): "
            "build them into the factory"
        )
    settings = Settings.of(config, keywords)
    seed = None if settings.seed == "random" else settings.seed
    case = contract_test_case(
        factory,
        bounds=settings.bounds,
        examples=settings.examples,
        steps=settings.steps,
        seed=seed,
        step_timeout=settings.step_timeout,
    )
    node.user_properties.append(
        (
            SUMMARY,
            f"a factory's adapters, {settings.examples} examples of Hypothesis's stateful test, seed "
            f"{seed}, bounds {settings.bounds!r}: every id judged on every step; no per-id evidence "
            "(pass the adapter class for it)",
        )
    )
    try:
        with hypothesis_files_in(Path(settings.repro_dir) / ".hypothesis"):
            case("runTest").runTest()
    except Violation as violation:
        pytest.fail(
            f"resume contract: {violation}\n(no repro file for a factory: pass the adapter class and "
            f"its options to get one)",
            pytrace=False,
        )
    except AdapterFailure as failure:
        pytest.fail(f"resume contract: the adapter failed: {failure}", pytrace=False)


def violation_text(report) -> str:
    """Each violated id: its reason, minimal steps and repro files."""
    from pymc_resume.bridge.judging.session import describe_step

    lines = [
        f"resume contract: adapter {report.adapter!r} ({report.version}) violates "
        f"{', '.join(report.violated)} (seed {report.seed}, bounds {report.bounds.name!r})"
    ]
    for clause_id in report.violated:
        result = report.clauses[clause_id]
        lines += ["", f"{clause_id}: {result.reason}"]
        lines += [f"  {i}. {describe_step(step)}" for i, step in enumerate(result.steps or [])]
        lines += [
            f"  repro: {result.repro}",
            f"  replay: {replay_command(result.repro, report.adapter)}",
            f"  pytest: {result.pytest}",
        ]
    return "\n".join(lines)


def checked_text(report) -> str:
    """What one check did: the adapter, the budget, and each id's verdict with its reason (which
    examples exercised it, or why it was not judged)."""
    options = ", ".join(f"{k}={v}" for k, v in sorted(report.options.items()) if v is not None)
    lines = [
        f"adapter {report.adapter!r} ({report.version}){f' [{options}]' if options else ''}: "
        f"{report.examples} examples, {report.steps} steps, seed {report.seed}, bounds {report.bounds.name!r}"
    ]
    lines += [f"  {result.verdict} {cid}: {result.reason}" for cid, result in report.clauses.items()]
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The section "resume contract": every check of the run, passed or failed, and what it did
    (read from the tests' reports, so that it works under pytest-xdist too)."""
    checks = [
        (report.nodeid, report.outcome, text)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, text in getattr(report, "user_properties", ())
        if name == SUMMARY
    ]
    if not checks:
        return
    terminalreporter.section("resume contract")
    for nodeid, outcome, text in sorted(checks):
        terminalreporter.write_line(f"{nodeid} ({outcome}): {text}")


@pytest.fixture
def resume_contract(request: pytest.FixtureRequest):
    """`resume_contract(adapter, **options)`: fuzz the adapter against the resume contract."""
    return lambda adapter, **keywords: check(request.node, adapter, **keywords)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """A test marked `resume_contract(spec, **options)` or `resume_contract(adapter=Class, ...)`
    runs the check before its body."""
    for marker in item.iter_markers(MARKER):
        keywords = dict(marker.kwargs)
        adapters = [*marker.args, *([keywords.pop("adapter")] if "adapter" in keywords else [])]
        if len(adapters) != 1:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{MARKER} takes one adapter (a spec, or "
                "adapter=Class) and keywords"
            )
        check(item, adapters[0], **keywords)
