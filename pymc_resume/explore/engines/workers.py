"""The many-worker backend: one partition per process, batches exchanged level by level.

The coordinator (this process) owns no states: it sends each worker its inbound batches, the
worker runs `Partition.step` (through `service.PartitionService`, the same code the Ray engine
runs) and returns its outbound batches as bytes (see `batches`: raw arrays for packed-int
states, else pickle protocol 5 in C, never multiprocess's dill), and the coordinator routes
bytes to their owners without decoding them. Partitions agree on owners because owners come
from a hash that is the same in every process (`keys.owner_of`). After the search the
coordinator queries the workers for parents and ids to rebuild traces, and routes the rounds
of the backward search that decides reachability (`reachability`: the edges stay in the workers).
"""

from __future__ import annotations

import os
import pickle
import signal
import traceback
from collections.abc import Callable, Hashable
from pathlib import Path

import multiprocess
import numpy as np

from pymc_resume.errors import EnvironmentProblem
from pymc_resume.explore.engines.raised import model_traceback
from pymc_resume.explore.engines.service import PartitionService
from pymc_resume.explore.level import exchange
from pymc_resume.explore.level.keys import owner_of, state_hasher
from pymc_resume.explore.level.partition import Partition
from pymc_resume.explore.snapshots import snapshot
from pymc_resume.explore.snapshots.chain import Piece, Written
from pymc_resume.explore.store.fingerprints import summed_risk
from pymc_resume.explore.store.limits import Limits, MemoryForecast, results_reserve
from pymc_resume.explore.store.memory import die_with_parent, run_peak_bytes
from pymc_resume.explore.validate import ModelError, ValidModel

PROTOCOL = 5


def _send(conn, message, chunks=()) -> None:
    conn.send_bytes(pickle.dumps((message, len(chunks)), PROTOCOL))
    for chunk in chunks:
        conn.send_bytes(chunk)


class WorkerError(EnvironmentProblem, RuntimeError):
    """A worker process raised; the message carries its traceback."""


def _receive(conn):
    message, chunk_count = pickle.loads(conn.recv_bytes())
    return message, [conn.recv_bytes() for _ in range(chunk_count)]


def _reply(conn, index: int):
    """Worker `index`'s answer; a worker that raised makes the coordinator raise too, and one
    that refused a checkpoint raises its SnapshotError here."""
    try:
        message, chunks = _receive(conn)
    except (EOFError, OSError):
        raise WorkerError(
            f"explorer worker {index} exited unexpectedly (killed, or out of memory?)"
        ) from None
    if message[0] == "error":
        raise WorkerError(f"an explorer worker failed:\n{message[1]}")
    if message[0] == "refused":
        raise snapshot.SnapshotError(message[1])
    if message[0] == "oserror":
        raise OSError(message[1], message[2])
    if message[0] == "model":
        error = ModelError(message[1])
        error.model_traceback = message[2]  # for --traceback (`raised`)
        raise error
    return message, chunks


class _CoordinatorGone(Exception):
    """The coordinator died (killed): a worker stops quietly, whatever it was doing."""


def _serve(
    conn,
    inherited,
    model: ValidModel,
    index: int,
    count: int,
    canonical,
    limits: Limits,
    started: float,
    stop_at_first: bool = False,
    exact: bool = False,
):
    """A worker's loop: answer the coordinator's requests until told to stop.

    `inherited` are the coordinator's ends of the pipes, which a forked worker holds copies of;
    closing them makes a dead coordinator show up here as end-of-file instead of a hang.
    """
    for coordinator_end in inherited:
        coordinator_end.close()
    coordinator = os.getppid()
    die_with_parent()  # Linux: the kernel kills this worker when the coordinator dies
    # Ctrl-C reaches the whole process group: the coordinator handles it and stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pids: list[int] = [coordinator, os.getpid()]  # the run's processes, completed by "pids"
    forecast = MemoryForecast()

    def limit_check(partition: Partition) -> str | None:
        if os.getppid() != coordinator:
            raise _CoordinatorGone
        memory = run_peak_bytes(pids)
        if partition.goals:  # the reachability still to decide, as if every partition were ours
            memory += results_reserve(partition.edge_count() * count, len(partition) * count)
        return limits.exceeded(0, started, memory, forecast.headroom(memory))

    service = PartitionService(model, index, count, canonical, stop_at_first, limit_check, exact)
    try:
        while True:
            try:
                (kind, *args), chunks = _receive(conn)
            except (EOFError, OSError):
                return  # the coordinator is gone (killed): nothing left to serve
            if kind == "pids":
                pids[:] = [coordinator, *args[0]]
                continue
            try:
                if _handle(conn, service, kind, args, chunks):
                    return
            except (_CoordinatorGone, OSError):
                raise
            except snapshot.SnapshotError as error:
                _send(conn, ("refused", str(error)))
            except ModelError as error:  # the model's own exception: one line, as in-process
                _send(conn, ("model", str(error), model_traceback(error)))
            except Exception:
                _send(conn, ("error", traceback.format_exc()))
    except (_CoordinatorGone, OSError):
        return  # a reply to a dead coordinator (broken pipe): exit quietly


