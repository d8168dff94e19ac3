"""The compact encoding of a `World`: one int of interned component ids.

Worlds share most of their parts with many others (the same thread, the same pair of processes,
the same sink). The codec interns each part once per partition and packs the part ids into a
single int, so the explorer's visited store holds one int per state and every decoded world
shares its parts with all equal ones. It is a wire codec (`explore.codec`): a key travels to
another partition as is, with the table entries the receiver has not seen yet, and the
receiver rewrites its part ids.
"""

from __future__ import annotations

from pymc_resume.explore.codec import Interner, InternerTables
from pymc_resume.model.state import World

ID_BITS = 32  # bits per part id
ID_MASK = (1 << ID_BITS) - 1
# Key layout, low bits first: budget, processes, sink, number of threads (4 bits), threads.
THREADS_SHIFT = 3 * ID_BITS + 4


class WorldCodec(InternerTables):
    """Per-partition tables of budgets, process tuples, sinks and threads."""

    def __init__(self) -> None:
        self.budgets = Interner()
        self.processes = Interner()
        self.sinks = Interner()
        self.threads = Interner()
        self.tables = (self.budgets, self.processes, self.sinks, self.threads)

    def encode(self, world: World) -> int:
        # The hot path: most parts of a successor are the very objects of its decoded parent,
        # found by identity (`Interner.by_identity`) before falling back to hashing.
        budget, processes, threads, sink = world
        found = self.budgets.by_identity.get(id(budget))
        key = found if found is not None else self.budgets.id(budget)
        found = self.processes.by_identity.get(id(processes))
        key |= (found if found is not None else self.processes.id(processes)) << ID_BITS
        found = self.sinks.by_identity.get(id(sink))
        key |= (found if found is not None else self.sinks.id(sink)) << 2 * ID_BITS
        key |= len(threads) << 3 * ID_BITS
        shift = THREADS_SHIFT
        by_identity, thread_id = self.threads.by_identity, self.threads.id
        for thread in threads:
            found = by_identity.get(id(thread))
            key |= (found if found is not None else thread_id(thread)) << shift
            shift += ID_BITS
        return key

    def decode(self, key: int) -> World:
        thread_count = key >> 3 * ID_BITS & 0xF
        threads = self.threads.values
        return World(
            self.budgets.values[key & ID_MASK],
            self.processes.values[key >> ID_BITS & ID_MASK],
            tuple(threads[key >> (THREADS_SHIFT + i * ID_BITS) & ID_MASK] for i in range(thread_count)),
            self.sinks.values[key >> 2 * ID_BITS & ID_MASK],
        )

    def translate(self, key: int, translation: list[list[int]]) -> int:
        """Another partition's key (its ids, `translation` maps them to ours) as our key."""
        budgets, processes, sinks, threads = translation
        thread_count = key >> 3 * ID_BITS & 0xF
        own = (
            budgets[key & ID_MASK]
            | processes[key >> ID_BITS & ID_MASK] << ID_BITS
            | sinks[key >> 2 * ID_BITS & ID_MASK] << 2 * ID_BITS
            | thread_count << 3 * ID_BITS
        )
        shift = THREADS_SHIFT
        for _ in range(thread_count):
            own |= threads[key >> shift & ID_MASK] << shift
            shift += ID_BITS
        return own
