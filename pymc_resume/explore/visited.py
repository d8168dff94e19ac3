"""The visited store: every distinct state gets a dense id in discovery order, plus its parent.

Ids are handed out in breadth-first order, so a smaller id never lies deeper than a larger
one; `trace` and `reachability` rely on that. Parents are kept in a flat `array` (8 bytes a
state) rather than a dict of objects.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable

NO_PARENT = -1


class VisitedStore:
    """Maps each distinct state to its id and remembers the id of the state it came from."""

    __slots__ = ("ids", "parents")

    def __init__(self) -> None:
        self.ids: dict[Hashable, int] = {}
        self.parents = array("q")

    def __len__(self) -> int:
        return len(self.parents)

    def add(self, state: Hashable, parent: int) -> tuple[int, bool]:
        """Return the id of `state` and whether it is new (then it is recorded with `parent`)."""
        known = self.ids.get(state)
        if known is not None:
            return known, False
        new_id = len(self.parents)
        self.ids[state] = new_id
        self.parents.append(parent)
        return new_id, True

    def path_to(self, state_id: int) -> list[int]:
        """The ids from an initial state down to `state_id`, following parent links."""
        path = [state_id]
        while (parent := self.parents[path[-1]]) != NO_PARENT:
            path.append(parent)
        path.reverse()
        return path