def _handle(conn, service: PartitionService, kind: str, args, chunks) -> bool:
    """Answer one request of the coordinator through `service`; True when the worker should
    stop."""
    if kind == "seed":
        pending, outbound = service.seed()
        _send(conn, ("seeded", pending), outbound)
    elif kind == "step":
        level, ship_ratio = args
        stepped, outbound = service.step(chunks, level, ship_ratio)
        reply = (
            "stepped",
            stepped.added,
            stepped.size,
            stepped.generated,
            stepped.stopped_because,
            stepped.pending,
        )
        _send(conn, reply, outbound)
    elif kind == "answer":
        held, news, size, outbound = service.answer(chunks)
        _send(conn, ("answered", held, news, size), outbound)
    elif kind == "handover":
        _send(conn, ("handed",), service.handover(chunks))
    elif kind == "parent":
        _send(conn, (service.parent(args[0]),))
    elif kind == "lookup":
        _send(conn, (service.lookup(args[0]),))
    elif kind == "results":
        _send(conn, service.results())
    elif kind == "reach_begin":
        service.reach_begin(args[0])
        _send(conn, ("began",))
    elif kind == "reach_round":
        _send(conn, ("reached",), service.reach_round(chunks))
    elif kind == "reach_end":
        _send(conn, (service.reach_end(),))
    elif kind == "snapshot":  # the coordinator's batches for this partition come along
        try:
            size, level_starts, piece = service.snapshot_to(chunks, *args)
        except OSError as error:  # (the disk's: the coordinator says it as a checkpoint's)
            _send(conn, ("oserror", error.errno or 0, error.strerror or str(error)))
        else:
            _send(conn, ("saved", size, level_starts, piece.length, piece.sha256))
    elif kind == "restore":  # the chain's pieces come as the chunks
        wheres, layout = args
        _send(conn, ("restored", *service.restore(chunks, wheres, layout)))
    elif kind == "stop":
        conn.close()
        return True
    return False


