"""The explorer's own snapshots: a run continued from one reaches what an uninterrupted run reaches."""

import json

import pytest
from run_summary import summary

from pymc_resume.errors import EnvironmentProblem
from pymc_resume.explore import explore
from pymc_resume.explore.search import SnapshotSchedule
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_stopped_midway_resumes_to_the_same_result(tmp_path, workers, explored):
    model = ResumeModel(load_bounds("small"), "stuck-claim")
    whole = explored("small", "stuck-claim", workers=workers)
    snapshots = SnapshotSchedule(str(tmp_path), every=0.0, run={"what": "stuck-claim"})
    first = explore(model, canonical=model.canonical, workers=workers, max_states=5000, snapshots=snapshots)
    assert not first.complete
    saved = snapshot.load(tmp_path)
    assert 0 < saved.depth < whole.depth and saved.run == {"what": "stuck-claim"}
    recovered = explore(
        model, canonical=model.canonical, workers=workers, from_snapshot=saved, snapshots=snapshots
    )
    assert summary(recovered) == summary(whole)


def test_only_the_latest_snapshot_is_kept_and_published_atomically(tmp_path):
    model = ResumeModel(load_bounds("small"))
    explore(model, canonical=model.canonical, snapshots=SnapshotSchedule(str(tmp_path), every=0.0))
    folders = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    current = (tmp_path / "current").read_text().strip()
    chain = json.loads((tmp_path / current / "manifest.json").read_text())["chain"]
    assert folders == [snapshot.folder_name(depth) for depth in chain] and folders[-1] == current
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".current")]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_partition_file_that_cannot_be_written_is_one_line_about_the_checkpoint(
    tmp_path, monkeypatch, workers
):
    """Each worker writes its own partition's file: a full disk there is the checkpoint's
    problem, said in one line, as a failure to write the manifest is."""

    def disk_full(path, partition, base):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(snapshot, "write_partition", disk_full)  # (workers fork with it)
    model = ResumeModel(load_bounds("small"))
    with pytest.raises(EnvironmentProblem, match="cannot write a checkpoint into .*No space left"):
        explore(model, canonical=model.canonical, workers=workers, snapshots=SnapshotSchedule(str(tmp_path)))


def test_recovering_with_another_worker_count_is_refused(tmp_path):
    model = ResumeModel(load_bounds("small"))
    explore(
        model,
        canonical=model.canonical,
        max_states=3000,
        snapshots=SnapshotSchedule(str(tmp_path), every=0.0),
    )
    with pytest.raises(snapshot.SnapshotError, match="1 workers, not 2"):
        explore(model, canonical=model.canonical, workers=2, from_snapshot=snapshot.load(tmp_path))


def test_an_empty_folder_is_no_checkpoint(tmp_path):
    with pytest.raises(snapshot.SnapshotError, match="no checkpoint"):
        snapshot.load(tmp_path)


# -- the persisted format: plain values only, every file checked -------------------------------

import enum
import os
import pickle
from array import array

from pymc_resume.explore.store import persisted
from pymc_resume.model.state import Budget


class Colour(enum.IntEnum):
    RED = 1


def test_plain_values_round_trip_and_shared_parts_stay_shared():
    shared = (1, (2, 3))
    value = {
        "a": [
            None,
            True,
            2**200,
            -(2**70),
            1.5,
            "é",
            b"x",
            bytearray(b"y"),
            shared,
            shared,
            frozenset({1}),
            array("q", [1, -2]),
            array("i", [3]),
            Budget(1, 2, 0, 1),
            Colour.RED,
            list(range(-5, 30)),
            [2**100 + i for i in range(10)],
        ],
        7: (),
    }
    loaded = persisted.loads(persisted.dumps(value), "test")
    assert loaded == value
    assert loaded["a"][8] is loaded["a"][9]
    assert type(loaded["a"][13]) is Budget and loaded["a"][14] is Colour.RED


def test_a_writer_that_forgets_what_it_wrote_writes_it_again_and_the_numbers_still_agree(monkeypatch):
    # A memo of at most 3 tuples: forgotten ones are written again in full, and the back-
    # references to those still remembered point at the right values, shared as before.
    monkeypatch.setattr(persisted, "MEMO_LIMIT", 3)
    parts = [(i, (i, "x")) for i in range(6)]
    value = [part for pair in zip(parts, parts) for part in pair] + [Budget(1, 2, 0, 1)] * 2 + parts
    data = persisted.dumps(value)
    loaded = persisted.loads(data, "test")
    assert loaded == value
    assert all(loaded[2 * i] is loaded[2 * i + 1] for i in range(6)) and loaded[12] is loaded[13]
    monkeypatch.setattr(persisted, "MEMO_LIMIT", 1 << 16)
    assert len(data) > len(persisted.dumps(value))  # (the parts at the end were written twice)


def test_numpy_columns_are_written_as_the_arrays_they_read_back_as():
    """The store's columns go out without a copy, in the bytes an `array.array` would give."""
    import numpy as np

    columns = [np.arange(-3, 4, dtype=np.int32), np.array([2**64 - 1], dtype=np.uint64)]
    assert bytes(persisted.dumps(columns)) == bytes(
        persisted.dumps([array("i", range(-3, 4)), array("Q", [2**64 - 1])])
    )
    assert persisted.loads(persisted.dumps(columns), "test") == [
        array("i", range(-3, 4)),
        array("Q", [2**64 - 1]),
    ]
    with pytest.raises(TypeError, match="2 dimensions"):
        persisted.dumps(np.zeros((2, 2), dtype=np.int32))


