"""What a partition keeps about the other partitions: the wire codec's tables it has sent each
one and the translations of what each sent it, the states it has forwarded to their owners
already, and, where partitions exchange fingerprints (`exchange`), the level's queries, the
share it ships whole and the states it holds for other owners. The bookkeeping of the exchange,
apart from the step that does it, so that the step reads as what happens to a state."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from pymc_resume.explore.level import exchange
from pymc_resume.explore.level.batches import Batch, Columns, KeyColumns
from pymc_resume.explore.level.keys import Keys
from pymc_resume.explore.store.frontier import Frontier


class Peers:
    """Partition `index`'s bookkeeping of the other partitions among `count` (`goals`: how
    many reachability goals the model has, whose flags travel with the queries)."""

    def __init__(self, keys: Keys, index: int, count: int, goals: int) -> None:
        self.keys, self.index = keys, index
        # A wire codec's keys travel as they are (see `codec`): `sent` is, per destination, the
        # mark of our tables at our last batch to it; `translations` map each sender's ids.
        self.sent: list[object | None] = [None] * count
        self.translations = [keys.codec.new_translation() for _ in range(count)] if keys.wire else None
        # Keys of states this partition already sent to their owners, so that each crosses at
        # most once (not kept when edges are: every edge must reach the target's owner).
        self.forwarded: dict = {}
        # Exchanging fingerprints: this level's queries (and, with goals, the goal flags of
        # other owners' states expanded here), the share of them shipped whole, and the states
        # this partition keeps for other owners (their keys here, their ids there).
        self.queries = exchange.Queries(count, goals)
        self.ship_ratio = 0.0
        self.foreign = Frontier()
        self.foreign_gids = array("q")

    def with_tables(self, outbound: list[Batch]) -> list[Batch]:
        """Attach, to each non-empty batch for another partition, our table entries that
        partition has not received yet (wire codecs only)."""
        if not self.keys.wire:
            return outbound
        codec = self.keys.codec
        for owner, (candidates, repeats, _) in enumerate(outbound):
            if candidates and owner != self.index:
                self.sent[owner], delta = codec.delta(self.sent[owner])
                outbound[owner] = (candidates, repeats, (self.index, delta))
        return outbound

    def received(self, candidates: Sequence | Columns, tables: tuple[int, object]) -> list:
        """Candidates another partition sent with its new table entries (`with_tables`), in
        our keys: the entries absorbed into the translation of that sender's ids, then the
        keys translated (only a wire partition, which has translations, gets tables)."""
        source, delta = tables
        translation = self.translations[source]  # type: ignore[index]
        self.keys.codec.absorb(translation, delta)
        return self.translated(candidates, translation)

    def translated(self, candidates: Sequence | Columns, translation) -> list:
        """Another partition's candidates with our keys (a wire codec's translation), or, where
        the store keeps states whole, as our interned states."""
        codec = self.keys.codec
        if self.keys.whole:
            return codec.states_of_batch(candidates, translation)
        if type(candidates) is KeyColumns:
            keys = getattr(codec, "translate_keys", None)
            if keys is not None:
                return KeyColumns(keys(candidates.keys, translation), candidates.parents)  # type: ignore[return-value]
            translate = codec.translate
            return KeyColumns([translate(key, translation) for key in candidates.keys], candidates.parents)  # type: ignore[return-value]
        batch = getattr(codec, "translate_batch", None)
        if batch is not None:
            return batch(candidates, translation)
        translate = codec.translate
        return [(translate(key, translation), parent) for key, parent in candidates]
