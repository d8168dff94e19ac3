"""`pymc-resume check` killed with SIGKILL mid-run, then `--recover`: identical counts and verdicts."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from pymc_resume.checking.check import judge
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel

COUNTS = ("distinct_states", "states_generated", "depth")


def check(*args):
    return [sys.executable, "-m", "pymc_resume", "check", "--quiet", *args]


def verdicts(data):
    return {cid: (c["verdict"], len(c["trace"] or ())) for cid, c in data["clauses"].items()}


def assert_no_process_mentions(text, seconds=10.0):
    """The killed run's workers notice their coordinator is gone and exit."""
    deadline = time.monotonic() + seconds
    while True:
        alive = []
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if text.encode() in cmdline.read():
                        alive.append(entry)
            except OSError:
                continue
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert not alive, f"processes of the killed run still alive: {alive}"


def expected_verdicts(bounds, result):
    """The verdicts `check` prints for this exploration, as `verdicts` reads them from its JSON."""
    judged = judge(ResumeModel(load_bounds(bounds)), result)
    return {cid: (v.verdict, len(v.trace or ())) for cid, v in judged.items()}


def killed_then_recovered(tmp_path, bounds, workers, whole, levels_before_kill):
    """Kill `check` mid-run, recover it, and compare with `whole`, the uninterrupted exploration."""
    recovered_json, folder = tmp_path / "rec.json", tmp_path / "ck"
    run = subprocess.Popen(
        check(
            "--bounds",
            bounds,
            "--workers",
            workers,
            "--checkpoint-dir",
            str(folder),
            "--checkpoint-every",
            "0",
        )
    )
    pointer = folder / "current"
    # Kill once a snapshot some levels deep is published: mid-run, whatever the machine's speed.
    while run.poll() is None and not (
        pointer.exists() and int(pointer.read_text().strip().split("-")[1]) >= levels_before_kill
    ):
        time.sleep(0.02)
    assert run.poll() is None, "the run finished before it could be killed"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    assert (folder / "current").exists()
    assert_no_process_mentions(str(folder))
    done = subprocess.run(check("--bounds", bounds, "--recover", str(folder), "--json", str(recovered_json)))
    recovered = json.loads(recovered_json.read_text())
    assert done.returncode == 0
    assert [recovered[k] for k in COUNTS] == [whole.distinct_states, whole.states_generated, whole.depth]
    assert verdicts(recovered) == expected_verdicts(bounds, whole)


def test_sigkill_then_recover_at_small(tmp_path, explored):
    killed_then_recovered(tmp_path, "small", "1", explored("small"), levels_before_kill=10)


@pytest.mark.slow
def test_sigkill_then_recover_at_default_with_two_workers(tmp_path, default_exploration):
    killed_then_recovered(tmp_path, "default", "2", default_exploration, levels_before_kill=20)


# -- checkpoint folders are input: crafted, tampered or damaged ones are refused in one line ---

import shutil

from click.testing import CliRunner

from pymc_resume.checking.check import run_check
from pymc_resume.cli import main
from pymc_resume.explore.store import persisted


@pytest.fixture(scope="module")
def checkpoint_folder(tmp_path_factory):
    """A real checkpoint of `small` with two workers, stopped early (a state limit)."""
    folder = tmp_path_factory.mktemp("checkpoint") / "ck"
    run_check(
        load_bounds("small"), workers=2, max_states=3000, checkpoint_dir=str(folder), checkpoint_every=0
    )
    return folder


def copy_of(checkpoint_folder, tmp_path):
    folder = tmp_path / "ck"
    shutil.copytree(checkpoint_folder, folder)
    level = folder / (folder / "current").read_text().strip()
    return folder, level


