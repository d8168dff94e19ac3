"""The reference semantics' compact encoding: keys round-trip, and travel between partitions."""

import pickle

import pytest

from pymc_resume.explore.store import codec as codec_module
from pymc_resume.explore.validate import ModelError
from pymc_resume.model.bounds import load_bounds
from pymc_resume.model.codec import WorldCodec
from pymc_resume.model.semantics import ResumeModel


def some_worlds(limit=3000):
    model = ResumeModel(load_bounds("small"))
    seen, frontier = [], list(model.initial_states())
    while frontier and len(seen) < limit:
        world = frontier.pop()
        seen.append(world)
        frontier.extend(model.canonical(s) for _, s in model.successors(world))
    return seen


def test_keys_round_trip_and_share_parts():
    codec = WorldCodec()
    worlds = some_worlds()
    for world in worlds:
        assert codec.decode(codec.encode(world)) == world
    decoded = codec.decode(codec.encode(worlds[-1]))
    assert codec.encode(decoded) == codec.encode(worlds[-1])  # found by identity


def test_a_key_translated_from_another_partition_is_the_receivers_own_key():
    sender, receiver = WorldCodec(), WorldCodec()
    worlds = some_worlds()
    for world in worlds[::3]:
        receiver.encode(world)  # the receiver's tables already hold some parts, in its order
    translation, mark = receiver.new_translation(), None
    for start in range(0, len(worlds), 500):  # batches, each with the entries new since the last
        keys = [sender.encode(world) for world in worlds[start : start + 500]]
        mark, delta = sender.delta(mark)
        receiver.absorb(translation, pickle.loads(pickle.dumps(delta)))
        for world, key in zip(worlds[start : start + 500], keys):
            assert receiver.translate(key, translation) == receiver.encode(world)


def test_a_restored_codec_rebuilds_its_identity_index():
    codec = WorldCodec()
    worlds = some_worlds(500)
    keys = [codec.encode(world) for world in worlds]
    restored = pickle.loads(pickle.dumps(codec))
    assert [restored.encode(world) for world in worlds] == keys
    for table in restored.tables:
        assert table.by_identity == {id(value): i for i, value in enumerate(table.values)}


def test_a_worlds_fingerprint_is_the_same_whichever_tables_encoded_it():
    """Workers that exchange fingerprints (`explore.exchange`) compare worlds by fingerprint:
    two partitions' tables give a world different ids, never a different fingerprint."""
    first, second = WorldCodec(), WorldCodec()
    worlds = some_worlds()
    for world in reversed(worlds):
        second.encode(world)  # the other partition met them in another order
    for world in worlds:
        key, fingerprint = first.encode_fingerprinted(world)
        assert key == first.encode(world)
        assert fingerprint == first.fingerprint(key) == WorldCodec.fingerprint_of_state(world)
        assert fingerprint == second.fingerprint(second.encode(world))
    assert len({WorldCodec.fingerprint_of_state(world) for world in worlds}) == len(set(worlds))


def test_two_parts_with_one_hash_are_refused_not_merged(monkeypatch):
    monkeypatch.setattr(codec_module, "part_hash", lambda value: 7)
    worlds = some_worlds(50)
    codec = WorldCodec()
    with pytest.raises(ModelError, match="share a 60-bit stable hash"):
        for world in worlds:
            codec.encode_fingerprinted(world)
