"""Workers that exchange fingerprints (`explore.exchange`): every state is found once, traces
stay shortest, a checkpoint taken while states are held for other owners recovers, and keys
keep each field's values as they were."""

import pytest
from run_summary import summary
from two_phase import TwoPhase

from pymc_resume.explore import AlwaysReachable, Invariant, explore
from pymc_resume.explore.level import exchange
from pymc_resume.explore.level.exchange import HashKeys, fingerprint_of_state, part_hash, ship_ratios
from pymc_resume.explore.level.partition import Partition
from pymc_resume.explore.search import SnapshotSchedule
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.explore.store.plain import PlainCodec
from pymc_resume.explore.store.stable_hash import stable_hash
from pymc_resume.explore.validate import ModelError, validated
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.semantics import ResumeModel


class NeverAllCommitted(TwoPhase):
    """TwoPhase with an invariant the protocol breaks, deep in the graph."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.invariants = [*self.invariants, Invariant("NeverAllCommitted", self.not_all_committed)]

    def not_all_committed(self, state) -> bool:
        return set(state[0]) != {"committed"}


class EveryoneCanCommit(TwoPhase):
    """TwoPhase where every state should reach one where all managers committed: false from
    any state where one aborted. Its goal flags and edges stay with each state's owner."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.reachability = [
            AlwaysReachable("EveryoneCanCommit", lambda state: set(state[0]) == {"committed"})
        ]


@pytest.fixture(scope="module")
def one_worker():
    return summary(explore(NeverAllCommitted(4)))


@pytest.fixture(scope="module")
def one_worker_reaching():
    return summary(explore(EveryoneCanCommit(4)))


def test_a_plain_model_exchanges_fingerprints_between_workers_only():
    model = validated(TwoPhase(3))
    assert Partition(model, 0, 2).exchange
    assert not Partition(model, 0, 1).exchange
    assert not Partition(model, 0, 2, exact=True).exchange


def test_reachability_properties_and_a_codec_that_fingerprints_its_keys_exchange_too():
    assert Partition(validated(EveryoneCanCommit(3)), 0, 2).exchange
    reference = validated(ResumeModel(load_bounds("small")))
    assert exchange.fingerprinting_codec(reference)
    assert Partition(reference, 0, 2).exchange


@pytest.mark.parametrize("workers", [2, 3])
def test_exchanging_workers_decide_reachability_as_one_worker_does(workers, one_worker_reaching):
    """A state's goal flags come from whichever worker expanded it, its edges from every
    worker's queries: the verdict and the shortest trace are one worker's."""
    found = summary(explore(EveryoneCanCommit(4), workers=workers))
    assert found == one_worker_reaching
    assert found[3]["EveryoneCanCommit"] > 1


def test_a_checkpoint_with_goal_flags_and_edges_held_apart_recovers(tmp_path, one_worker_reaching):
    model = EveryoneCanCommit(4)
    snapshots = SnapshotSchedule(str(tmp_path), every=0.0, run={"what": "two-phase"})
    assert not explore(model, workers=2, max_states=1500, snapshots=snapshots).complete
    recovered = explore(model, workers=2, from_snapshot=snapshot.load(tmp_path), snapshots=snapshots)
    assert summary(recovered) == one_worker_reaching


@pytest.mark.parametrize("workers", [2, 3])
def test_exchanging_workers_find_every_state_once_and_the_shortest_trace(workers, one_worker):
    found = summary(explore(NeverAllCommitted(4), workers=workers))
    assert found == one_worker
    assert found[3]["NeverAllCommitted"] > 3  # (a trace through several partitions)


@pytest.mark.parametrize("workers", [2, 3])
def test_a_checkpoint_taken_while_states_are_held_for_other_owners_recovers(tmp_path, workers, one_worker):
    model = NeverAllCommitted(4)
    snapshots = SnapshotSchedule(str(tmp_path), every=0.0, run={"what": "two-phase"})
    first = explore(model, workers=workers, max_states=1500, snapshots=snapshots)
    assert not first.complete
    saved = snapshot.load(tmp_path)
    assert saved.depth > 3
    recovered = explore(model, workers=workers, from_snapshot=saved, snapshots=snapshots)
    assert summary(recovered) == one_worker


def test_the_smallest_frontier_ships_nothing_and_a_lone_one_ships_everything():
    assert ship_ratios([100, 100]) == [0.0, 0.0]
    assert ship_ratios([1, 0]) == [1.0, 0.0]
    assert ship_ratios([150, 100, 120]) == pytest.approx([1 / 3, 0.0, 1 / 6])


def test_keys_keep_each_fields_values_as_they_were():
    # (0, 1) == (False, True): one value to a dict, but each field must come back as it was.
    keys = HashKeys(PlainCodec())
    first, second = (False, True), (0, 1)
    bools_first = keys.key((first, second))
    ints_first = keys.key((second, first))
    assert [type(v) for v in keys.state(bools_first)[0]] == [bool, bool]
    assert [type(v) for v in keys.state(bools_first)[1]] == [int, int]
    assert [type(v) for v in keys.state(ints_first)[0]] == [bool, bool]  # its first field's table
    # A key's hash is the state's fingerprint, the same in every process.
    assert hash(bools_first) == fingerprint_of_state((first, second))


def test_two_field_values_with_one_hash_are_refused_not_merged(monkeypatch):
    keys = HashKeys(PlainCodec())
    monkeypatch.setattr(exchange, "part_hash", lambda value: 7)
    keys.key(("a",))
    with pytest.raises(ModelError, match="share a 60-bit stable hash"):
        keys.key(("b",))


class SmallInts:
    """(n, "x") for n from 2 down to -6, and from (0, "x") a jump to (-4, "y") and down again:
    12 states, of ints whose hashes Python relates (-1 hashes as -2; 2**63 - 4, -4's hash cut to
    63 bits, as 0 modulo 2**61 - 1)."""

    deadlock_is_error = False

    def initial_states(self):
        return [(2, "x")]

    def successors(self, state):
        if state[0] > -6:
            yield "down", (state[0] - 1, state[1])
        if state[0] == 0:
            yield "jump", (-4, "y")


@pytest.mark.parametrize("workers", [1, 2])
def test_small_negative_ints_are_told_apart_from_small_positive_ones(workers):
    # Two workers once took (0, "x") and (-4, "x") for one state and refused -1 beside -2.
    assert stable_hash(-1) != stable_hash(-2) and stable_hash(-1) == stable_hash(-1.0)
    assert part_hash(-4) != part_hash(0) and hash((part_hash(-4),)) != hash((part_hash(0),))
    assert explore(SmallInts(), workers=workers).distinct_states == 12


def test_every_level_reports_the_states_found_so_far_as_one_worker_does():
    """Progress lines and `--max-states` read the count after each level: a state an owner
    answered as new counts at its level, not one level late."""

    def levels(workers):
        seen = []
        explore(TwoPhase(4), workers=workers, progress=lambda at, final=False: seen.append(at))
        return {at.depth: (at.distinct_states, at.queue) for at in seen}  # each level's last line

    assert levels(2) == levels(1)
