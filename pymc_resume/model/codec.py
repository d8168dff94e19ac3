"""The compact encoding of a `World`: one int of interned component ids.

Worlds share most of their parts with many others (the same thread, the same pair of processes,
the same sink). The codec interns each part once per partition and packs the part ids into a
single int, so the explorer's visited store holds one int per state and every decoded world
shares its parts with all equal ones.
"""

from __future__ import annotations

from pymc_resume.explore.codec import Interner
from pymc_resume.model.state import World

ID_BITS = 32  # bits per part id
ID_MASK = (1 << ID_BITS) - 1
# Key layout, low bits first: budget, processes, sink, number of threads (4 bits), threads.
THREADS_SHIFT = 3 * ID_BITS + 4


class WorldCodec:
    """Per-partition tables of budgets, process tuples, sinks and threads."""

    def __init__(self) -> None:
        self.budgets = Interner()
        self.processes = Interner()
        self.sinks = Interner()
        self.threads = Interner()

    def encode(self, world: World) -> int:
        key = (
            self.budgets.id(world.budget)
            | self.processes.id(world.processes) << ID_BITS
            | self.sinks.id(world.sink) << 2 * ID_BITS
            | len(world.threads) << 3 * ID_BITS
        )
        shift = THREADS_SHIFT
        thread_id = self.threads.id
        for thread in world.threads:
            key |= thread_id(thread) << shift
            shift += ID_BITS
        return key

    def decode(self, key: int) -> World:
        thread_count = key >> 3 * ID_BITS & 0xF
        threads = self.threads.values
        return World(
            self.budgets.values[key & ID_MASK],
            self.processes.values[key >> ID_BITS & ID_MASK],
            tuple(
                threads[key >> (THREADS_SHIFT + i * ID_BITS) & ID_MASK]
                for i in range(thread_count)
            ),
            self.sinks.values[key >> 2 * ID_BITS & ID_MASK],
        )