def assert_refused_in_one_line(args, cwd):
    """In-process: exit 2, one line on stderr naming the problem, no traceback."""
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, args, catch_exceptions=True)
    finally:
        os.chdir(previous)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stdout[-300:], result.stderr[-500:])
    assert len(lines) == 1 and lines[0].startswith("pymc-resume: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def rewrite(path, change):
    """Load a partition's piece (the last of its chain, in the published folder), let `change`
    alter its record, and write it back well-formed, its new length and SHA-256 in the
    manifest: a consistent rewrite, which only the checks of the values can refuse."""
    record = persisted.loads(path.read_bytes(), str(path))
    change(record)
    data = persisted.dumps(record)
    path.write_bytes(data)
    index = int(path.stem.removeprefix("partition-"))
    length, digest = persisted.identity(data)
    edit_manifest(
        path.parent, lambda m: m["partitions"][index]["pieces"][-1].update(bytes=length, sha256=digest)
    )


def edit_manifest(level, change):
    manifest = json.loads((level / "manifest.json").read_text())
    change(manifest)
    (level / "manifest.json").write_text(json.dumps(manifest))


def _set(key, value):
    return lambda record: record.__setitem__(key, value)


def _bad_parent(record):
    record["parents"][-1] = 10**9


def _duplicate_key(record):
    values = record["fingerprints"]["values"]  # (the runs here store fingerprints)
    values[-1] = values[0]


def _impossible_violation(record):
    record["first_bad"]["liveness"] = (1, 10**9, -1)


def _violation_at_a_sound_state(record):
    """Name the first state of this partition's first level that has one (the reference
    holds everywhere)."""
    starts = record["level_starts"]
    level = next(k for k in range(1, len(starts)) if starts[k] > starts[k - 1])
    gid = starts[level - 1] * record["partitions"] + record["partition"]
    record["first_bad"]["prefix-continuation"] = (level, gid, -1)


def _unreadable_carry_key(record):
    keys = next(batch[0] for batch in record["carry"] if batch[0])
    keys[0] = 2**200 + 12345


TAMPERED_PARTITIONS = {
    "negative-generated": _set("generated", -5),
    "parent-beyond-the-states": _bad_parent,
    "a-state-twice": _duplicate_key,
    "violation-of-no-state": _impossible_violation,
    "carry-key-the-codec-cannot-read": _unreadable_carry_key,
    "wrong-partition": _set("partition", 1),
    "a-table-value-twice": lambda record: record["tables"][0].append(record["tables"][0][0]),
    # Values a recomputed checksum would pass: a count past any run's, and a violation at a
    # state of the right level on which the invariant holds (the initial state).
    "generated-past-any-run": _set("generated", 10**30),
    "a-100000-digit-count": _set("generated", 10**100_000),
    "violation-where-it-holds": lambda record: _violation_at_a_sound_state(record),
}

TAMPERED_MANIFESTS = {
    "negative-states": lambda m: m["partitions"][0].__setitem__("states", -1),
    "depth-beyond-levels": lambda m: m.__setitem__("depth", m["depth"] + 1),
    "falling-levels": lambda m: m["partitions"][0]["level_starts"].reverse(),
    "unknown-mutant": lambda m: m["run"].__setitem__("mutant", "os.system"),
    "three-workers": lambda m: m["run"].__setitem__("workers", 3),
    "bounds-too-large": lambda m: m["run"]["bounds"].__setitem__("resumes", 10**6),
    "nan-elapsed": lambda m: m.__setitem__("elapsed", float("nan")),
}


@pytest.mark.parametrize("name", list(TAMPERED_PARTITIONS))
def test_a_tampered_partition_file_is_refused(tmp_path, checkpoint_folder, name):
    folder, level = copy_of(checkpoint_folder, tmp_path)
    rewrite(level / "partition-0.state", TAMPERED_PARTITIONS[name])
    message = assert_refused_in_one_line(["check", "--bounds", "small", "--recover", "ck"], tmp_path)
    assert "partition-0.state" in message
    if name == "violation-where-it-holds":
        assert "on which prefix-continuation holds" in message, message


@pytest.mark.parametrize("name", list(TAMPERED_MANIFESTS))
def test_a_tampered_manifest_is_refused(tmp_path, checkpoint_folder, name):
    folder, level = copy_of(checkpoint_folder, tmp_path)
    edit_manifest(level, TAMPERED_MANIFESTS[name])
    assert_refused_in_one_line(["check", "--bounds", "small", "--recover", "ck"], tmp_path)


def _truncate(level):
    path = level / "partition-1.state"
    path.write_bytes(path.read_bytes()[:-100])


def _flip(level):
    path = level / "partition-1.state"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))


