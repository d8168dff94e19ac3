"""Bad input, as an attacker or a careless user gives it: generated bounds files, option values,
repro files, adapter specs, output paths and checkpoint folders against the command line; then
hostile snapshot files (devices, FIFOs, sparse giants, cut or garbled copies of a real
snapshot), misbehaving race adapters, huge numbers, deep nesting and escape sequences; then
`explore`'s own: edited recovery folders (another target, flags, limits, giants, links),
replay traces of every wrong shape, and models that exit or hang while they are validated.

Every case is built to be unusable, so every one must end the same way: exit 2, one line on
stderr naming what is wrong, no traceback, no "internal error" (a bug of ours), nothing printed
as a result, and nothing left behind (no file beside the inputs, no child process). The cases run
in-process through click's runner, a few milliseconds each, so the quick set affords hundreds;
the slow set (`-m slow`) runs more of each. The cases that need a real process (a FIFO, a
deadline) are in `test_untrusted_input.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import string
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pymc_resume.bridge.repro.format import OPTIONAL, REQUIRED
from pymc_resume.cli import main
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.contract import CLAUSE_IDS

QUICK = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
THOROUGH = settings(QUICK, max_examples=250)

SMALL = load_bounds("small").as_json()
VALID_BOUNDS_TOML = """nodes = ["step", "gated"]
values = 1
processes = 1
resumes = 1
crashes = 0
forks = 0
invalid_updates = 0
"""


def _children() -> set[int]:
    """This process's live child processes (from /proc)."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                found.add(int(entry))
    return found


CASE_DEADLINE = 15  # seconds: input that cannot run must not make a command work (or hang) that long


class TookTooLong(BaseException):
    """A case ran past its deadline: it hangs, or did work on input that cannot run."""


