"""The Ray engine: one Ray actor per hash partition, batches exchanged level by level through
Ray's object store (`--engine ray`, the `ray` extra).

Each actor holds one `service.PartitionService`: the partition's visited store, codec tables
and level step, the same code the multiprocess engine runs in its workers. A level is one call
per actor: actor j's `step` returns one batch (bytes) per partition plus its counters, as
separate objects, and the driver passes the references of every batch for partition j to actor
j's next `step`. Ray resolves those references where actor j runs, fetching each batch from the
node that made it: the driver handles references and counters, never a batch (no coordinator
bottleneck). Traces, reachability and snapshots ask the actors as the multiprocess engine asks
its workers, so counts, verdicts, shortest-trace lengths and checkpoints are the same.

`address` joins an existing cluster (`ray start --head` on one host, `ray start --address ...`
on the others; every host needs this package and the model importable); without it a local
Ray instance is started for the run and stopped after it. Owners agree across hosts because
they come from `stable_hash` (or a codec model's `hash()` of string-free keys), never from a
per-process salt. This is the only module that imports Ray.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import numpy as np

from pymc_resume.errors import BadInput, EnvironmentProblem
from pymc_resume.explore.engines.service import PartitionService, Stepped, own_peak_bytes
from pymc_resume.explore.level import exchange
from pymc_resume.explore.level.keys import owner_of, state_hasher
from pymc_resume.explore.level.partition import Partition
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.explore.snapshots.chain import Written
from pymc_resume.explore.snapshots.snapshot import Layout
from pymc_resume.explore.store.fingerprints import summed_risk
from pymc_resume.explore.store.limits import Limits, MemoryForecast, results_reserve
from pymc_resume.explore.store.memory import die_with_parent
from pymc_resume.explore.target import is_file_module, load_file
from pymc_resume.explore.validate import ValidModel

try:
    import ray
except ImportError:  # the optional extra: `pip install 'pymc-resume[ray]'`
    ray = None  # type: ignore[assignment]


class RayPartition:
    """An actor's body: one partition, answering the driver (see `PartitionService`).

    Limits are checked here during a level as the multiprocess workers check them: time from
    the driver's start (sent as wall-clock time, since each host has its own monotonic clock)
    and memory as this actor's peak plus the rest of the run's, as last reported.
    """

    def __init__(
        self,
        model_files: list[str],
        pickled_model: bytes,
        index: int,
        count: int,
        stop_at_first: bool,
        limits: Limits,
        started_at: float,
        exact: bool = False,
    ) -> None:
        # The actor's parent is its node's raylet: when a killed driver takes the local instance
        # down with it, the partition goes too instead of lingering as an orphan.
        die_with_parent()
        # Model files first, under the names the driver gave them: the model, and the classes
        # of its states (which the plain codec finds by module and name), refer to them.
        for path in model_files:
            load_file(path)
        model, canonical = pickle.loads(pickled_model)
        self.limits = limits
        # The driver's start on this host's monotonic clock.
        self.started = time.monotonic() - (time.time() - started_at)
        self.elsewhere = 0  # the peak bytes of the run's other processes, as last reported
        self.forecast = MemoryForecast()
        self.count = count
        self.service = PartitionService(
            model, index, count, canonical, stop_at_first, self._limit_check, exact
        )

    def _limit_check(self, partition: Partition) -> str | None:
        memory = own_peak_bytes() + self.elsewhere
        if partition.edge_sources is not None:  # the reachability still to decide, as if
            count = self.count  # every partition were this one
            memory += results_reserve(partition.edge_count() * count, len(partition) * count)
        return self.limits.exceeded(0, self.started, memory, self.forecast.headroom(memory))

    def seed(self):
        pending, outbound = self.service.seed()
        return (*outbound, (pending, own_peak_bytes()))

    def step(self, level: int, elsewhere: int, ship_ratio: float, *inbound: bytes):
        self.elsewhere = elsewhere
        stepped, outbound = self.service.step(list(inbound), level, ship_ratio)
        return (*outbound, stepped)

    def answer(self, *inbound: bytes):
        held, news, size, outbound = self.service.answer(list(inbound))
        return (*outbound, (held, news, size))

    def handover(self, *inbound: bytes):
        return (*self.service.handover(list(inbound)), None)

    def parent(self, gid: int) -> int:
        return self.service.parent(gid)

    def lookup(self, key: Hashable) -> int | None:
        return self.service.lookup(key)

    def results(self):
        return self.service.results()

    def reach_begin(self, prop: int) -> None:
        self.service.reach_begin(prop)

    def reach_round(self, *inbound: bytes) -> list[bytes]:
        return self.service.reach_round(list(inbound))

    def reach_end(self):
        return self.service.reach_end()

    def snapshot(self, base: bool, *inbound: bytes):
        return self.service.snapshot(list(inbound), base)

    def restore(self, pieces: tuple[bytes, ...], wheres: tuple[str, ...], layout: Layout):
        try:
            return self.service.restore(list(pieces), list(wheres), layout)
        except snapshot.SnapshotError as error:
            return str(error)  # refused: the driver raises it (Ray would wrap the exception)


def _require_ray() -> None:
    if ray is None:
        raise EnvironmentProblem(
            "--engine ray: Ray is not installed; install the extra with pip install 'pymc-resume[ray]'"
        )


def _start(address: str | None, count: int) -> bool:
    """Connect to the cluster at `address`, or start a local Ray instance with a CPU for each
    partition; True when this run started Ray (and so stops it)."""
    if ray.is_initialized():
        return False
    # The actors import what this process can: its module search path goes with the job (on
    # a cluster, each host needs the same folders, or the model installed).
    search_path = os.pathsep.join(folder for folder in sys.path if folder)
    options: dict[str, Any] = {
        "logging_level": logging.ERROR,
        "log_to_driver": False,
        "include_dashboard": False,
        "runtime_env": {"env_vars": {"PYTHONPATH": search_path}},
    }
    # Ray's core installs its own handlers (SIGTERM aborts the process): the command's own
    # handlers are put back, so that SIGTERM and Ctrl-C still stop the run cleanly.
    handlers = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        if address:
            ray.init(address=address, **options)
        else:
            ray.init(num_cpus=max(count, os.cpu_count() or 1), **options)
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise EnvironmentProblem(
            f"--engine ray: could not start or join {where}: {' '.join(str(error).split())[:300]}"
        ) from None
    finally:
        for number, handler in handlers.items():
            if handler is not None:
                signal.signal(number, handler)
    return True


def _model_files() -> list[str]:
    """The model files this process loaded by path (`explore path/to/model.py:factory`): an
    actor loads them under the same module names before it unpickles the model."""
    return [
        str(module.__file__)
        for name, module in list(sys.modules.items())
        if is_file_module(name) and getattr(module, "__file__", None)
    ]


class RayEngine:
    """`count` Ray actors, each owning one hash partition; the backend `search` drives."""

    def __init__(
        self,
        model: ValidModel,
        count: int,
        canonical: Callable | None,
        limits: Limits,
        started: float,
        *,
        stop_at_first: bool = False,
        address: str | None = None,
        exact: bool = False,
    ) -> None:
        _require_ray()
        self.count = count
        self.state_hash = state_hasher(model, count, exact)
        # Whether the actors exchange fingerprints (`exchange`): then a level is two rounds.
        self.exchange = exchange.exchanges_fingerprints(model, count, exact)
        self.ship_ratios = [0.0] * count
        self.goals = bool(model.reachability)
        self.limits = limits
        self.started_ray = _start(address, count)
        try:
            cpus = ray.cluster_resources().get("CPU", 0)
            if cpus < count:
                raise BadInput(
                    f"--workers {count}: the Ray cluster has {cpus:g} CPUs, and each "
                    "partition's actor takes one"
                )
            actor: Any = ray.remote(num_cpus=1, max_restarts=0)(RayPartition)
            started_at = time.time() - (time.monotonic() - started)
            files = _model_files()
            pickled_model = ray.put(ray.cloudpickle.dumps((model, canonical)))
            # SPREAD: partitions on as many nodes as there are, so that memory adds up.
            self.actors: list[Any] = [
                actor.options(scheduling_strategy="SPREAD").remote(
                    files, pickled_model, index, count, stop_at_first, limits, started_at, exact
                )
                for index in range(count)
            ]
        except BaseException:
            self._stop_ray()
            raise
        self.routed: list[list] = [[] for _ in range(count)]  # object refs of batches, by owner
        self.peaks = [0] * count
        self._pending = 0
        self._size = 0
        self._generated = 0
        self.stopped_because: str | None = None

    def __enter__(self) -> RayEngine:
        return self

    def __exit__(self, kind, error, trace) -> None:
        for actor in getattr(self, "actors", ()):
            ray.kill(actor)
        self._stop_ray()

    def _stop_ray(self) -> None:
        if self.started_ray:
            ray.shutdown()

    def _get(self, refs):
        """Ray's answers; an actor that died or raised is one line (its traceback kept)."""
        try:
            return ray.get(refs)
        except ray.exceptions.RayActorError as error:
            raise EnvironmentProblem(
                f"a Ray partition actor died (killed, or out of memory?): "
                f"{' '.join(str(error).split())[:300]}"
            ) from None
        except ray.exceptions.RayTaskError as error:
            raise EnvironmentProblem(f"a Ray partition actor failed:\n{error}") from None

    def _route(self, calls: list) -> list:
        """Each actor's returns: one batch reference per partition, then its counters. The
        references are routed to their owners unread; the counters are returned."""
        self.routed = [[refs[owner] for refs in calls] for owner in range(self.count)]
        return self._get([refs[-1] for refs in calls])

    def seed(self) -> None:
        calls = [actor.seed.options(num_returns=self.count + 1).remote() for actor in self.actors]
        counters = self._route(calls)
        self._pending = sum(pending for pending, _peak in counters)
        self.peaks = [peak for _pending, peak in counters]
        if self.exchange:
            self._answer()

    def _answer(self) -> None:
        """Exchanging, a level's second round (as `workers.WorkerPool._answer`)."""
        calls = [
            actor.answer.options(num_returns=self.count + 1).remote(*self.routed[index])
            for index, actor in enumerate(self.actors)
        ]
        counters = self._route(calls)
        self._size = sum(size for _own, _news, size in counters)  # with what the answers admitted
        held = [
            own + sum(news[i] for _own, news, _size in counters)
            for i, (own, _news, _size) in enumerate(counters)
        ]
        self._pending = sum(held)
        self.ship_ratios = exchange.ship_ratios(held)

    def pending(self) -> int:
        return self._pending

    def step(self, level: int) -> int:
        total = own_peak_bytes() + sum(self.peaks)
        calls = [
            actor.step.options(num_returns=self.count + 1).remote(
                level, total - self.peaks[index], self.ship_ratios[index], *self.routed[index]
            )
            for index, actor in enumerate(self.actors)
        ]
        counters: list[Stepped] = self._route(calls)
        self._size = sum(c.size for c in counters)
        self._generated = sum(c.generated for c in counters)
        self._pending = sum(c.pending for c in counters)
        self.peaks = [c.peak for c in counters]
        reasons = [c.stopped_because for c in counters if c.stopped_because]
        if reasons:
            self.stopped_because = reasons[0]
        if self.exchange:
            self._answer()
        return sum(c.added for c in counters)

    def size(self) -> int:
        return self._size

    def generated(self) -> int:
        return self._generated

    def parent_of(self, gid: int) -> int:
        return self._get(self.actors[gid % self.count].parent.remote(gid))

    def id_of(self, key: Hashable) -> int | None:
        owner = owner_of(key, self.count, self.state_hash)
        return self._get(self.actors[owner].lookup.remote(key))

    def _results(self) -> list:
        return self._get([actor.results.remote() for actor in self.actors])

    def first_bad(self) -> dict[str, tuple[int, int]]:
        merged: dict[str, tuple[int, int]] = {}
        for first_bad, _peak, _risk, _load in self._results():
            for name, found in first_bad.items():
                if name not in merged or found < merged[name]:
                    merged[name] = found
        return merged

    def save_state(self, folder: Path, base: bool = True) -> Written:
        """Every partition's snapshot piece (whole for a `base`, else what is new since its
        last), written into `folder` here (an actor may be on another host: it sends its
        piece's bytes); the layout of their levels and the pieces. Each actor
        first takes the batches routed to it (they are its candidates from now on); exchanging,
        the actors first hand each other the states they hold for other owners."""
        if self.exchange:
            calls = [
                actor.handover.options(num_returns=self.count + 1).remote(*self.routed[index])
                for index, actor in enumerate(self.actors)
            ]
            self._route(calls)
        saved = self._get(
            [actor.snapshot.remote(base, *self.routed[index]) for index, actor in enumerate(self.actors)]
        )
        self.routed = [[] for _ in range(self.count)]
        pieces = tuple(
            snapshot.write_partition_bytes(snapshot.partition_file(folder, index), data)
            for index, (_size, _starts, data) in enumerate(saved)
        )
        sizes = tuple(size for size, _starts, _data in saved)
        return Written(sizes, tuple(tuple(starts) for _size, starts, _data in saved), pieces)

    def load_state(self, saved: snapshot.Snapshot) -> None:
        """Restore every partition from `saved` (each actor checks its own file)."""
        replies = self._get(
            [
                actor.restore.remote(saved.partitions[index], saved.pieces[index], saved.layout)
                for index, actor in enumerate(self.actors)
            ]
        )
        refused = [reply for reply in replies if isinstance(reply, str)]
        if refused:
            raise snapshot.SnapshotError(refused[0])
        self.routed = [[] for _ in range(self.count)]
        self._size = sum(saved.layout.sizes)
        self._generated = sum(generated for generated, _carried in replies)
        if self._generated < self._size:
            raise snapshot.SnapshotError(
                f"{saved.files[0]}: {self._generated:,} states generated, fewer than the "
                f"{self._size:,} stored"
            )
        self._pending = sum(carried for _generated, carried in replies)

    def memory(self) -> int:
        """The run's peak resident memory so far (the driver's and every actor's peak as last
        reported, summed), and what deciding reachability after the search will add."""
        memory = own_peak_bytes() + sum(self.peaks)
        if self.goals:
            memory += results_reserve(self._generated, self._size)
        return memory

    def reach_begin(self, prop: int) -> None:
        self._get([actor.reach_begin.remote(prop) for actor in self.actors])

    def reach_round(self, inbound: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """One round of the backward search (`reachability`): int64 arrays of local ids."""
        calls = [
            actor.reach_round.remote(*(ids.tobytes() for ids in inbound[index]))
            for index, actor in enumerate(self.actors)
        ]
        replies = self._get(calls)
        return [[np.frombuffer(chunk, dtype=np.int64) for chunk in chunks] for chunks in replies]

    def reach_end(self) -> list[tuple[int, int] | None]:
        return self._get([actor.reach_end.remote() for actor in self.actors])

    def worker_peak_rss(self) -> tuple[int, ...]:
        return tuple(peak for _first_bad, peak, _risk, _load in self._results())

    def collision_probability(self) -> float | None:
        return summed_risk(risk for _first_bad, _peak, risk, _load in self._results())

    def worker_load(self) -> tuple[tuple[int, float], ...]:
        """Per partition: its states, and the seconds it spent stepping levels."""
        return tuple(load for _first_bad, _peak, _risk, load in self._results())