DAMAGE = {
    "truncated": (_truncate, "truncated"),
    "wrong-checksum": (_flip, "SHA-256"),
    "missing-file": (lambda level: (level / "partition-1.state").unlink(), "unreadable"),
    "non-utf8-manifest": (lambda level: (level / "manifest.json").write_bytes(b"{\xff\xfe}"), "UTF-8"),
    "pointer-outside": (lambda level: (level.parent / "current").write_text("../../etc\n"), "level-"),
    "old-pickle-format": (lambda level: edit_manifest(level, _set("format", 2)), "format"),
    # Files that would be read forever or block: refused before a byte is read.
    "manifest-from-a-device": (lambda level: _replace(level / "manifest.json", "/dev/urandom"), "regular"),
    "partition-from-a-device": (lambda level: _replace(level / "partition-1.state", "/dev/zero"), "regular"),
    "pointer-is-a-fifo": (lambda level: _fifo(level.parent / "current"), "regular"),
}


def _replace(path, device):
    path.unlink()
    path.symlink_to(device)


def _fifo(path):
    path.unlink()
    os.mkfifo(path)


@pytest.mark.parametrize("name", list(DAMAGE))
def test_a_damaged_folder_is_refused(tmp_path, checkpoint_folder, name):
    folder, level = copy_of(checkpoint_folder, tmp_path)
    damage, message = DAMAGE[name]
    damage(level)
    assert message in assert_refused_in_one_line(["check", "--bounds", "small", "--recover", "ck"], tmp_path)


def test_a_crafted_pickle_in_every_file_runs_nothing(tmp_path, checkpoint_folder):
    """Every file of the snapshot would run `touch MARKER` if it were unpickled."""
    folder, level = copy_of(checkpoint_folder, tmp_path)
    payload = b"cposix\nsystem\n(Vtouch MARKER\ntR."
    for path in level.iterdir():
        path.write_bytes(payload)
    done = subprocess.run(
        check("--bounds", "small", "--recover", str(folder)), cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "MARKER").exists()


def test_recover_keeps_the_runs_own_options_unless_given_again(tmp_path, checkpoint_folder):
    folder, level = copy_of(checkpoint_folder, tmp_path)
    (folder / "level-999999").mkdir()  # what a run killed inside a snapshot write leaves
    (folder / ".current.x1y2").write_text("level-999999\n")
    # The run stopped at its state limit: recovered as it was, it stops there again.
    line = assert_refused_in_one_line(["check", "--quiet", "--bounds", "small", "--recover", "ck"], tmp_path)
    assert "state limit of 3,000" in line
    manifest = json.loads((folder / (folder / "current").read_text().strip() / "manifest.json").read_text())
    assert manifest["run"]["checkpoint_every"] == 0 and manifest["run"]["max_states"] == 3000
    assert not (folder / "level-999999").exists() and not (folder / ".current.x1y2").exists()


def test_an_unwritable_checkpoint_folder_or_json_path_is_refused_before_any_work(tmp_path):
    (tmp_path / "file").write_text("")
    assert_refused_in_one_line(["check", "--bounds", "small", "--checkpoint-dir", "file/ck"], tmp_path)
    assert_refused_in_one_line(["check", "--bounds", "small", "--json", "file/out.json"], tmp_path)


def test_sigterm_of_the_coordinator_leaves_no_worker_and_no_traceback(tmp_path):
    folder = tmp_path / "ck"
    run = subprocess.Popen(
        check("--bounds", "small", "--workers", "2", "--checkpoint-dir", str(folder)),
        stderr=subprocess.PIPE,
        text=True,
    )
    while run.poll() is None and not (folder / "current").exists():
        time.sleep(0.02)
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=30)
    assert "Traceback" not in stderr
    assert_no_process_mentions(str(folder))


