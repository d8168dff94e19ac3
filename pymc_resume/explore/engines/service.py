"""One partition's side of a many-worker search, whatever carries the requests.

An engine with several workers asks each partition the same things: seed, step a level, a
parent, an id, the results, a snapshot, a restore. `PartitionService` answers them with plain
values and batches as bytes (`batches.pack`), and knows nothing of how requests arrive: the
multiprocess engine (`workers`) reads them from a pipe, the Ray engine (`ray_engine`) receives
them as actor calls. Both run exactly this code, so their counts cannot drift apart.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Hashable

import attrs
import numpy as np

from pymc_resume.explore.level import exchange
from pymc_resume.explore.level.batches import empty_batch, pack, unpack, unpack_all
from pymc_resume.explore.level.partition import Partition
from pymc_resume.explore.properties.reachability import BackwardSearch
from pymc_resume.explore.snapshots.chain import Piece
from pymc_resume.explore.snapshots.snapshot import Layout
from pymc_resume.explore.store.memory import peak_bytes
from pymc_resume.explore.validate import ValidModel

# Asked every `pacing.TICK_EVERY` expansions: why the run must stop now, or None.
LimitCheck = Callable[[Partition], str | None]


@attrs.frozen
class Stepped:
    """What a partition reports after a level: states it added, its size, states generated,
    why it stopped in the middle of the level (if it did), the candidates waiting for the next
    level (its own and those it sends), and its peak resident bytes so far."""

    added: int
    size: int
    generated: int
    stopped_because: str | None
    pending: int
    peak: int


def own_peak_bytes() -> int:
    """This process's peak resident bytes (VmHWM, else ru_maxrss, in KiB on Linux)."""
    return peak_bytes() or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PartitionService:
    """Partition `index` of `count`, answering an engine's requests."""

    def __init__(
        self,
        model: ValidModel,
        index: int,
        count: int,
        canonical,
        stop_at_first: bool,
        limit_check: LimitCheck,
        exact: bool = False,
    ) -> None:
        self.partition = Partition(model, index, count, canonical, stop_at_first, exact)
        self.index, self.count = index, count
        self.limit_check = limit_check
        self.limit_reason: str | None = None
        self.busy = 0.0  # seconds spent stepping levels
        self.backward: BackwardSearch | None = None  # after the search, while reachability is decided

    def _tick(self) -> bool:
        self.limit_reason = self.limit_check(self.partition)
        return self.limit_reason is not None

    def _pending(self, outbound) -> int:
        return self.partition.carried() + sum(len(batch[0]) for batch in outbound)

    def seed(self) -> tuple[int, list[bytes]]:
        """The initial states (partition 0 generates them all, once): candidates waiting,
        and one batch for each partition."""
        p = self.partition
        outbound = p.initial_candidates() if self.index == 0 else [empty_batch() for _ in range(self.count)]
        return self._pending(outbound), self._packed(outbound)

    def _packed(self, outbound: list) -> list[bytes]:
        """One chunk per partition: a batch, or exchanging, the batch shipped and the queries."""
        if not self.partition.exchange:
            return [pack(batch) for batch in outbound]
        queries = self.partition.queries
        reports: list = queries.reports or [None] * len(outbound)
        chunks = [
            exchange.pack_outbound(batch, prints, parents, reported)
            for batch, prints, parents, reported in zip(
                outbound, queries.fingerprints, queries.parents, reports
            )
        ]
        # (sent: the keys stay until the answers come)
        queries.fingerprints, queries.parents = [[] for _ in outbound], [[] for _ in outbound]
        if queries.reports:
            queries.reports = [exchange.GoalReports(len(self.partition.goals)) for _ in outbound]
        return chunks

    def step(self, inbound: list[bytes], level: int, ship_ratio: float = 0.0) -> tuple[Stepped, list[bytes]]:
        """Run `level` on the batches sent here (exchanging: the answers to this partition's
        queries, and `ship_ratio` from `exchange.ship_ratios`); what happened, and one chunk
        per partition."""
        p = self.partition
        began = time.perf_counter()
        if p.exchange:
            p.ship_ratio = ship_ratio
            answers = [np.frombuffer(chunk, dtype=np.int64) for chunk in inbound]
            outbound = p.step(answers, level, self._tick)
        else:
            outbound = p.step(unpack_all(inbound), level, self._tick)
        self.busy += time.perf_counter() - began
        stopped = (self.limit_reason or p.stop_reason) if p.stopped else None
        stepped = Stepped(
            p.level_size, len(p), p.generated, stopped, self._pending(outbound), own_peak_bytes()
        )
        return stepped, self._packed(outbound)

    def answer(self, inbound: list[bytes]) -> tuple[int, list[int], int, list[bytes]]:
        """Exchanging, the level's second round: admit the states shipped here and answer the
        queries (one chunk from each partition, in order). Returns the states this partition
        holds for the next level, how many of each partition's queries were new (the states
        it holds for the next level), the states it has stored, and one answer per partition."""
        p = self.partition
        began = time.perf_counter()
        answers = exchange.answer(p, [exchange.unpack_outbound(chunk) for chunk in inbound])
        self.busy += time.perf_counter() - began
        news = [int((gids >= 0).sum()) for gids in answers]
        return p.carried(), news, len(p), [gids.tobytes() for gids in answers]

    def handover(self, inbound: list[bytes]) -> list[bytes]:
        """Exchanging, before a checkpoint: take the answers sent here, and hand the states
        held for other owners to them (`exchange.handover`), one batch per partition."""
        p = self.partition
        exchange.receive_answers(p, [np.frombuffer(chunk, dtype=np.int64) for chunk in inbound])
        return [pack(batch) for batch in exchange.batches_of(p, exchange.handover(p))]

    def _take(self, inbound: list[bytes]) -> None:
        batches = [unpack(chunk) for chunk in inbound]
        if self.partition.exchange:
            exchange.take_handover(self.partition, batches)
        else:
            self.partition.take(batches)

    def parent(self, gid: int) -> int:
        return self.partition.store.parents[gid // self.count]

    def lookup(self, key: Hashable) -> int | None:
        """The global id of a (canonical) state owned here, or None."""
        local = self.partition.local_id(key)
        return None if local is None else self.partition.gid(local)

    def results(self) -> tuple[dict, int, float | None, tuple[int, float]]:
        """The first violation of each property found here, this process's peak bytes, the
        bound on a fingerprint collision here (None for an exact store), and this partition's
        load: its states and the seconds it spent stepping levels (the rest of the run it
        waited for the others)."""
        p = self.partition
        return p.first_bad, own_peak_bytes(), p.collision_risk(), (len(p), self.busy)

    def _backward(self) -> BackwardSearch:
        assert self.backward is not None, "reach_begin first"
        return self.backward

    def reach_begin(self, prop: int) -> None:
        """Start this partition's side of the backward search for reachability property
        `prop` (the edges stay here: see `reachability`)."""
        self.backward = BackwardSearch(self.partition, prop)

    def reach_round(self, inbound: list[bytes]) -> list[bytes]:
        """One round of it: the local ids sent here (int64 arrays as bytes) in, the sources
        found for each partition out."""
        arrivals = [np.frombuffer(chunk, dtype=np.int64) for chunk in inbound]
        return [found.tobytes() for found in self._backward().round(arrivals)]

    def reach_end(self) -> tuple[int, int] | None:
        """(level, global id) of the shallowest state here that reaches no goal, or None."""
        found, self.backward = self._backward().shallowest_unreached(), None
        return found

    def snapshot(self, inbound: list[bytes], base: bool) -> tuple[int, list[int], bytes]:
        """Take the batches routed here for the next level, then this partition's snapshot
        piece (whole for a `base`, else what is new since its last): its size, the start of
        each of its levels, and the piece's bytes (for a coordinator that may be on another
        host: Ray's)."""
        p = self.partition
        self._take(inbound)
        size, level_starts = p.stored_levels()
        return size, level_starts, p.snapshot(base)

    def snapshot_to(self, inbound: list[bytes], path: str, base: bool) -> tuple[int, list[int], Piece]:
        """As `snapshot`, but this partition writes its piece at `path` itself, a MiB at a
        time: its size, the start of each of its levels, and what the manifest records of it."""
        p = self.partition
        self._take(inbound)
        size, level_starts = p.stored_levels()
        return size, level_starts, p.write_snapshot(path, base)

    def restore(self, pieces: list[bytes], wheres: list[str], layout: Layout) -> tuple[int, int]:
        """Take the state a chain of snapshot pieces holds (SnapshotError if it does not
        fit): states generated so far, and candidates waiting."""
        p = self.partition
        p.restore(pieces, wheres, layout)
        return p.generated, p.carried()
