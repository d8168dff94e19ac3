"""A level's successors for other partitions (`explore.outbound`): each sent once, every other
sighting an edge, and a hash two keys share never merging them."""

import random

from pymc_resume.explore.level.batches import KeyColumns, pack, unpack
from pymc_resume.explore.level.outbound import Outbound


class SharedHash:
    """A key whose hash every other one of its kind shares: each is a collision."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SharedHash) and other.name == self.name

    def __repr__(self) -> str:
        return f"SharedHash({self.name!r})"


def sent_with_a_dict(successors, count: int, keep_edges: bool) -> list:
    """What `Outbound` must send, as the dict of keys it replaces sent it: per owner, the keys
    in order of first sighting with their first parents, and (position, parent) repeats."""
    seen: list[dict] = [{} for _ in range(count)]
    batches: list = [([], []) for _ in range(count)]
    for key, parent, owner in successors:
        candidates, repeats = batches[owner]
        position = seen[owner].get(key)
        if position is None:
            seen[owner][key] = len(candidates)
            candidates.append((key, parent))
        elif keep_edges and candidates[position][1] != parent:
            repeats.append((position, parent))
    return batches


def sent_by_outbound(successors, count: int, index: int, keep_edges: bool, chunk: int) -> list:
    outbound = Outbound(count, index, keep_edges)
    for start in range(0, len(successors), chunk):
        keys, parents, owners = zip(*successors[start : start + chunk])
        outbound.add(list(keys), list(parents), list(owners))
    batches = []
    for candidates, repeats, _tables in outbound.batches():
        batches.append((list(candidates), list(repeats)))
    return batches


def edges_of(batch) -> list:
    candidates, repeats = batch
    return sorted(map(repr, candidates + [(candidates[position][0], parent) for position, parent in repeats]))


def random_successors(rng: random.Random, count: int, index: int, length: int, make_key) -> list:
    others = [owner for owner in range(count) if owner != index]
    return [(make_key(rng.randrange(40)), rng.randrange(-1, 30), rng.choice(others)) for _ in range(length)]


def test_each_successor_is_sent_once_in_order_and_every_other_sighting_is_an_edge():
    rng = random.Random(5)
    for count, index in ((2, 0), (2, 1), (3, 1), (4, 0)):
        successors = random_successors(rng, count, index, 500, lambda n: (n, n * n, 10**30 + n))
        for keep_edges in (True, False):
            for chunk in (1, 7, 1000):
                expected = sent_with_a_dict(successors, count, keep_edges)
                assert sent_by_outbound(successors, count, index, keep_edges, chunk) == expected


def test_keys_that_share_a_hash_are_sent_apart_with_their_own_edges():
    rng = random.Random(11)
    successors = random_successors(rng, 3, 2, 300, lambda n: SharedHash(f"k{n % 9}"))
    for chunk in (1, 5, 300):
        got = sent_by_outbound(successors, 3, 2, True, chunk)
        expected = sent_with_a_dict(successors, 3, True)
        for owner in range(3):
            keys = [key for key, _ in got[owner][0]]
            assert len(keys) == len(set(keys)) == len(expected[owner][0])
            assert edges_of(got[owner]) == edges_of(expected[owner])


def test_key_columns_travel_as_bytes_and_come_back_alike():
    outbound = Outbound(2, 0, keep_edges=True)
    outbound.add([(1, 2), 10**40, (1, 2), "s"], [3, -1, 4, 5], [1, 1, 1, 1])
    batch = outbound.batches()[1]
    candidates, repeats, tables = unpack(pack(batch))
    assert type(candidates) is KeyColumns and tables is None
    assert list(candidates) == [((1, 2), 3), (10**40, -1), ("s", 5)]
    assert list(repeats) == [(0, 4)]
    assert outbound.batches()[0][0] == []