@pytest.mark.slow
def test_sigkill_after_five_seconds_at_default_recovers_identically(tmp_path, default_exploration):
    """The must-show: killed with SIGKILL 5 s in, with the default checkpoint interval."""
    folder, recovered_json = tmp_path / "ck", tmp_path / "rec.json"
    with open(tmp_path / "killed.err", "w") as killed_err:
        run = subprocess.Popen(
            check("--bounds", "default", "--workers", "2", "--checkpoint-dir", str(folder)), stderr=killed_err
        )
        time.sleep(5)
        assert run.poll() is None, "the run finished before it could be killed"
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    assert_no_process_mentions(str(folder))
    assert "Traceback" not in (tmp_path / "killed.err").read_text()
    done = subprocess.run(check("--recover", str(folder), "--json", str(recovered_json)))
    assert done.returncode == 0
    recovered = json.loads(recovered_json.read_text())
    whole = default_exploration
    assert [recovered[k] for k in COUNTS] == [whole.distinct_states, whole.states_generated, whole.depth]
    assert verdicts(recovered) == expected_verdicts("default", whole)


def test_swapped_keys_that_pass_every_check_still_end_in_one_line(tmp_path):
    """Keys swapped by hand are well-formed and in range, so the folder loads; the trace
    replay of the mutant's violation then does not fit the model: exit 2, one line."""
    folder = tmp_path / "ck"
    run_check(
        load_bounds("small"), "stuck-claim", max_states=3000, checkpoint_dir=str(folder), checkpoint_every=0
    )
    level = folder / (folder / "current").read_text().strip()

    def swap(record):
        keys = record["fingerprints"]["values"]
        for i in range(1, 60, 2):
            keys[i], keys[i + 1] = keys[i + 1], keys[i]

    rewrite(level / "partition-0.state", swap)
    line = assert_refused_in_one_line(
        ["check", "--quiet", "--bounds", "small", "--mutant", "stuck-claim", "--recover", "ck"]
        + ["--max-states", "100000000"],
        tmp_path,
    )
    assert "does not fit the model" in line


def test_a_partition_file_swapped_for_a_huge_sparse_one_is_refused_before_it_is_read(
    tmp_path, checkpoint_folder
):
    folder, level = copy_of(checkpoint_folder, tmp_path)
    os.truncate(level / "partition-0.state", 3 * 2**30)  # sparse: takes no disk, reads as zeros
    started = time.monotonic()
    message = assert_refused_in_one_line(["check", "--bounds", "small", "--recover", "ck"], tmp_path)
    assert "partition-0.state" in message and "truncated or extended" in message
    assert time.monotonic() - started < 10


# -- a chain of increments: each piece checked as strictly as a whole file ---------------------


@pytest.fixture(scope="module")
def chained_folder(tmp_path_factory):
    """A real checkpoint of `small` with two workers whose published snapshot is a chain of
    several increments after its base (compacted by count only, not by bytes)."""
    from pymc_resume.explore.snapshots import chain

    folder = tmp_path_factory.mktemp("chained") / "ck"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chain, "OUTWEIGH", float("inf"))
        run_check(
            load_bounds("small"), workers=2, max_states=3000, checkpoint_dir=str(folder), checkpoint_every=0
        )
    return folder


def _chain(level):
    return json.loads((level / "manifest.json").read_text())["chain"]


def _piece(level, at, partition):
    return level.parent / f"level-{_chain(level)[at]:06d}" / f"partition-{partition}.state"


def _swap_files(first, second):
    data = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(data)


def _reorder_increments(level):
    """Two increments swapped, files and manifest alike: every checksum still matches."""
    _swap_files(_piece(level, 1, 0), _piece(level, 2, 0))
    edit_manifest(level, lambda m: _swap(m["partitions"][0]["pieces"]))


def _swap(pieces):
    pieces[1], pieces[2] = pieces[2], pieces[1]


def _drop_an_increment(level):
    """An increment left out of the manifest (its chain and every partition's pieces)."""

    def drop(manifest):
        del manifest["chain"][1]
        for entry in manifest["partitions"]:
            del entry["pieces"][1]

    edit_manifest(level, drop)