class WorkerPool:
    """`count` worker processes, each owning one hash partition."""

    def __init__(
        self,
        model: ValidModel,
        count: int,
        canonical: Callable | None,
        limits: Limits,
        started: float,
        on_tick: Callable | None = None,
        stop_at_first: bool = False,
        exact: bool = False,
    ) -> None:
        self.count = count
        self.state_hash = state_hasher(model, count, exact)
        self.goals = bool(model.reachability)
        # Whether the workers exchange fingerprints (`exchange`): then a level is two rounds.
        self.exchange = exchange.exchanges_fingerprints(model, count, exact)
        self.ship_ratios = [0.0] * count
        self.limits = limits
        self.started = started
        context = multiprocess.get_context("fork" if hasattr(os, "fork") else "spawn")
        self.connections: list = []  # multiprocess Connections (the package has no stubs)
        self.processes = []
        for index in range(count):
            parent_end, child_end = context.Pipe()
            process = context.Process(
                target=_serve,
                args=(
                    child_end,
                    [*self.connections, parent_end],
                    model,
                    index,
                    count,
                    canonical,
                    limits,
                    started,
                    stop_at_first,
                    exact,
                ),
                daemon=True,
            )
            process.start()
            child_end.close()
            self.connections.append(parent_end)
            self.processes.append(process)
        # Each worker counts every process of the run against --max-memory.
        self.pids = [process.pid for process in self.processes]
        for conn in self.connections:
            _send(conn, ("pids", self.pids))
        self.routed: list[list[bytes]] = [[] for _ in range(count)]
        self._pending = 0
        self._size = 0
        self._generated = 0
        self.stopped_because: str | None = None

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, kind, error, trace) -> None:
        """Stop the workers: politely after a search, at once after an error or an interrupt
        (a worker may be in the middle of a level, and its state is of no use any more)."""
        if kind is None:
            for conn in self.connections:
                try:
                    _send(conn, ("stop",))
                except OSError:
                    pass
        for process in self.processes:
            if kind is not None:
                process.kill()
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
                process.join()

    def _gather(self, replies) -> None:
        """Route every worker's outbound chunks to their owners' inboxes (each gets one from
        every worker, in the workers' order)."""
        self.routed = [[] for _ in range(self.count)]
        for _message, chunks in replies:
            for owner, chunk in enumerate(chunks):
                self.routed[owner].append(chunk)

    def _ask_all(self, message_for) -> list:
        for index, conn in enumerate(self.connections):
            _send(conn, *message_for(index))
            # Sent, the batches routed to this worker are its own: let go of them before the
            # replies come, so that the coordinator holds one level's batches, not two.
            self.routed[index] = []
        return [_reply(conn, index) for index, conn in enumerate(self.connections)]

    def seed(self) -> None:
        replies = self._ask_all(lambda i: (("seed",), ()))
        self._gather(replies)
        self._pending = sum(message[1] for message, _ in replies)
        if self.exchange:
            self._answer()

    def _answer(self) -> None:
        """Exchanging, a level's second round: each worker admits what was shipped to it and
        answers the queries; the answers go back to the askers with their next step. The
        next level's frontiers decide the next ship ratios."""
        replies = self._ask_all(lambda i: (("answer",), self.routed[i]))
        self._gather(replies)
        self._size = sum(message[3] for message, _ in replies)  # with what the answers admitted
        held = [
            message[1] + sum(other[2][i] for other, _ in replies) for i, (message, _) in enumerate(replies)
        ]
        self._pending = sum(held)
        self.ship_ratios = exchange.ship_ratios(held)

    def pending(self) -> int:
        return self._pending

    def step(self, level: int) -> int:
        replies = self._ask_all(lambda i: (("step", level, self.ship_ratios[i]), self.routed[i]))
        added = sum(message[1] for message, _ in replies)
        self._size = sum(message[2] for message, _ in replies)
        self._generated = sum(message[3] for message, _ in replies)
        reasons = [message[4] for message, _ in replies if message[4]]
        if reasons:
            self.stopped_because = reasons[0]
        self._gather(replies)
        self._pending = sum(message[-1] for message, _ in replies)
        if self.exchange:
            self._answer()
        return added

    def size(self) -> int:
        return self._size

    def generated(self) -> int:
        return self._generated

    def _ask(self, index: int, message):
        _send(self.connections[index], message)
        return _reply(self.connections[index], index)[0][0]

    def parent_of(self, gid: int) -> int:
        return self._ask(gid % self.count, ("parent", gid))

    def id_of(self, key: Hashable) -> int | None:
        return self._ask(owner_of(key, self.count, self.state_hash), ("lookup", key))

    def _results(self) -> list:
        return [message for message, _ in self._ask_all(lambda i: (("results",), ()))]

    def first_bad(self) -> dict[str, tuple[int, int, int]]:
        merged: dict[str, tuple[int, int, int]] = {}
        for first_bad, _peak, _risk, _load in self._results():
            for name, found in first_bad.items():
                if name not in merged or found < merged[name]:
                    merged[name] = found
        return merged

    def save_state(self, folder: Path, base: bool = True) -> Written:
        """Every partition's snapshot piece (whole for a `base`, else what is new since its
        last), written into `folder` by its worker; the layout of their levels and the pieces.
        Each worker first takes the batches routed to it (they are its candidates from now on);
        exchanging, the workers first hand each other the states they hold for other owners,
        so that each piece holds its partition's next level whole."""
        if self.exchange:
            self._gather(self._ask_all(lambda i: (("handover",), self.routed[i])))
        replies = self._ask_all(
            lambda i: (("snapshot", str(snapshot.partition_file(folder, i)), base), self.routed[i])
        )
        self.routed = [[] for _ in range(self.count)]
        return Written(
            tuple(message[1] for message, _ in replies),
            tuple(tuple(message[2]) for message, _ in replies),
            tuple(Piece(message[3], message[4]) for message, _ in replies),
        )

    def load_state(self, saved: snapshot.Snapshot) -> None:
        """Restore every partition from `saved` (each worker checks its own pieces)."""
        replies = self._ask_all(
            lambda i: (("restore", saved.pieces[i], saved.layout), list(saved.partitions[i]))
        )
        self.routed = [[] for _ in range(self.count)]
        self._size = sum(saved.layout.sizes)
        self._generated = sum(message[1] for message, _ in replies)
        if self._generated < self._size:
            raise snapshot.SnapshotError(
                f"{saved.files[0]}: {self._generated:,} states generated, fewer than the "
                f"{self._size:,} stored"
            )
        self._pending = sum(message[2] for message, _ in replies)

    def memory(self) -> int:
        """The run's peak resident memory so far (every process's peak, summed), and what
        deciding reachability after the search will add (`limits.results_reserve`)."""
        memory = run_peak_bytes([os.getpid(), *self.pids])
        if self.goals:
            memory += results_reserve(self._generated, self._size)
        return memory

    def reach_begin(self, prop: int) -> None:
        self._ask_all(lambda i: (("reach_begin", prop), ()))

    def reach_round(self, inbound: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """One round of the backward search (`reachability`): int64 arrays of local ids."""

        def message_for(index: int) -> tuple[tuple, list]:
            # Sent as they are (no copy), then let go of: the coordinator does not hold one
            # round's ids while the next round's come.
            arrays, inbound[index] = inbound[index], []
            return ("reach_round",), [ids.data for ids in arrays]

        replies = self._ask_all(message_for)
        return [[np.frombuffer(chunk, dtype=np.int64) for chunk in chunks] for _message, chunks in replies]

    def reach_end(self) -> list[tuple[int, int] | None]:
        return [message[0] for message, _ in self._ask_all(lambda i: (("reach_end",), ()))]

    def worker_peak_rss(self) -> tuple[int, ...]:
        return tuple(peak for _first_bad, peak, _risk, _load in self._results())

    def collision_probability(self) -> float | None:
        return summed_risk(risk for _first_bad, _peak, risk, _load in self._results())

    def worker_load(self) -> tuple[tuple[int, float], ...]:
        """Per partition: its states, and the seconds it spent stepping levels."""
        return tuple(load for _first_bad, _peak, _risk, load in self._results())
