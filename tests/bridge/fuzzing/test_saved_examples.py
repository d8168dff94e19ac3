"""The fuzz run's example database (`bridge.fuzzing.saved_examples`): Hypothesis's layout, and
no temporary file left anywhere when a save is cut short."""

import os
import tempfile

import pytest
from hypothesis.database import DirectoryBasedExampleDatabase

from pymc_resume.bridge.fuzzing.saved_examples import SavedExamples


def test_it_reads_what_hypothesis_saved_and_hypothesis_reads_what_it_saved(tmp_path):
    theirs, ours = DirectoryBasedExampleDatabase(tmp_path), SavedExamples(tmp_path)
    theirs.save(b"key", b"one")
    ours.save(b"key", b"two")
    assert sorted(ours.fetch(b"key")) == sorted(theirs.fetch(b"key")) == [b"one", b"two"]
    ours.move(b"key", b"other", b"one")
    ours.delete(b"key", b"two")
    assert list(theirs.fetch(b"key")) == [] and list(theirs.fetch(b"other")) == [b"one"]


def test_a_save_cut_short_by_an_interrupt_leaves_no_file_anywhere(tmp_path, monkeypatch):
    """SIGTERM in a fuzz run raises where the run is; landing inside a save must leave neither
    a temporary file in the system's temp directory (where Hypothesis's own database writes
    first) nor a half-written example in the folder."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    ours = SavedExamples(tmp_path / "saved")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(os, "replace", interrupted)
        with pytest.raises(KeyboardInterrupt):
            ours.save(b"key", b"value")
    assert [p for p in (tmp_path / "saved").rglob("*") if not p.is_dir()] == []
    assert list(temp.iterdir()) == []
    ours.save(b"key", b"value")  # and the next save completes
    assert list(ours.fetch(b"key")) == [b"value"]