def _pieces_of_the_other_partition(level):
    _swap_files(_piece(level, 1, 0), _piece(level, 1, 1))

    def swap(manifest):
        first, second = manifest["partitions"][0]["pieces"], manifest["partitions"][1]["pieces"]
        first[1], second[1] = second[1], first[1]

    edit_manifest(level, swap)


def _truncate_piece(level):
    path = _piece(level, 1, 1)
    path.write_bytes(path.read_bytes()[:-100])


def _flip_piece(level):
    path = _piece(level, 1, 1)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))


def _without_base(manifest):
    del manifest["chain"][0]
    for entry in manifest["partitions"]:
        del entry["pieces"][0]


DAMAGED_CHAINS = {
    "missing-increment": (lambda level: _piece(level, 1, 1).unlink(), "unreadable"),
    "truncated-increment": (_truncate_piece, "truncated"),
    "altered-increment": (_flip_piece, "SHA-256"),
    "increments-swapped-in-the-manifest": (
        lambda level: edit_manifest(level, lambda m: _swap(m["partitions"][0]["pieces"])),
        "not the piece the manifest names",
    ),
    "increments-reordered": (_reorder_increments, "continues a piece of depth"),
    "increment-dropped": (_drop_an_increment, "continues a piece of depth"),
    "pieces-of-the-other-partition": (_pieces_of_the_other_partition, "another partition"),
    "chain-without-its-base": (lambda level: edit_manifest(level, _without_base), "the chain starts here"),
    "chain-not-rising": (
        lambda level: edit_manifest(level, lambda m: m["chain"].reverse()),
        "'chain' must be",
    ),
    "a-folder-of-format-7": (
        lambda level: edit_manifest(level, _as_format_7),
        "checkpoint format 7, this version reads 8",
    ),
}


def _as_format_7(manifest):
    """A manifest as the whole snapshots before increments wrote it."""
    manifest["format"] = 7
    del manifest["chain"]
    for entry in manifest["partitions"]:
        del entry["pieces"]


@pytest.mark.parametrize("name", list(DAMAGED_CHAINS))
def test_a_damaged_missing_or_reordered_increment_is_refused_in_one_line(tmp_path, chained_folder, name):
    folder, level = copy_of(chained_folder, tmp_path)
    assert len(_chain(level)) >= 4
    damage, message = DAMAGED_CHAINS[name]
    damage(level)
    line = assert_refused_in_one_line(["check", "--bounds", "small", "--recover", "ck"], tmp_path)
    assert message in line, line


def test_sigkill_then_recover_from_a_chain_under_another_hash_seed(tmp_path, explored):
    """Killed (two workers, PYTHONHASHSEED 1) once a chain of increments is published, then
    recovered under PYTHONHASHSEED 2: the uninterrupted run's counts and verdicts."""
    folder, recovered_json = tmp_path / "ck", tmp_path / "rec.json"
    args = check(
        "--bounds", "small", "--workers", "2", "--checkpoint-dir", str(folder), "--checkpoint-every", "0"
    )
    run = subprocess.Popen(args, env={**os.environ, "PYTHONHASHSEED": "1"})
    while run.poll() is None and len(_published_chain(folder)) < 2:
        time.sleep(0.02)
    assert run.poll() is None, "the run finished before a chain was published"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    assert_no_process_mentions(str(folder))
    assert len(_published_chain(folder)) >= 2
    recovering = check("--bounds", "small", "--recover", str(folder), "--json", str(recovered_json))
    done = subprocess.run(recovering, env={**os.environ, "PYTHONHASHSEED": "2"})
    assert done.returncode == 0
    recovered, whole = json.loads(recovered_json.read_text()), explored("small", workers=2)
    assert [recovered[k] for k in COUNTS] == [whole.distinct_states, whole.states_generated, whole.depth]
    assert verdicts(recovered) == expected_verdicts("small", whole)


def _published_chain(folder):
    """The chain of the published snapshot ([] before one, or while it is being replaced)."""
    try:
        level = folder / (folder / "current").read_text().strip()
        return _chain(level)
    except (OSError, ValueError, KeyError):
        return []
