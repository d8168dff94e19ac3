"""The compact encoding of a `World`: one int of interned component ids.

Worlds share most of their parts with many others (the same thread, the same pair of processes,
the same sink). The codec interns each part once per partition and packs the part ids into a
single int, so the explorer's visited store holds one int per state and every decoded world
shares its parts with all equal ones. It is a wire codec (`explore.codec`): a key travels to
another partition as is, with the table entries the receiver has not seen yet, and the
receiver rewrites its part ids.

Between workers that exchange fingerprints (`explore.exchange`) a world's fingerprint must be
the same in every process, which its key's ids are not: it is the hash of its parts' stable
hashes (`fingerprint_of_state`), which the codec keeps by id beside its tables, so that a
successor's fingerprint costs a list lookup a part on top of its encoding.
"""

from __future__ import annotations

from pymc_resume.explore.store.codec import Interner, InternerTables, PartHashes
from pymc_resume.explore.store.stable_hash import part_hash
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
        self.part_hashes = tuple(PartHashes(table) for table in self.tables)

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

    @staticmethod
    def fingerprint_of_state(world: World) -> int:
        """A world's fingerprint between exchanging partitions: the same in every process."""
        budget, processes, threads, sink = world
        return hash((part_hash(budget), part_hash(processes), part_hash(sink), *map(part_hash, threads)))

    def fingerprint(self, key: int) -> int:
        """`fingerprint_of_state` of the world `key` stands for, from the tables' part hashes."""
        budgets, processes, sinks, threads = (hashes.extended() for hashes in self.part_hashes)
        return hash(
            (
                budgets[key & ID_MASK],
                processes[key >> ID_BITS & ID_MASK],
                sinks[key >> 2 * ID_BITS & ID_MASK],
                *(
                    threads[key >> (THREADS_SHIFT + i * ID_BITS) & ID_MASK]
                    for i in range(key >> 3 * ID_BITS & 0xF)
                ),
            )
        )

    def encode_fingerprinted(self, world: World) -> tuple[int, int]:
        """`encode(world)` and `fingerprint` of it, in one pass (the exchanging hot loop's).
        It repeats `encode`'s lookups rather than calling it: with the ids at hand, the part
        hashes cost a list lookup each (0.23 µs a successor), and `encode` stays as fast for
        one worker, which needs no fingerprint of this kind."""
        budget, processes, threads, sink = world
        budget_hashes, processes_hashes, sink_hashes, thread_hashes = self.part_hashes
        try:  # (IndexError: a value interned since its table's hashes were last extended)
            found = self.budgets.by_identity.get(id(budget))
            key = found if found is not None else self.budgets.id(budget)
            parts = [budget_hashes.hashes[key]]
            found = self.processes.by_identity.get(id(processes))
            found = found if found is not None else self.processes.id(processes)
            key |= found << ID_BITS
            parts.append(processes_hashes.hashes[found])
            found = self.sinks.by_identity.get(id(sink))
            found = found if found is not None else self.sinks.id(sink)
            key |= found << 2 * ID_BITS
            parts.append(sink_hashes.hashes[found])
            key |= len(threads) << 3 * ID_BITS
            shift = THREADS_SHIFT
            by_identity, thread_id, hashes = self.threads.by_identity, self.threads.id, thread_hashes.hashes
            for thread in threads:
                found = by_identity.get(id(thread))
                if found is None:
                    found = thread_id(thread)
                key |= found << shift
                shift += ID_BITS
                parts.append(hashes[found])
            return key, hash(tuple(parts))
        except IndexError:
            key = self.encode(world)
            return key, self.fingerprint(key)