def invoke_within_deadline(args: list[str], folder: Path):
    """The CLI's result on `args`, run in `folder`; TookTooLong (as its exception) past
    CASE_DEADLINE seconds."""
    cwd = os.getcwd()
    os.chdir(folder)

    def too_long(signum, frame):
        raise TookTooLong(f"{args}: still running after {CASE_DEADLINE}s")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(CASE_DEADLINE)
    try:
        return CliRunner().invoke(main, args, catch_exceptions=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(cwd)


def run_refused(args: list[str], folder: Path) -> str:
    """Run the CLI on `args` in `folder`; assert it refused them cleanly (see the module doc)."""
    before = set(folder.rglob("*"))
    children = _children()
    result = invoke_within_deadline(args, folder)
    assert not isinstance(result.exception, TookTooLong), f"{args}: {result.exception}"
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{args}: raised {result.exception!r}"
    )
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (args, result.exit_code, result.stdout[-500:], result.stderr[-500:])
    assert len(lines) == 1 and lines[0].startswith("pymc-resume: error: "), (args, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, (args, result.stderr)
    assert result.stdout == "", (args, result.stdout[-500:])
    assert set(folder.rglob("*")) == before, (args, set(folder.rglob("*")) - before)
    assert _children() <= children, args
    return lines[0]


# -- 1. bound files ---------------------------------------------------------------------------

BOUND_KEYS = ("nodes", "values", "processes", "resumes", "crashes", "forks", "invalid_updates")
WRONG_VALUES = st.sampled_from(['"two"', "-1", "99", "1.5", "true", "[]", "{}", '""', "9999999999999999999"])


@st.composite
def bad_bound_files(draw) -> bytes:
    """A bound file with one thing wrong: a key missing or unknown, a value of the wrong type or
    out of range, an unknown node kind, text that is not TOML or not UTF-8."""
    lines = dict(line.split(" = ", 1) for line in VALID_BOUNDS_TOML.strip().splitlines())
    mistake = draw(st.sampled_from(["missing", "unknown", "value", "node", "not-toml", "not-utf8", "nodes"]))
    if mistake == "missing":
        del lines[draw(st.sampled_from(BOUND_KEYS))]
    elif mistake == "unknown":
        lines[
            draw(
                st.from_regex(r"[a-z_]{1,12}", fullmatch=True).filter(
                    lambda k: k not in BOUND_KEYS and k != "description"
                )
            )
        ] = "1"
    elif mistake == "value":
        lines[draw(st.sampled_from(BOUND_KEYS[1:]))] = draw(WRONG_VALUES)
    elif mistake == "node":
        lines["nodes"] = json.dumps(
            [
                "step",
                draw(
                    st.text(string.ascii_letters + "-", max_size=12).filter(
                        lambda n: n not in ("step", "effect", "interrupt", "gated", "effect-then-interrupt")
                    )
                ),
            ]
        )
    elif mistake == "nodes":
        lines["nodes"] = draw(st.sampled_from(["[]", '"step"', "1", json.dumps(["step"] * 9)]))
    text = "\n".join(f"{k} = {v}" for k, v in lines.items()) + "\n"
    if mistake == "not-toml":
        text = draw(st.sampled_from(["nodes = [", "= 1", "[[[", "values == 1"])) + "\n" + text
    data = text.encode()
    if mistake == "not-utf8":
        data = draw(st.binary(min_size=1, max_size=8).filter(lambda b: not _utf8(b))) + data
    return data


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _bad_bounds(tmp_path: Path, data: bytes, command: list[str]) -> None:
    folder = _fresh(tmp_path)
    (folder / "b.toml").write_bytes(data)
    run_refused([*command, "--bounds", "b.toml"], folder)


@QUICK
@given(
    data=bad_bound_files(),
    command=st.sampled_from([["check", "--quiet"], ["fuzz", "reference"], ["profile", "reference"]]),
)
def test_bad_bound_files_are_refused(tmp_path, data, command):
    _bad_bounds(tmp_path, data, command)


# -- 2. option values -------------------------------------------------------------------------

NOT_NUMBERS = st.sampled_from(["", "x", "nan", "inf", "-inf", "1e999", "0x10", "1,2", " ", "--", "3 4"])
NEGATIVE_OR_ZERO = st.sampled_from(["0", "-1", "-5", "-0.5"])

BAD_OPTIONS = st.one_of(
    st.tuples(st.just(["check", "--quiet", "--workers"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(st.just(["check", "--quiet", "--max-states"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(st.just(["check", "--quiet", "--max-memory"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(
        st.just(["check", "--quiet", "--checkpoint-every"]), st.sampled_from(["nan", "inf", "-1", "x"])
    ),
    st.tuples(
        st.just(["check", "--quiet", "--mutant"]), st.text(string.ascii_letters, min_size=1, max_size=10)
    ),
    st.tuples(st.just(["check", "--quiet", "--bounds"]), st.sampled_from(["nosuch", "", "small.toml", "/"])),
    st.tuples(st.just(["fuzz", "reference", "--examples"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(st.just(["fuzz", "reference", "--steps"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(st.just(["fuzz", "reference", "--step-timeout"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(st.just(["fuzz", "reference", "--seed"]), st.sampled_from(["x", "1.5", "nan", ""])),
    st.tuples(
        st.just(["fuzz", "reference", "--fault"]), st.text(string.ascii_letters, min_size=1, max_size=10)
    ),
    st.tuples(st.just(["profile", "reference", "--examples"]), st.one_of(NOT_NUMBERS, st.just("-1"))),
    st.tuples(
        st.just(["profile", "reference", "--config"]), st.text(string.ascii_letters, min_size=1, max_size=10)
    ),
    st.tuples(st.just(["profile", "reference", "--step-timeout"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(
        st.just(["race", "reference", "--k"]), st.sampled_from(["", "1", "0", "-2", "x", "2,x", ",", "2.5"])
    ),
    st.tuples(st.just(["race", "reference", "--trials"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(st.just(["race", "reference", "--timeout"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(st.just(["matrix", "--workers"]), st.one_of(NOT_NUMBERS, NEGATIVE_OR_ZERO)),
    st.tuples(st.just(["matrix", "--bounds"]), st.sampled_from(["nosuch", ""])),
)


@QUICK
@given(case=BAD_OPTIONS)
def test_bad_option_values_are_refused(tmp_path, case):
    command, value = case
    run_refused([*command, value], _fresh(tmp_path))


# -- 3. repro files ---------------------------------------------------------------------------

REPRO_KEYS = (*REQUIRED, *OPTIONAL)
START = {"action": "start", "thread": 0, "crash": None}
VALID_REPRO = {
    "format": "pymc-resume-repro/1",
    "adapter": "reference",
    "adapter_options": {"fault": "persist-unvalidated"},
    "bounds": SMALL,
    "clause": "checkpoint-validity",
    "steps": [START, {"action": "update", "thread": 0, "value": -1}],
}
BAD_STEPS = st.sampled_from(
    [
        [],
        None,
        "start",
        [None],
        [{}],
        [{"action": "start"}],
        [{"action": "start", "thread": -1, "crash": None}],
        [{"action": "start", "thread": 1, "crash": None}],
        [{"action": "resume", "thread": 0, "value": 1, "crash": None}],
        [START, {"action": "resume", "thread": 0, "value": 99, "crash": None}],
        [START, {"action": "resume", "thread": 0, "value": True, "crash": None}],
        [START, {"action": "explode", "thread": 0}],
        [START, {"action": "fork", "thread": 0, "checkpoint": -1, "intent": "replay", "value": None}],
        [START, {"action": "fork", "thread": 0, "checkpoint": 0, "intent": "sideways", "value": None}],
        [START, {"action": "resume-together", "thread": 0, "values": [1] * 50, "window": None}],
        [START, {"action": "resume-together", "thread": 0, "values": [1, 1], "window": "whenever"}],
        [{"action": "start", "thread": 0, "crash": {"stage": 99, "when": "after-commit"}}],
        [{"action": "start", "thread": 0, "crash": {"stage": 0, "when": "never"}}],
        [{"action": "start", "thread": 0, "crash": None, "code": "os.system('x')"}],
        [START] * 1000,
    ]
)
BAD_FIELDS = st.one_of(
    st.tuples(st.just("format"), st.sampled_from([None, 1, "pymc-resume-repro/99", "", []])),
    st.tuples(
        st.just("adapter"),
        st.sampled_from(
            [
                "os:system",
                "shutil:rmtree",
                "subprocess:Popen",
                "builtins:eval",
                "",
                None,
                5,
                ".x:Y",
                "nosuch",
                "/etc/passwd:X",
            ]
        ),
    ),
    st.tuples(
        st.just("adapter_options"),
        st.sampled_from(
            [
                [],
                "fault",
                {"fault": ["x"]},
                {"fault": {"a": 1}},
                {"fault": "nosuch"},
                {"command": "touch x"},
                {"fault": 1e400},
                {"1bad": 1},
            ]
        ),
    ),
    st.tuples(
        st.just("bounds"),
        st.sampled_from(
            [
                None,
                [],
                {},
                {**SMALL, "nodes": []},
                {**SMALL, "values": 0},
                {**SMALL, "forks": 99},
                {**SMALL, "nodes": ["rm -rf"]},
            ]
        ),
    ),
    st.tuples(
        st.just("clause"),
        st.one_of(
            st.text(max_size=20).filter(lambda c: c not in CLAUSE_IDS),
            st.sampled_from([None, 1, ["liveness"]]),
        ),
    ),
    st.tuples(st.just("steps"), BAD_STEPS),
    st.tuples(st.just("replay_attempts"), st.sampled_from([0, -1, 21, 10**6, "10", 1.5, True])),
    st.tuples(st.just("seed"), st.sampled_from(["1", 1.5, [1]])),
    st.tuples(st.just("violated_at"), st.sampled_from([-1, "later", 10**9, 1.5])),
    st.tuples(
        st.text(string.ascii_lowercase, min_size=1, max_size=10).filter(
            lambda k: k not in VALID_REPRO and k not in REPRO_KEYS
        ),
        st.just("surprise"),
    ),
)


@st.composite
def bad_repro_files(draw) -> bytes:
    kind = draw(st.sampled_from(["field", "field", "field", "bytes", "json"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64).filter(lambda b: not _json(b)))
    if kind == "json":
        return json.dumps(
            draw(st.sampled_from([[], 1, "repro", None, {"format": "pymc-resume-repro/1"}]))
        ).encode()
    key, value = draw(BAD_FIELDS)
    return json.dumps({**VALID_REPRO, key: value}).encode()


def _json(data: bytes) -> bool:
    try:
        json.loads(data)
    except ValueError:
        return False
    return True


@QUICK
@given(data=bad_repro_files())
def test_bad_repro_files_are_refused(tmp_path, data):
    folder = _fresh(tmp_path)
    (folder / "repro.json").write_bytes(data)
    run_refused(["replay", "repro.json"], folder)


def test_the_valid_repro_the_cases_start_from_does_replay(tmp_path):
    """The base of the generated repros is valid: each case fails for its one mistake."""
    (tmp_path / "repro.json").write_text(json.dumps(VALID_REPRO))
    result = CliRunner().invoke(main, ["replay", str(tmp_path / "repro.json")])
    assert result.exit_code == 1 and result.stdout.startswith("reproduces"), result.output


# -- 4. adapter specs -------------------------------------------------------------------------

ADAPTER_FILES = {
    "raises.py": "raise RuntimeError('broken at import')\n",
    "exits.py": "raise SystemExit(0)\n",
    "syntax.py": "def (:\n",
    "noclass.py": "Adapter = 42\n",
    "partial.py": "class Adapter:\n    name = 'partial'\n    def open(self, setup): pass\n",
}


@st.composite
def bad_adapter_specs(draw) -> str:
    # Module names no installed package has (never import a real module by chance).
    nosuch = draw(st.from_regex(r"pymc_nosuch_[a-z]{1,8}(\.[a-z]{1,5})?", fullmatch=True))
    return draw(
        st.sampled_from(
            [
                "",
                ":",
                "::",
                ".x:Y",
                "..x:Y",
                f"{nosuch}:Adapter",
                f"{nosuch}",
                f"{nosuch}.py:Adapter",
                "pymc_resume:Nope",
                "pymc_resume.bridge.judging.session:Session",
                "os:system",
                "os.path:join",
                "1abc:X",
                "a b:C",
                "x:",
                ":Y",
                "x:1Y",
                *(f"{name}:Adapter" for name in ADAPTER_FILES),
                "missing/dir/a.py:A",
            ]
        )
    )


@QUICK
@given(spec=bad_adapter_specs(), command=st.sampled_from(["fuzz", "profile", "race"]))
def test_bad_adapter_specs_are_refused(tmp_path, spec, command):
    folder = _fresh(tmp_path)
    for name, text in ADAPTER_FILES.items():
        (folder / name).write_text(text)
    run_refused([command, spec], folder)


# -- 5. output paths --------------------------------------------------------------------------


@st.composite
def bad_output_paths(draw, folder: Path) -> str:
    return draw(
        st.sampled_from(
            [
                str(folder),  # a folder, not a file
                str(folder / "file.txt" / "out.json"),  # under a file
                "/proc/pymc-resume-out.json",  # not writable
                "/dev/null/out.json",
                str(folder / ("x" * 300) / "out.json"),  # a name too long
            ]
        )
    )


@QUICK
@given(
    data=st.data(),
    command=st.sampled_from(
        [
            ["check", "--quiet", "--bounds", "b.toml"],
            ["fuzz", "reference", "--bounds", "b.toml", "--examples", "1"],
            ["matrix", "--bounds", "b.toml", "--workers", "1"],
            ["profile", "reference", "--bounds", "b.toml", "--examples", "0"],
        ]
    ),
)
def test_unwritable_outputs_are_refused_before_any_work(tmp_path, data, command):
    folder = _fresh(tmp_path)
    (folder / "b.toml").write_text(VALID_BOUNDS_TOML)
    (folder / "file.txt").write_text("a file")
    option = data.draw(st.sampled_from(["--json"] + (["--markdown"] if command[0] == "profile" else [])))
    run_refused([*command, option, data.draw(bad_output_paths(folder))], folder)


# -- 6. checkpoint folders --------------------------------------------------------------------


@st.composite
def bad_checkpoint_folders(draw) -> dict[str, bytes]:
    """Files for a checkpoint folder: a pointer to a missing or damaged snapshot, random files."""
    level = draw(st.sampled_from(["level-000003", "level-x", "../../etc", "", "level-000001"]))
    files = {"current": draw(st.sampled_from([level.encode() + b"\n", b"", b"\xff\xfe", b"current\n"]))}
    if draw(st.booleans()) and level.startswith("level-"):
        names = draw(
            st.lists(
                st.sampled_from(
                    [
                        "manifest.json",
                        "partition-0.pickle",
                        "inbound-0.pickle",
                        "partition-0.data",
                        "manifest",
                    ]
                ),
                max_size=4,
                unique=True,
            )
        )
        for name in names:
            files[f"{level}/{name}"] = draw(
                st.one_of(
                    st.binary(max_size=64),
                    st.sampled_from(
                        [
                            b"{}",
                            b"[]",
                            json.dumps({"format": 2, "partitions": 1}).encode(),
                            b"cos\nsystem\n(S'touch MARKER'\ntR.",
                            b"\x80\x04K\x01.",
                        ]
                    ),
                )
            )
    return files


@QUICK
@given(files=bad_checkpoint_folders())
def test_bad_checkpoint_folders_are_refused(tmp_path, files):
    recovery_refused(_fresh(tmp_path), files)


def recovery_refused(folder: Path, files: dict[str, bytes]) -> None:
    """Write `files` into a checkpoint folder `ck` (never outside `folder`), recover from it:
    refused cleanly, and the payload some files carry ran nothing."""
    for name, data in files.items():
        path = folder / "ck" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent.resolve().is_relative_to(folder):
            path.write_bytes(data)
    run_refused(["check", "--quiet", "--bounds", "small", "--recover", "ck"], folder)
    assert not (folder / "MARKER").exists()


# -- 7. hostile snapshot files ----------------------------------------------------------------

LEVEL = "level-000010"  # the level the snapshot below is taken at (bounds "small", 3,000 states)
SNAPSHOT_FILES = {
    "current": "current",
    "manifest": f"{LEVEL}/manifest.json",
    "partition": f"{LEVEL}/partition-0.state",
}
ESCAPES = "\x1b[2J\x1b]0;pwned\x07\r\x08\x9b31m"  # clear the screen, set the title, move the cursor


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    """A real checkpoint folder, taken once (in-process, half a second)."""
    folder = tmp_path_factory.mktemp("snapshot")
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(
            main,
            ["check", "--bounds", "small", "--quiet", "--workers", "1", "--checkpoint-dir", "ck"]
            + ["--checkpoint-every", "0", "--max-states", "3000"],
        )
    finally:
        os.chdir(cwd)
    assert result.exit_code == 2, result.output  # stopped by the state limit: a snapshot to recover
    assert (folder / "ck" / "current").read_text().strip() == LEVEL
    return folder / "ck"


def _manifest_with(text: str, pattern: str, replacement: str) -> bytes:
    import re

    changed, count = re.subn(pattern, lambda _: replacement, text, count=1)
    assert count == 1, pattern
    return changed.encode()


@st.composite
def hostile_snapshot_changes(draw) -> tuple[str, str, bytes | None]:
    """(file, how, bytes): one file of a real snapshot replaced by something hostile: a link to
    a device, a FIFO, a folder, a sparse giant, a cut or garbled copy, or (the manifest and the
    pointer) text with huge numbers, deep nesting, escape sequences or a path out of the folder."""
    target = draw(st.sampled_from(sorted(SNAPSHOT_FILES)))
    hows = ["urandom", "zero", "passwd", "fifo", "folder", "sparse", "cut", "empty", "garbage", "flip"]
    if target == "manifest":
        hows += ["deep", "digits", "huge", "negative", "nan", "escapes", "partitions"]
    if target == "current":
        hows += ["escapes", "outside", "long"]
    how = draw(st.sampled_from(hows))
    data = None
    if how in ("cut", "flip"):
        data = draw(st.floats(0.0, 0.99))  # where: a fraction of the file
    elif how == "garbage":
        data = draw(st.binary(min_size=1, max_size=256))
    elif how in ("digits", "huge"):
        data = draw(st.sampled_from(["depth", "states", "workers", "max_states", "values"]))
    return target, how, data


def _make_hostile(ck: Path, target: str, how: str, data) -> None:
    path = ck / SNAPSHOT_FILES[target]
    original = path.read_bytes()
    if how in ("urandom", "zero", "passwd", "fifo", "folder"):
        path.unlink()
        if how == "fifo":
            os.mkfifo(path)
        elif how == "folder":
            path.mkdir()
        else:
            path.symlink_to({"urandom": "/dev/urandom", "zero": "/dev/zero", "passwd": "/etc/passwd"}[how])
    elif how == "sparse":
        # A partition has no size limit of its own (explore/snapshots/snapshot.py reads it whole): a
        # moderate giant for it, 3 GiB for the pointer and the manifest, which are limited.
        with open(path, "r+b") as handle:
            handle.truncate(20 * 2**20 if target == "partition" else 3 * 2**30)
    elif how == "cut":  # (at least one byte before the trailing newline: a pointer cut there still points)
        path.write_bytes(original[: min(int(len(original) * data), len(original.rstrip()) - 1)])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(data)
    elif how == "flip":
        at = int(len(original) * data)
        path.write_bytes(original[:at] + bytes([original[at] ^ 0x5A]) + original[at + 1 :])
    elif how == "deep":
        path.write_bytes(b"[" * 100_000)
    elif how in ("digits", "huge"):
        number = "9" * 5000 if how == "digits" else str(10**30)
        path.write_bytes(_manifest_with(original.decode(), rf'"{data}": \d+', f'"{data}": {number}'))
    elif how == "negative":
        path.write_bytes(_manifest_with(original.decode(), r'"states": \d+', '"states": -5'))
    elif how == "nan":
        path.write_bytes(_manifest_with(original.decode(), r'"elapsed": [0-9.e-]+', '"elapsed": NaN'))
    elif how == "partitions":
        path.write_bytes(
            _manifest_with(original.decode(), r'"partitions": \[', '"partitions": [' + "{}, " * 40)
        )
    elif how == "escapes" and target == "manifest":
        path.write_bytes(_manifest_with(original.decode(), r'"gated"', json.dumps(ESCAPES)))
    elif how == "escapes":
        path.write_text(ESCAPES + "\n")
    elif how == "outside":
        path.write_text(f"{LEVEL}/../../../etc\n")
    elif how == "long":
        path.write_text("level-" + "9" * 5000 + "\n")


@QUICK
@given(change=hostile_snapshot_changes())
def test_hostile_snapshot_files_are_refused(tmp_path, snapshot, change):
    folder = _fresh(tmp_path)
    shutil.copytree(snapshot, folder / "ck")
    _make_hostile(folder / "ck", *change)
    run_refused(["check", "--quiet", "--bounds", "small", "--recover", "ck"], folder)


# -- 8. misbehaving race adapters -------------------------------------------------------------

RACE_ADAPTERS = """
import os, signal, sys, time
from pymc_resume.bridge.adapters.reference import ReferenceAdapter

class ExitsZero(ReferenceAdapter):
    def open(self, setup):
        os._exit(0)

class RaisesSystemExit(ReferenceAdapter):
    def start(self, *args, **kwargs):
        raise SystemExit(0)

class BlocksSignals(ReferenceAdapter):  # SIGALRM, SIGTERM and SIGINT blocked, then a hang
    def open(self, setup):
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM, signal.SIGTERM, signal.SIGINT])
        time.sleep(3600)

class DoubleForks(ReferenceAdapter):  # a grandchild in a session of its own, then a hang
    def open(self, setup):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open(os.environ["PYMC_TEST_PIDS"] + "/" + str(os.getpid()), "w"):
                    pass
                time.sleep(3600)
            os._exit(0)
        time.sleep(3600)

class ObservesNothing(ReferenceAdapter):
    def observe(self):
        return "nothing"

class StartsWithAString(ReferenceAdapter):
    def start(self, *args, **kwargs):
        return "started"

class ResumesNobody(ReferenceAdapter):
    def resume_together(self, *args, **kwargs):
        return None

class RaisesEscapes(ReferenceAdapter):
    def start(self, *args, **kwargs):
        raise RuntimeError(ESCAPES * 1000)
""".replace("ESCAPES", repr(ESCAPES))


def run_race_refused(args: list[str], folder: Path) -> str:
    """`run_refused` for `race`, which reports each cell on stderr as it goes ("race: ...") and
    prints its table: the cells that could not run, then one error line, exit 2."""
    before, workdirs = set(folder.rglob("*")), _workdirs()
    children = _children()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        result = CliRunner().invoke(main, args, catch_exceptions=True)
    finally:
        os.chdir(cwd)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (args, result.exit_code, result.stdout[-500:], result.stderr[-500:])
    errors = [line for line in lines if line.startswith("pymc-resume:")]
    assert errors == [lines[-1]] and errors[0].startswith("pymc-resume: error: "), (args, result.stderr)
    assert all(line.startswith(("race: ", "pymc-resume: error: ")) for line in lines), (args, result.stderr)
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "internal error" not in output, (args, output)
    assert not set(output) & CONTROL, (args, output[-500:])
    assert set(folder.rglob("*")) == before, (args, set(folder.rglob("*")) - before)
    assert _children() <= children, args
    assert _workdirs() <= workdirs, (args, _workdirs() - workdirs)  # each trial's folder removed
    return errors[0]


def _workdirs() -> set[str]:
    """The work folders this process owns (`bridge/hosting/workdirs.py`)."""
    from pymc_resume.bridge.hosting.workdirs import PREFIX, default_workroot

    root = Path(default_workroot() or tempfile.gettempdir())
    return {entry.name for entry in root.iterdir() if entry.name.startswith(f"{PREFIX}{os.getpid()}-")}


CONTROL = {chr(c) for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)]} - {"\n"}


@pytest.mark.parametrize(
    "adapter, says",
    [
        ("ExitsZero", "exited with status 0"),
        ("RaisesSystemExit", "SystemExit"),
        ("BlocksSignals", "did not finish within"),
        ("DoubleForks", "did not finish within"),
        ("ObservesNothing", "observe() returned a str, not an Observation"),
        ("StartsWithAString", "start() returned a str, not an Outcome"),
        ("ResumesNobody", "resume_together() returned a NoneType"),
        ("RaisesEscapes", "RuntimeError"),
    ],
)
def test_misbehaving_race_adapters_are_reported_as_the_adapters_failure(tmp_path, monkeypatch, adapter, says):
    folder, pids = _fresh(tmp_path), tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("PYMC_TEST_PIDS", str(pids))
    (folder / "racers.py").write_text(RACE_ADAPTERS)
    line = run_race_refused(
        ["race", f"racers.py:{adapter}", "--k", "2", "--trials", "1", "--timeout", "1"], folder
    )
    assert says in line and "the adapter" in line, line
    assert len(line) < 2100, len(line)
    for pid in (int(path.name) for path in pids.iterdir()):  # the double-forked grandchild died with the run
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), f"process {pid} outlived the race"


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


# -- 9. huge numbers and deep nesting ---------------------------------------------------------

HUGE = "9" * 5000
BIG = str(10**30)


def _bounds_with(key: str, value: str) -> bytes:
    lines = dict(line.split(" = ", 1) for line in VALID_BOUNDS_TOML.strip().splitlines())
    lines[key] = value
    return ("\n".join(f"{k} = {v}" for k, v in lines.items()) + "\n").encode()


def _repro_text(**changes) -> str:
    return json.dumps({**VALID_REPRO, **changes})


HUGE_OR_DEEP = st.one_of(
    st.tuples(
        st.just("bounds"),
        st.one_of(
            st.builds(
                _bounds_with, st.sampled_from(BOUND_KEYS[1:]), st.sampled_from([HUGE, BIG, "-" + HUGE])
            ),
            st.builds(
                _bounds_with, st.just("nodes"), st.sampled_from(["[" * 100_000, "[" * 1000 + "]" * 1000])
            ),
            st.just(b"x = " + b"[" * 100_000),
            st.just(b"x = " + b"{a = " * 20_000),
        ),
    ),
    st.tuples(
        st.just("repro"),
        st.sampled_from(
            [
                _repro_text(seed=0).replace('"seed": 0', f'"seed": {HUGE}'),
                _repro_text(replay_attempts=0).replace('"replay_attempts": 0', f'"replay_attempts": {HUGE}'),
                _repro_text(steps=[START, {"action": "update", "thread": 0, "value": 0}]).replace(
                    '"value": 0', f'"value": {HUGE}'
                ),
                _repro_text(steps=[{"action": "start", "thread": 0, "crash": None}]).replace(
                    '"thread": 0', f'"thread": {BIG}'
                ),
                _repro_text(adapter_options={"fault": 0}).replace('"fault": 0', '"fault": ' + "[" * 100_000),
                _repro_text(steps=[]).replace('"steps": []', '"steps": ' + "[" * 5000 + "]" * 5000),
                _repro_text(bounds=None).replace('"bounds": null', '"bounds": ' + '{"a": ' * 50_000),
                _repro_text(adapter_options={"fault": 1e308 * 10}),
            ]
        ).map(str.encode),
    ),
    st.tuples(
        st.just("options"),
        st.sampled_from(
            [
                ["check", "--quiet", "--workers", BIG],
                ["check", "--quiet", "--seed", HUGE],
                ["fuzz", "reference", "--steps", BIG],
                ["fuzz", "reference", "--seed", HUGE],
                ["profile", "reference", "--steps", BIG],
                ["race", "reference", "--k", BIG],
                ["race", "reference", "--k", f"2,{HUGE}"],
                ["race", "reference", "--k", "2", "--hosts", BIG],
                ["race", "reference", "--timeout", BIG],
                ["matrix", "--workers", BIG],
                ["replay", "repro.json", "--attempts", BIG],
                ["replay", "repro.json", "--step-timeout", HUGE],
            ]
        ),
    ),
)


@QUICK
@given(case=HUGE_OR_DEEP)
def test_huge_numbers_and_deep_nesting_are_refused(tmp_path, case):
    kind, data = case
    folder = _fresh(tmp_path)
    if kind == "bounds":
        (folder / "b.toml").write_bytes(data)
        run_refused(["check", "--quiet", "--bounds", "b.toml"], folder)
    elif kind == "repro":
        (folder / "repro.json").write_bytes(data)
        run_refused(["replay", "repro.json"], folder)
    else:
        (folder / "repro.json").write_text(json.dumps(VALID_REPRO))
        run_refused(data, folder)


# -- 10. escape sequences ---------------------------------------------------------------------

ESCAPED = st.sampled_from([ESCAPES, ESCAPES * 5000, "ok" + ESCAPES, "\x00\x1b\x7f\x85\u2028"])


@st.composite
def escaping_inputs(draw) -> tuple[str, dict[str, bytes], list[str]]:
    """(what, files, arguments): a refused input whose text (a name, a key, an option, a path)
    holds escape sequences or control characters, which the error line quotes."""
    text = draw(ESCAPED)
    kind = draw(st.sampled_from(["repro", "bounds", "spec", "path", "option"]))
    if kind == "repro":
        key, value = draw(
            st.sampled_from(
                [
                    ("adapter", text + ":A"),
                    ("adapter_options", {"fault": text}),
                    ("adapter_options", {text: 1}),
                    ("clause", text),
                    ("format", text),
                    (text, 1),
                    ("steps", [{"action": text, "thread": 0}]),
                    ("steps", [{"action": "start", "thread": 0, "crash": None, text: 1}]),
                    (
                        "steps",
                        [
                            START,
                            {"action": "resume", "thread": 0, "value": 1, "crash": None, "variant": text},
                        ],
                    ),
                    ("bounds", {**SMALL, "nodes": ["step", text]}),
                ]
            )
        )
        return (
            kind,
            {"repro.json": json.dumps({**VALID_REPRO, key: value}).encode()},
            ["replay", "repro.json"],
        )
    if kind == "bounds":
        data = _bounds_with("nodes", json.dumps(["step", text]))
        return kind, {"b.toml": data}, ["check", "--quiet", "--bounds", "b.toml"]
    text = text.replace("\x00", "")  # a command line cannot carry a NUL (argv is C strings)
    if kind == "spec":
        command = draw(st.sampled_from(["fuzz", "profile", "race"]))
        return kind, {}, [command, draw(st.sampled_from([text + ":A", "a:" + text, text]))]
    if kind == "path":
        return kind, {}, ["replay", text[:200] + ".json"]
    return (
        kind,
        {},
        draw(
            st.sampled_from(
                [
                    ["fuzz", "reference", "--fault", text],
                    ["check", "--quiet", "--mutant", text],
                    ["profile", "reference", "--config", text],
                    ["race", "reference", "--store", text],
                    ["race", "reference", "--postgres-url", text],
                    ["check", "--quiet", "--bounds", text[:200]],
                ]
            )
        ),
    )


@QUICK
@given(case=escaping_inputs())
def test_text_from_inputs_is_quoted_escaped_and_cut(tmp_path, case):
    _, files, args = case
    folder = _fresh(tmp_path)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    line = run_refused(args, folder)
    assert not set(line) & CONTROL, line[-300:]
    assert len(line) < 2200, len(line)


def test_text_from_files_in_reports_is_printed_escaped(tmp_path, snapshot):
    """Input that runs: what it prints from a file (a profile's names in `diff`, a bounds name
    from a checkpoint's manifest in `check`) is escaped and cut, in tables and lines alike."""
    from pymc_resume.cli.diff import comparison_text
    from pymc_resume.report.changes import Change, Comparison

    change = Change("worse", ESCAPES * 400, ESCAPES, "liveness", "holds", "violated", "1", "2", ESCAPES * 400)
    text = comparison_text(Comparison((change,), (), (ESCAPES * 400,)), "old.json")
    assert not set(text) & CONTROL and max(map(len, text.splitlines())) < 2200, text[:300]

    shutil.copytree(snapshot, tmp_path / "ck")
    manifest = tmp_path / "ck" / LEVEL / "manifest.json"
    document = json.loads(manifest.read_text())
    document["run"]["bounds"]["name"] = ESCAPES * 5000
    manifest.write_text(json.dumps(document))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = CliRunner().invoke(main, ["check", "--recover", "ck"])
    finally:
        os.chdir(cwd)
    output = result.stdout + result.stderr
    assert "Traceback" not in output and "internal error" not in output, output[-500:]
    assert not set(output) & CONTROL and max(map(len, output.splitlines())) < 2200, output[:300]
    assert "\\x1b[2J" in output  # the name is there, escaped


# -- 11. explore: recovery folders, replay traces, models that exit or hang -------------------

EXPLORE_MODEL = """
from pymc_resume.explore import Invariant

class Counter:
    deadlock_is_error = False
    invariants = [Invariant("below-30", lambda n: n < 30)]

    def initial_states(self):
        return [0]

    def successors(self, n):
        if n < 40:
            yield "inc", n + 1

def model():
    return Counter()
"""
# A model file that would leave MARKER behind if anything imported it.
EVIL_MODEL = "open('MARKER', 'w').close()\ndef model():\n    raise SystemExit(0)\n"
SECRET = "SECRET-LINE-of-a-file-the-pointer-links-to"


@pytest.fixture(scope="module")
def explore_run(tmp_path_factory) -> tuple[Path, str]:
    """A real `explore` checkpoint stopped by its state limit, and the trace JSON of the full
    run (`trace.json`), in one folder; and the model's TARGET."""
    folder = tmp_path_factory.mktemp("explore-run")
    (folder / "counter.py").write_text(EXPLORE_MODEL)
    target = f"{folder / 'counter.py'}:model"
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        stopped = CliRunner().invoke(
            main,
            ["explore", target, "--quiet", "--max-states", "20", "--checkpoint-dir", "ck"]
            + ["--checkpoint-every", "0"],
        )
        whole = CliRunner().invoke(main, ["explore", target, "--quiet", "--json", "trace.json"])
    finally:
        os.chdir(cwd)
    assert stopped.exit_code == 2 and (folder / "ck" / "current").exists(), stopped.output
    assert whole.exit_code == 1, whole.output  # below-30 is violated: a trace to replay
    return folder, target


def _edit_run(ck: Path, change) -> None:
    """Let `change` alter the manifest's `run` record (in place or by returning a new one)."""
    manifest = ck / (ck / "current").read_text().strip() / "manifest.json"
    document = json.loads(manifest.read_text())
    changed = change(document["run"])
    if changed is not None:
        document["run"] = changed
    manifest.write_text(json.dumps(document))


@st.composite
def explore_recovery_cases(draw) -> tuple[str, object]:
    """(how, value): an explore checkpoint edited so that recovering it must be refused: a run
    of another target (a file that would run), no TARGET given, deadlock checking or workers
    that differ, flags and limits of the wrong kind, a manifest claiming a billion states over
    a sparse 3 GiB partition, a pointer linked to a readable file."""
    how = draw(
        st.sampled_from(
            ["other-target", "no-target", "deadlock", "workers", "flag", "limit", "no-run", "giant", "link"]
        )
    )
    value: object = None
    if how == "other-target":
        value = draw(st.sampled_from(["evil.py:model", "os:system", ESCAPES + ".py:model", "", 5, None]))
    elif how == "workers":
        value = draw(st.sampled_from([0, 2, -1, 10**30, "1", None, True, 2000]))
    elif how == "flag":
        value = (
            draw(st.sampled_from(["deadlock", "stop_at_first", "symmetry", "exact"])),
            draw(st.sampled_from([1, "yes", None, [], {}, ESCAPES])),
        )
    elif how == "limit":
        value = (
            draw(st.sampled_from(["checkpoint_every", "max_states", "max_seconds", "max_memory"])),
            draw(st.sampled_from([-1, "5", True, float("inf"), [], 5.5 if draw(st.booleans()) else -0.5])),
        )
    elif how == "no-run":
        value = draw(st.sampled_from([{}, {"target": None}, {"workers": 1}]))
    return how, value


def _make_explore_case(folder: Path, ck: Path, target: str, how: str, value) -> list[str]:
    """Apply one `explore_recovery_cases` change to the folder `ck`; the command to refuse."""
    command = ["explore", target, "--quiet", "--recover", "ck"]
    if how == "other-target":
        (folder.parent / f"{folder.name}-evil.py").write_text(EVIL_MODEL)
        named = str(folder.parent / f"{folder.name}-evil.py:model") if value == "evil.py:model" else value
        _edit_run(ck, lambda run: run.update(target=named))
    elif how == "no-target":
        command = ["explore", "--quiet", "--recover", "ck"]
    elif how == "deadlock":
        _edit_run(ck, lambda run: run.update(deadlock=True))  # the model says False
    elif how == "workers":
        _edit_run(ck, lambda run: run.update(workers=value))
    elif how in ("flag", "limit"):
        name, bad = value
        _edit_run(ck, lambda run: run.update({name: bad}))
    elif how == "no-run":
        _edit_run(ck, lambda run: value)
    elif how == "giant":
        # A well-formed header claiming 3 GiB, a sparse file of that length, and a manifest
        # that claims a billion states: refused by the run's budget before a byte is read.
        level = ck / (ck / "current").read_text().strip()
        from pymc_resume.explore.store import persisted

        partition = level / "partition-0.state"
        size = 3 * 2**30
        header = persisted.HEADER.pack(
            persisted.MAGIC, persisted.VERSION, size - persisted.HEADER.size, bytes(32)
        )
        with open(partition, "wb") as handle:
            handle.write(header)
            handle.truncate(size)
        manifest = level / "manifest.json"
        document = json.loads(manifest.read_text())
        document["partitions"][0]["states"] = 10**9
        manifest.write_text(json.dumps(document))
        command += ["--max-memory", "256"]
    elif how == "link":
        (folder.parent / f"{folder.name}-secret.txt").write_text(SECRET + "\n")
        (ck / "current").unlink()
        (ck / "current").symlink_to(folder.parent / f"{folder.name}-secret.txt")
    return command


@QUICK
@given(case=explore_recovery_cases())
def test_edited_explore_checkpoints_are_refused_and_run_nothing(tmp_path, explore_run, case):
    source, target = explore_run
    folder = _fresh(tmp_path)
    shutil.copytree(source / "ck", folder / "ck")
    command = _make_explore_case(folder, folder / "ck", target, *case)
    started = time.monotonic()
    line = run_refused(command, folder)
    assert time.monotonic() - started < 10, case
    assert not (folder / "MARKER").exists() and not (Path.cwd() / "MARKER").exists()
    assert SECRET not in line and not set(line) & CONTROL, line


@pytest.mark.parametrize(
    "change",
    [
        lambda run: run.update(mutant="no-claim"),  # the probe: a reference run passed off as no-claim
        lambda run: run.update(mutant=ESCAPES),
        lambda run: run["bounds"].update(name="default"),
        lambda run: run["bounds"].update(processes=run["bounds"]["processes"] + 1),
    ],
)
def test_a_check_checkpoint_of_other_bounds_or_mutant_is_refused(tmp_path, snapshot, change):
    folder = _fresh(tmp_path)
    shutil.copytree(snapshot, folder / "ck")
    _edit_run(folder / "ck", change)
    line = run_refused(["check", "--quiet", "--bounds", "small", "--recover", "ck"], folder)
    assert not set(line) & CONTROL, line


@st.composite
def bad_trace_files(draw) -> tuple[str, object]:
    """(how, value): a replay-trace file no replay can use: not JSON, JSON of another shape,
    a trace that is no list, steps without state data or with actions that are no string,
    state data of no model class, deep nesting, a number of 5,000 digits."""
    how = draw(
        st.sampled_from(["garbage", "shape", "trace", "step", "action", "data", "deep", "digits", "property"])
    )
    value: object = None
    if how == "garbage":
        value = draw(st.binary(max_size=64))
    elif how == "shape":
        value = draw(st.sampled_from([[], {}, {"properties": []}, {"properties": {"x": 1}}, "x", None]))
    elif how == "trace":
        value = draw(st.sampled_from([{}, "x", 5, None, []]))
    elif how == "step":
        value = draw(st.sampled_from([5, [], {"action": "inc"}, {"data": None}]))
    elif how == "action":
        value = draw(st.sampled_from([5, None, ["inc"], {"a": 1}]))
    elif how == "data":  # (plain data is a state, of no path: exit 1; these are none)
        value = draw(
            st.sampled_from([{"__class__": "os:system"}, {"class": ESCAPES}, {"t": "x" * 10}, [1, 2]])
        )
    elif how == "property":
        value = draw(st.sampled_from(["nothing", ESCAPES, "below-30" * 100]))
    return how, value


def _write_bad_trace(source: Path, path: Path, how: str, value) -> list[str]:
    """Write the trace file for one `bad_trace_files` case at `path`; extra options."""
    document = json.loads((source / "trace.json").read_text())
    trace = document["properties"]["below-30"]["trace"]
    extra: list[str] = []
    if how == "garbage":
        path.write_bytes(value)
        return extra
    if how == "shape":
        document = value
    elif how == "trace":
        document["properties"]["below-30"]["trace"] = value
    elif how == "step":
        trace[1] = value
    elif how == "action":
        trace[1]["action"] = value
    elif how == "data":
        trace[0]["data"] = value
    elif how == "deep":
        path.write_text('{"properties": ' + "[" * 100_000)
        return extra
    elif how == "digits":
        path.write_text(
            json.dumps(document).replace('"properties"', '"n": ' + "9" * 5000 + ', "properties"', 1)
        )
        extra = []
    elif how == "property":
        extra = ["--property", value]
    if how != "digits":
        path.write_text(json.dumps(document))
    return extra


@QUICK
@given(case=bad_trace_files())
def test_bad_replay_traces_are_refused(tmp_path, explore_run, case):
    source, target = explore_run
    folder = _fresh(tmp_path)
    extra = _write_bad_trace(source, folder / "trace.json", *case)
    line = run_refused(["explore", target, "--replay-trace", "trace.json", *extra], folder)
    assert not set(line) & CONTROL, line


def test_names_in_a_replayed_trace_are_printed_escaped(tmp_path, explore_run):
    """A trace whose action names carry escape sequences is no path of the model (exit 1), and
    says so in one line with the names escaped."""
    source, target = explore_run
    document = json.loads((source / "trace.json").read_text())
    for step in document["properties"]["below-30"]["trace"][1:]:
        step["action"] = ESCAPES + step["action"]
    (tmp_path / "trace.json").write_text(json.dumps(document))
    result = CliRunner().invoke(main, ["explore", target, "--replay-trace", str(tmp_path / "trace.json")])
    assert result.exit_code == 1, result.output
    assert len(result.stdout.splitlines()) == 1 and "not a path of the model" in result.stdout
    assert not set(result.stdout + result.stderr) & CONTROL and "\\x1b[2J" in result.stdout


EXITS = {
    "exit": "os._exit(0)",
    "system-exit": "raise SystemExit(0)",
    "hang": "time.sleep(3600)",
}
WHERE = {  # where the model misbehaves: all before or while it is validated
    "import": "{act}\ndef model():\n    return None\n",
    "factory": "def model():\n    {act}\n",
    "property": (
        "class M:\n    @property\n    def invariants(self):\n        {act}\n"
        "    def initial_states(self):\n        return [0]\n    def successors(self, s):\n        return []\n"
        "def model():\n    return M()\n"
    ),
    "initial-states": (
        "class M:\n    def initial_states(self):\n        {act}\n"
        "    def successors(self, s):\n        return []\n"
        "def model():\n    return M()\n"
    ),
    "successors": (
        "class M:\n    def initial_states(self):\n        return [0]\n"
        "    def successors(self, s):\n        {act}\n"
        "def model():\n    return M()\n"
    ),
}


@pytest.mark.parametrize("how", list(EXITS))
@pytest.mark.parametrize("where", list(WHERE))
def test_a_model_that_exits_or_hangs_is_one_line(tmp_path, where, how):
    """`explore` of a model that ends the process, raises SystemExit or hangs while it is loaded
    and validated: one line, exit 2, within --max-seconds and a little, nothing left running."""
    folder, models = _fresh(tmp_path), tmp_path / f"models-{where}-{how}"
    models.mkdir()
    (models / "m.py").write_text("import os, time\n" + WHERE[where].format(act=EXITS[how]))
    started = time.monotonic()
    line = run_refused(["explore", f"{models / 'm.py'}:model", "--max-seconds", "2"], folder)
    assert time.monotonic() - started < 8, line
    assert {"exit": "ended the process", "system-exit": "SystemExit", "hang": "within 2s"}[how] in line, line


# -- the slow set: the same generators, many more cases ---------------------------------------


@pytest.mark.slow
@THOROUGH
@given(data=st.data())
def test_many_more_bad_inputs_are_refused(tmp_path, data):
    category = data.draw(st.sampled_from(["bounds", "options", "repro", "adapter", "checkpoint"]))
    folder = _fresh(tmp_path)
    if category == "bounds":
        (folder / "b.toml").write_bytes(data.draw(bad_bound_files()))
        run_refused(["check", "--quiet", "--bounds", "b.toml"], folder)
    elif category == "options":
        command, value = data.draw(BAD_OPTIONS)
        run_refused([*command, value], folder)
    elif category == "repro":
        (folder / "repro.json").write_bytes(data.draw(bad_repro_files()))
        run_refused(["replay", "repro.json"], folder)
    elif category == "adapter":
        for name, text in ADAPTER_FILES.items():
            (folder / name).write_text(text)
        run_refused(["fuzz", data.draw(bad_adapter_specs())], folder)
    else:
        recovery_refused(folder, data.draw(bad_checkpoint_folders()))


_COUNTER = [0]


def _fresh(tmp_path: Path) -> Path:
    """A fresh folder per generated case (Hypothesis reuses the function's tmp_path)."""
    _COUNTER[0] += 1
    folder = tmp_path / f"case-{_COUNTER[0]}"
    folder.mkdir()
    return folder
