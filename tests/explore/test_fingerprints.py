"""The fingerprint store against a dict: the same ids, the same first sightings, in order."""

from __future__ import annotations

import random

import attrs
import numpy as np
import pytest

from pymc_resume.explore import explore
from pymc_resume.explore.store.fingerprints import (
    FingerprintStore,
    collision_probability,
    fingerprints_of,
    summed_risk,
)
from pymc_resume.explore.store.plain import PlainCodec


def test_chunks_get_the_ids_a_dict_gives_in_order_of_first_sighting():
    rng = random.Random(7)
    store, ids = FingerprintStore(), {}
    for chunk in range(120):  # the table grows from 4,096 slots several times on the way
        keys = [rng.randrange(60_000) for _ in range(rng.randrange(0, 2_500))]
        fingerprints, exact = fingerprints_of(keys)
        assert exact
        found, new = store.add(fingerprints, [chunk] * len(keys), hashed=not exact)
        for key, found_id, is_new in zip(keys, found.tolist(), new.tolist()):
            assert is_new == (key not in ids)
            assert found_id == ids.setdefault(key, len(ids))
    assert len(store) == len(ids) and len(store.parents) == len(ids)
    assert all(store.local_id(key) == found_id for key, found_id in ids.items())
    assert store.local_id(60_001) is None
    refilled = FingerprintStore()
    refilled.fill(store.stored().copy(), store.parents)
    assert all(refilled.local_id(key) == found_id for key, found_id in ids.items())


def test_int_keys_are_their_own_fingerprints_and_others_are_hashed_alike_in_every_process():
    assert fingerprints_of([0, 5, 2**64 - 1])[0].tolist() == [0, 5, 2**64 - 1]
    for keys in ([(1, 2), (2, 1)], [2**64, -1], ["a", "b"]):
        fingerprints, exact = fingerprints_of(keys)
        assert not exact and len(set(fingerprints.tolist())) == 2
    # Tuples of ints hash without a salt, strings through `stable_hash`: the values are fixed.
    assert fingerprints_of([(1, 2)])[0].dtype == np.uint64
    assert fingerprints_of(["a"])[0].tolist() == fingerprints_of(["a"])[0].tolist()


def test_wide_int_keys_whose_parts_python_hashes_alike_get_distinct_fingerprints():
    # Python hashes an int modulo 2**61 - 1: folding a key's 64-bit halves made these pairs
    # one fingerprint (the reference semantics' keys are 100 to 200 bits wide).
    modulus = 2**61 - 1
    pairs = [
        (128 << 64, 1 << 132),  # high halves 128 and 2**68, equal modulo it
        (5 + (1 << 70), 5 + modulus + (1 << 70)),  # low halves 5 and 5 + the modulus
        (-(1 << 64), -(2 << 64)),  # high halves -1 and -2, which Python hashes alike
        (1 << 200, (1 << 200) + (modulus << 60)),  # wider than three limbs
    ]
    for pair in pairs:
        fingerprints, exact = fingerprints_of(list(pair))
        assert not exact and fingerprints[0] != fingerprints[1], pair


def test_the_collision_bound_is_the_union_bound_and_sums_over_partitions():
    assert collision_probability(2**20, 2**24) == 2.0**-20
    assert summed_risk([0.0, 2.0**-20]) == 2.0**-20 and summed_risk([None, None]) is None
    assert collision_probability(2**40, 2**40) == 1.0


class IntCounter:
    """States that are small ints: every fingerprint is its state."""

    def initial_states(self):
        return [0]

    def successors(self, n):
        if n < 3000:
            yield "inc", n + 1
            yield "double", min(2 * n, 3000)


@pytest.mark.parametrize("workers", [1, 2])
def test_int_states_run_with_no_collision_risk_even_through_an_empty_chunk(workers):
    # (an empty chunk hashes nothing: it once marked the store hashed, and the run at risk)
    assert fingerprints_of([])[1]
    result = explore(IntCounter(), workers=workers)
    assert result.distinct_states == 3001 and result.collision_probability == 0.0


@attrs.frozen
class Left:
    n: int


@attrs.frozen
class Right:
    n: int


class TwoClasses:
    """States of two classes with equal fields: Left(0..3), Right(0..3) and Right(5)."""

    deadlock_is_error = False

    def initial_states(self):
        return [Left(0), Right(5)]

    def successors(self, state):
        if state.n < 3:
            yield "next", type(state)(state.n + 1)
        if type(state) is Left:
            yield "cross", Right(state.n)


@pytest.mark.parametrize("workers", [1, 2])
def test_states_of_two_classes_with_equal_fields_are_told_apart(workers):
    # The plain codec keys them (class tag, field ids...); Python hashes -1 and -2 alike, so
    # tags -1 and -2 once gave Left(1) and Right(1) one fingerprint: 5 states, not 9.
    codec = PlainCodec()
    assert hash(codec.encode(Left(1))) != hash(codec.encode(Right(1)))
    assert explore(TwoClasses(), workers=workers).distinct_states == 9
