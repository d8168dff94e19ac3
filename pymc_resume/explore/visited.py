"""The visited store of one partition: every distinct state key gets a dense local id in
admission order, and the global id of the state it came from.

Parents live in a flat `array` (8 bytes a state) rather than a dict of objects.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable


class VisitedStore:
    """Maps each distinct state key to its local id; remembers each state's parent."""

    __slots__ = ("ids", "parents")

    ids: dict[Hashable, int]
    parents: array[int]

    def __getstate__(self):
        return self.ids, self.parents

    def __setstate__(self, state) -> None:
        self.ids, self.parents = state

    def __init__(self) -> None:
        self.ids = {}
        self.parents = array("q")

    def __len__(self) -> int:
        return len(self.parents)
