"""Compact state keys: how a model lets the visited store keep small ints instead of objects.

A model may offer `codec()`, returning a fresh `Codec` per partition. `encode` maps a state to a
compact hashable key (usually an int) and `decode` maps the key back to an equal state; the
explorer stores only keys, and expands decoded states. A codec may keep tables (interning), so
keys are only meaningful inside the partition that made them; states travel between partitions
as states, never as keys.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol


class Codec(Protocol):
    def encode(self, state: Hashable) -> Hashable: ...

    def decode(self, key: Hashable) -> Hashable: ...


class Interner:
    """Gives each distinct value a dense id and shares one copy of it."""

    __slots__ = ("ids", "values")

    def __init__(self) -> None:
        self.ids: dict[Hashable, int] = {}
        self.values: list = []

    def __len__(self) -> int:
        return len(self.values)

    def id(self, value: Hashable) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.values)
            self.values.append(value)
        return found
