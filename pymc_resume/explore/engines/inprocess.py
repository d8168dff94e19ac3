"""The one-worker backend: a single partition in this process, no transport."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from pathlib import Path

from pymc_resume.explore.level.partition import Partition
from pymc_resume.explore.properties.reachability import BackwardSearch
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.explore.snapshots.chain import Written
from pymc_resume.explore.store.limits import Limits, MemoryForecast, results_reserve
from pymc_resume.explore.store.memory import peak_bytes
from pymc_resume.explore.validate import ValidModel


class InProcess:
    """Runs the level steps of one partition directly."""

    def __init__(
        self,
        model: ValidModel,
        canonical: Callable | None,
        limits: Limits,
        started: float,
        on_tick: Callable[[int, int, int], None] | None = None,
        stop_at_first: bool = False,
        exact: bool = False,
        coverage: bool = False,
    ) -> None:
        self.partition = Partition(model, 0, 1, canonical, stop_at_first, exact, coverage)
        self.limits = limits
        self.started = started
        self.on_tick = on_tick
        self.stopped_because: str | None = None
        self.forecast = MemoryForecast()
        self.backward: BackwardSearch | None = None  # while reachability is decided

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def seed(self) -> None:
        self.partition.initial_candidates()

    def pending(self) -> int:
        return self.partition.carried()

    def _tick(self) -> bool:
        p = self.partition
        if self.on_tick:
            self.on_tick(len(p), p.generated, self.pending())
        memory = self.memory()
        headroom = self.forecast.headroom(memory)
        self.stopped_because = self.limits.exceeded(len(p), self.started, memory, headroom)
        return self.stopped_because is not None

    def step(self, level: int) -> int:
        """Run one level; return how many states it had."""
        self.partition.step([], level, self._tick)
        self.stopped_because = self.stopped_because or self.partition.stop_reason
        return self.partition.level_size

    def size(self) -> int:
        return len(self.partition)

    def generated(self) -> int:
        return self.partition.generated

    def parent_of(self, gid: int) -> int:
        return self.partition.store.parents[gid]

    def id_of(self, key: Hashable) -> int | None:
        return self.partition.local_id(key)

    def first_bad(self) -> dict[str, tuple[int, int, int]]:
        return dict(self.partition.first_bad)

    def save_state(self, folder: Path, base: bool = True) -> Written:
        """The partition's snapshot piece (whole for a `base`, else what is new since its
        last), written into `folder`; the layout of its levels and the piece."""
        p = self.partition
        size, level_starts = p.stored_levels()
        piece = p.write_snapshot(snapshot.partition_file(folder, 0), base)
        return Written((size,), (tuple(level_starts),), (piece,))

    def load_state(self, saved: snapshot.Snapshot) -> None:
        self.partition.restore(saved.partitions[0], saved.pieces[0], saved.layout)
        if self.partition.generated < len(self.partition):
            raise snapshot.SnapshotError(f"{saved.files[0]}: fewer states generated than stored")

    def memory(self) -> int:
        """The run's peak resident memory so far (this one process), and what deciding
        reachability after the search will add (`limits.results_reserve`)."""
        p = self.partition
        if not p.goals:
            return peak_bytes()
        return peak_bytes() + results_reserve(p.edge_count(), len(p))

    def coverage(self):
        return self.partition.coverage

    def collision_probability(self) -> float | None:
        return self.partition.collision_risk()

    def worker_peak_rss(self) -> tuple[int, ...]:
        return ()  # no worker processes

    def worker_load(self) -> tuple[tuple[int, float], ...]:
        return ()

    count = 1  # one partition, for the backward search (`reachability.shallowest_unable`)

    def _backward(self) -> BackwardSearch:
        assert self.backward is not None, "reach_begin first"
        return self.backward

    def reach_begin(self, prop: int) -> None:
        """Asked only of a model with reachability properties (goals)."""
        self.backward = BackwardSearch(self.partition, prop)

    def reach_round(self, inbound):
        return [self._backward().round(inbound[0])]

    def reach_end(self):
        found, self.backward = self._backward().shallowest_unreached(), None
        return [found]
