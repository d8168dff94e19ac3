"""The frontier spills to disk past its bound and reads back the same keys, in order."""

from __future__ import annotations

import os

import pytest
from two_phase import TwoPhase

from pymc_resume.explore import explore
from pymc_resume.explore.store import frontier
from pymc_resume.explore.store.frontier import Frontier


@pytest.mark.parametrize(
    "keys",
    [
        [(i, -(2**40) * i, 7) for i in range(25)],  # a plain codec's: one int64 table a piece
        [(i, "x" * (i % 3), (i, -i)) for i in range(25)],  # any other: `persisted`
        [(i, 0.5 * i, i % 2 == 0) for i in range(25)],  # floats and bools stay what they are
    ],
)
def test_keys_read_back_in_order_across_spills_and_the_file_has_no_name(monkeypatch, keys):
    monkeypatch.setattr(frontier, "PIECE", 2)
    spilling = Frontier(keys[:4], in_memory=3)
    for start in range(4, 25, 5):
        spilling.extend(keys[start : start + 5])
    assert spilling.spilled > 0 and len(spilling) == 25 and spilling[0] == keys[0]
    assert list(spilling) == keys and list(spilling) == keys  # read again, the same
    assert [tuple(map(type, key)) for key in spilling] == [tuple(map(type, key)) for key in keys]
    assert spilling.file is not None and os.fstat(spilling.file.fileno()).st_nlink == 0
    spilling.close()
    with pytest.raises(IndexError):
        Frontier()[0]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_spilled_frontier_explores_what_memory_does(monkeypatch, workers):
    """TwoPhase's keys are tuples (hashed), so its levels go through the frontier; with a bound
    of 40 keys each wide level spills, and the counts are those of a run in memory."""
    in_memory = explore(TwoPhase(4), workers=workers)
    monkeypatch.setattr(frontier, "IN_MEMORY", 40)
    spills = []  # (seen in this process only: with two workers the spills are theirs)
    spill = Frontier._spill
    monkeypatch.setattr(Frontier, "_spill", lambda self: spills.append(len(self)) or spill(self))
    spilled = explore(TwoPhase(4), workers=workers)
    assert spills or workers > 1
    assert spilled.complete and spilled.violations == {}
    assert (spilled.distinct_states, spilled.states_generated, spilled.depth) == (
        in_memory.distinct_states,
        in_memory.states_generated,
        in_memory.depth,
    )
