"""The visited store of one partition: every distinct state key gets a dense local id in
admission order, and the global id of the state it came from.

Parents live in a flat `array` (8 bytes a state) rather than a dict of objects. The ids
themselves are stored only where the search needs them at once (reachability records an edge
into a known state by its id): elsewhere each key maps to `True` and its id is its position in
the dict's insertion order, which saves an int object a state (TwoPhase N=9, one worker, by
`bench/explore.py`: 110 bytes a state with the ids, 90 without). Looking an id up then builds
an index once, after the search, for the few states a trace names.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable

# The value of every key of a store without ids: one shared object, no allocation a state.
PRESENT = True


class VisitedStore:
    """Maps each distinct state key to its local id; remembers each state's parent."""

    __slots__ = ("ids", "parents", "indexed", "_index")

    ids: dict[Hashable, int | bool]
    parents: array[int]

    def __init__(self, indexed: bool = True) -> None:
        self.ids = {}
        self.parents = array("q")
        self.indexed = indexed  # whether `ids` holds the ids (else PRESENT for every key)
        self._index: dict[Hashable, int] | None = None

    def __len__(self) -> int:
        return len(self.parents)

    def fill(self, keys: Iterable[Hashable]) -> None:
        """Take `keys` (in id order) as the whole store's keys (a checkpoint's)."""
        self.ids = dict(zip(keys, range(len(self.parents)))) if self.indexed else dict.fromkeys(keys, PRESENT)
        self._index = None

    def local_id(self, key: Hashable) -> int | None:
        """The local id of `key`, or None if it was never admitted."""
        if self.indexed:
            return self.ids.get(key)  # type: ignore[return-value]  # indexed: ints
        if key not in self.ids:
            return None
        if self._index is None or len(self._index) != len(self.ids):
            self._index = dict(zip(self.ids, range(len(self.ids))))
        return self._index[key]
