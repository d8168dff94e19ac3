"""The explorer's own checkpoints: a resumed run reaches what an uninterrupted run reaches."""

import pytest

from pymc_resume.explore import explore, snapshot
from pymc_resume.explore.search import Checkpointing
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel


def summary(result):
    lengths = {name: len(v.trace) for name, v in result.violations.items()}
    return result.distinct_states, result.states_generated, result.depth, lengths


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_stopped_midway_resumes_to_the_same_result(tmp_path, workers, explored):
    model = ResumeModel(load_bounds("small"), "stuck-claim")
    whole = explored("small", "stuck-claim", workers=workers)
    checkpoint = Checkpointing(str(tmp_path), every=0.0, run={"what": "stuck-claim"})
    first = explore(model, canonical=model.canonical, workers=workers, max_states=5000,
                    checkpoint=checkpoint)
    assert not first.complete
    saved = snapshot.load(tmp_path)
    assert 0 < saved.depth < whole.depth and saved.run == {"what": "stuck-claim"}
    resumed = explore(model, canonical=model.canonical, workers=workers, resume=saved,
                      checkpoint=checkpoint)
    assert summary(resumed) == summary(whole)


def test_only_the_latest_snapshot_is_kept_and_published_atomically(tmp_path):
    model = ResumeModel(load_bounds("small"))
    explore(model, canonical=model.canonical,
            checkpoint=Checkpointing(str(tmp_path), every=0.0))
    folders = [p.name for p in tmp_path.iterdir() if p.is_dir()]
    assert folders == [(tmp_path / "current").read_text().strip()]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".current")]


def test_recovering_with_another_worker_count_is_refused(tmp_path):
    model = ResumeModel(load_bounds("small"))
    explore(model, canonical=model.canonical, max_states=3000,
            checkpoint=Checkpointing(str(tmp_path), every=0.0))
    with pytest.raises(snapshot.SnapshotError, match="1 workers, not 2"):
        explore(model, canonical=model.canonical, workers=2, resume=snapshot.load(tmp_path))


def test_an_empty_folder_is_no_checkpoint(tmp_path):
    with pytest.raises(snapshot.SnapshotError, match="no checkpoint"):
        snapshot.load(tmp_path)