class _Boom:
    def __reduce__(self):
        return os.system, ("touch MARKER",)


def _instance_of(module: str, qualname: str) -> bytes:
    """A well-formed file (right checksum) holding an instance of `module.qualname`."""
    body = b"".join(
        [
            persisted.INSTANCE,
            persisted._U64.pack(0),
            persisted.STR,
            persisted._U64.pack(len(module)),
            module.encode(),
            persisted.STR,
            persisted._U64.pack(len(qualname)),
            qualname.encode(),
            persisted.TUPLE,
            persisted._U64.pack(1),
            persisted.STR,
            persisted._U64.pack(4),
            b"true",
        ]
    )
    import hashlib

    return (
        persisted.HEADER.pack(persisted.MAGIC, persisted.VERSION, len(body), hashlib.sha256(body).digest())
        + body
    )


@pytest.mark.parametrize(
    "data, message",
    [
        (pickle.dumps(_Boom()), "not a snapshot file"),
        (_instance_of("posix", "system"), "not a plain data class"),
        (_instance_of("subprocess", "Popen"), "not a plain data class"),
        (_instance_of("antigravity", "fly"), "not loaded"),
        (_instance_of("pymc_resume.model.state", "Budget.__init__.__globals__"), "does not exist"),
        (persisted.dumps([1, 2, 3])[:-3], "truncated"),
        (persisted.dumps([1, 2, 3])[:-1] + b"\x07", "SHA-256"),
        (b"", "too short"),
    ],
    ids=[
        "pickle",
        "os.system",
        "Popen",
        "unloaded-module",
        "attribute-path",
        "truncated",
        "checksum",
        "empty",
    ],
)
def test_crafted_or_damaged_files_are_refused_without_running_anything(tmp_path, data, message):
    os.chdir(tmp_path)
    with pytest.raises(snapshot.SnapshotError, match=message):
        persisted.loads(data, "the file")
    assert not (tmp_path / "MARKER").exists()


def test_values_nested_too_deeply_are_refused():
    depth = 100_000
    body = (persisted.LIST + persisted._U64.pack(1)) * depth + persisted.NONE
    import hashlib

    data = (
        persisted.HEADER.pack(persisted.MAGIC, persisted.VERSION, len(body), hashlib.sha256(body).digest())
        + body
    )
    with pytest.raises(snapshot.SnapshotError, match="nested too deeply"):
        persisted.loads(data, "deep")


def test_stale_folders_and_temporary_pointers_are_removed_when_a_snapshot_is_published(tmp_path):
    (tmp_path / "level-999999").mkdir()
    (tmp_path / ".current.abc123").write_text("level-999999\n")
    (tmp_path / "notes.txt").write_text("the user's own file")
    model = ResumeModel(load_bounds("small"))
    explore(
        model,
        canonical=model.canonical,
        max_states=2000,
        snapshots=SnapshotSchedule(str(tmp_path), every=0.0),
    )
    current = (tmp_path / "current").read_text().strip()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([current, "current", "notes.txt"])


def test_the_first_snapshot_follows_the_first_level_then_waits_grow_to_the_interval():
    every = SnapshotSchedule("unused", every=60.0)
    assert [every.wait_after(taken) for taken in range(9)] == [0, 1, 2, 4, 8, 16, 32, 60, 60]
    assert SnapshotSchedule("unused", every=0.0).wait_after(5) == 0


def test_a_snapshot_that_took_long_spaces_the_next_whatever_the_interval():
    every = SnapshotSchedule("unused", every=5.0)
    assert every.wait_after(9, last_cost=0.1) == 5.0  # cheap: the interval asked for
    assert every.wait_after(9, last_cost=2.0) == 18.0  # dear: at most a tenth of the run
    assert every.wait_after(0, last_cost=2.0) == 0.0  # the first follows the first level
    assert SnapshotSchedule("unused", every=0.0).wait_after(9, last_cost=2.0) == 0  # every level


@pytest.mark.parametrize(
    "module, qualname", [("posix", "system"), ("subprocess", "Popen"), ("antigravity", "x")]
)
def test_the_plain_codec_resolves_a_restored_shape_without_importing_or_calling(module, qualname):
    from pymc_resume.explore.store import plain

    with pytest.raises(ValueError):
        plain._class_named(module, qualname)
    assert plain._class_named("pymc_resume.model.state", "Budget") is Budget


def test_random_damage_behind_a_correct_checksum_is_a_snapshot_error_or_a_plain_value():
    """The checksum is not a secret: a file rewritten with damage and a fresh checksum reaches
    the reader, which must answer with a value or a SnapshotError, nothing else."""
    import hashlib
    import random

    value = {
        "keys": [2**90 + i for i in range(20)],
        "parents": array("q", range(-1, 30)),
        "tables": [[Budget(1, 2, 0, 1), (1, (2, 3)), "é", 1.5, None, True, frozenset({3})]],
    }
    body = bytearray(persisted.dumps(value)[persisted.HEADER.size :])
    chooser = random.Random(12)
    for _ in range(400):
        damaged = bytearray(body)
        for _ in range(chooser.randint(1, 4)):
            position = chooser.randrange(len(damaged))
            if chooser.random() < 0.2:
                del damaged[position:]
                break
            damaged[position] = chooser.randrange(256)
        data = persisted.HEADER.pack(
            persisted.MAGIC, persisted.VERSION, len(damaged), hashlib.sha256(damaged).digest()
        ) + bytes(damaged)
        try:
            persisted.loads(data, "fuzzed")
        except snapshot.SnapshotError:
            pass
