"""How a partition's states become keys, and which partition owns each: the model's codec, the
plain codec derived for plainly written states, or the states themselves; and the hash that
places a state, the same in every process. Set up once per partition and never changed, so the
other collaborators and the hot loops read it freely."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from pymc_resume.explore.level import exchange
from pymc_resume.explore.level.pacing import PRIME
from pymc_resume.explore.store.plain import PlainCodec, fits_plain_codec
from pymc_resume.explore.store.stable_hash import stable_hash
from pymc_resume.explore.validate import ValidModel


def state_hasher(model: ValidModel, count: int, exact: bool) -> Callable[[Hashable], int]:
    """The hash that places a (canonical) state among `count` partitions: the same in every
    process, so that a run and its recovery, started apart with different string-hash salts,
    agree on every owner. A model with a codec of its own keeps Python's `hash()`: its states
    must not hash strings. Partitions that exchange fingerprints place a state by its own."""
    if exchange.exchanges_fingerprints(model, count, exact):
        return exchange.state_fingerprint(model)
    if model.partition_key is not None:  # (mypy does not carry this into the lambda)
        return lambda state: stable_hash(model.partition_key(state))  # type: ignore[misc]
    return hash if model.codec is not None else stable_hash


def owner_of(state: Hashable, count: int, hasher: Callable[[Hashable], int]) -> int:
    """The partition that owns `state` among `count` (`hasher` from `state_hasher`)."""
    return hasher(state) % PRIME % count


class Keys:
    """How partition states of `model` among `count` become keys, and where each belongs."""

    def __init__(
        self, model: ValidModel, count: int, exact: bool, canonical: Callable[[Hashable], Hashable] | None
    ) -> None:
        self.count = count
        self.canonical = canonical
        # The model's own codec; else, between several partitions, one derived for plain
        # states (its keys travel as small ints and give stable owners cheaply); else none:
        # alone, a partition keeps the states themselves, which costs less CPU than encoding
        # them and twice the memory (TwoPhase N=7: 3.7-4.0 against 4.8-5.4 CPU seconds, 362
        # against 168 bytes a state).
        # A fingerprint store hashes keys, never states: a plain state's key is a tuple of its
        # fields' ids, whose hash is the same in every process (a string's is not).
        if model.codec is not None:
            self.codec = model.codec()
        elif (count > 1 or not exact) and fits_plain_codec(model.model):
            self.codec = PlainCodec()
        else:
            self.codec = None
        self.encode = self.codec.encode if self.codec else None
        self.decode = self.codec.decode if self.codec else None
        # Between several partitions the derived codec only carries states to their owners
        # and gives their owners: the store keeps the states themselves, each an interned
        # copy that shares its parts with equal parts (as small as its key: a tuple of the
        # same length), so a successor is looked up as it comes, and only a first sighting
        # pays for its encoding (TwoPhase N=7 on two: 2.7 million successors, 0.7 million
        # first sightings).
        self.whole = exact and isinstance(self.codec, PlainCodec) and model.codec is None
        # The plain codec's keys are tuples of ints (its tables' ids): hashed as they are.
        self.int_tuple_keys = isinstance(self.codec, PlainCodec) and not self.whole
        # Where a state belongs: the plain codec hashes a key from its tables' cached hashes.
        self.partition_key = model.partition_key
        self.state_hash = (
            hash if self.codec is None and not self.partition_key else state_hasher(model, count, exact)
        )
        self.key_hash = (
            self.codec.owner_hash if isinstance(self.codec, PlainCodec) and not self.partition_key else None
        )
        # A wire codec's keys travel as they are, each partition translating a sender's ids
        # into its own tables (`peers`); another codec's keys mean nothing elsewhere.
        self.wire = self.codec is not None and hasattr(self.codec, "translate")
        # Between workers, a plainly written model's partitions, or those of a model whose
        # codec fingerprints its keys, exchange fingerprints, not states (`exchange`), and key
        # states by `hash_keys` (its keys' hashes are the states' fingerprints).
        self.exchange = exchange.exchanges_fingerprints(model, count, exact)
        self.hash_keys = exchange.keys_for(self.codec, model) if self.exchange else None

    def owner(self, state: Hashable) -> int:
        """The partition that owns a (canonical) state: as `owner_of`."""
        return self.state_hash(state) % PRIME % self.count

    def key(self, state: Hashable) -> Hashable:
        """The canonical representative of `state` (reduced by symmetry, where the run is)."""
        return self.canonical(state) if self.canonical else state

    def store_key(self, state: Hashable) -> Hashable:
        """What the store keys `state` by: the state itself, or its key in our codec."""
        return state if self.whole or not self.encode else self.encode(state)
