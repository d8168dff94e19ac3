"""`ConsumeOnceGate`: claim a parked interrupt, then resume it; recover a claim whose holder is
gone, never one whose holder is alive; fence a holder whose claim was taken over.

A resume validates its value, inserts the claim (one insert wins per parked interrupt), checks
that the head is still the parked checkpoint, and runs the graph while a thread of its own
renews the claim's lease; every checkpoint write of that run is fenced by the claim. A recovery
takes an outstanding claim over with a compare-and-set that increments the fence, when the
holder is known dead (a process of this host that is gone), its lease has lapsed (a holder on
another host stops renewing when it dies), or its run failed; then it continues with the
claimed value. The async methods (`aresume`, `arecover`) do the same around `ainvoke`, with
the claim store's calls in a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from contextlib import asynccontextmanager

import attrs

from pymc_resume.gate._claims import DONE, FAILED, OUTSTANDING, RUNNING, STALE, Claim, ClaimStore, conninfo_of
from pymc_resume.gate._graph import (
    Parked,
    branch_of,
    command,
    default_serde,
    fenced,
    has_resume,
    head_of,
    interrupts,
    nothing_to_run,
    pick,
    refuse_subgraph_interrupts,
    thread_of,
)
from pymc_resume.gate._holders import alive_here, new_holder, on_this_host
from pymc_resume.gate._refusals import ClaimStillHeld, InterruptAlreadyClaimed, InterruptAlreadyConsumed

DEFAULT_LEASE = 10.0  # seconds a claim's holder is taken to be alive without renewing it


@attrs.frozen
class _Plan:
    """What a recovery runs: the claim it took over (None: LangGraph's own recovery) and the
    payload for `invoke`."""

    claim: Claim | None
    payload: object = None


class ConsumeOnceGate:
    """Claims consumption of a parked LangGraph interrupt before resuming it. One per process
    (it holds a connection); every process that resumes the thread must go through a gate on
    the same store. `lease`: seconds a holder is taken to be alive without renewing its claim
    (it renews every third of that while it runs)."""

    def __init__(self, store: ClaimStore, serde=None, *, lease: float = DEFAULT_LEASE) -> None:
        if lease <= 0:
            raise ValueError("lease: a positive number of seconds")
        self._store = store
        self._serde = serde or default_serde()
        self.lease = float(lease)
        self._ready = False

    @classmethod
    def for_sqlite(cls, path_or_conn, serde=None, *, lease: float = DEFAULT_LEASE) -> ConsumeOnceGate:
        """The SQLite file of a `SqliteSaver` or `AsyncSqliteSaver` (a path, or a
        `sqlite3.Connection` to it)."""
        return cls(ClaimStore.sqlite(path_or_conn), serde, lease=lease)

    @classmethod
    def for_postgres(cls, url_or_conn, serde=None, *, lease: float = DEFAULT_LEASE) -> ConsumeOnceGate:
        """The database of a `PostgresSaver` (a URL, a psycopg connection or a ConnectionPool)."""
        return cls(ClaimStore.postgres(url_or_conn), serde, lease=lease)

    @classmethod
    def for_checkpointer(cls, saver, *, lease: float = DEFAULT_LEASE) -> ConsumeOnceGate:
        """The store of a `SqliteSaver` or `PostgresSaver`, through its own connection and lock;
        of an `AsyncPostgresSaver` through a connection of the gate's own to its database."""
        kinds = {c.__name__ for c in type(saver).__mro__}
        if "SqliteSaver" in kinds:
            return cls(ClaimStore.sqlite(saver.conn, saver.lock), saver.serde, lease=lease)
        if "PostgresSaver" in kinds:
            return cls(ClaimStore.postgres(saver.conn, saver.lock), saver.serde, lease=lease)
        if "AsyncPostgresSaver" in kinds and hasattr(saver.conn, "info"):
            return cls(ClaimStore.postgres(conninfo_of(saver.conn)), saver.serde, lease=lease)
        if "AsyncPostgresSaver" in kinds:
            raise TypeError(
                "the gate cannot open a connection of its own from an async connection pool: "
                "use ConsumeOnceGate.for_postgres(url) with the pool's database"
            )
        if "AsyncSqliteSaver" in kinds:
            raise TypeError(
                "the gate cannot share an aiosqlite connection: use "
                "ConsumeOnceGate.for_sqlite(path) with the AsyncSqliteSaver's file"
            )
        raise TypeError(
            f"the gate needs a SqliteSaver or PostgresSaver (or their async savers), not "
            f"{type(saver).__name__} (an in-memory saver is no shared store)"
        )

    def setup(self) -> None:
        """Create the claims table if it is not there (idempotent; done on first use)."""
        if not self._ready:
            self._store.setup()
            self._ready = True

    # -- reading -------------------------------------------------------------------------

    def parked(self, graph, config) -> Parked:
        """The thread's head, which must be parked at an interrupt no resume was recorded for."""
        thread_id, ns = thread_of(config)
        head = head_of(graph, config)
        if head is None:
            raise InterruptAlreadyConsumed(
                f"thread {thread_id!r} has no checkpoint: nothing is parked", thread_id
            )
        parked_at = interrupts(head)
        if not parked_at or has_resume(head):
            last = self.last_claim(config, graph)
            if (
                last is not None
                and last.status in OUTSTANDING
                and last.checkpoint_id == head.checkpoint["id"]
            ):
                raise InterruptAlreadyClaimed(
                    f"thread {thread_id!r}: the interrupt at checkpoint {last.checkpoint_id} was already "
                    f"claimed with value {last.value!r} ({last.status}); "
                    "this resume is refused and ran nothing",
                    thread_id,
                    last,
                )
            why = (
                "a resume value is already recorded on its head"
                if parked_at
                else f"its head {head.checkpoint['id']} is not parked at an interrupt"
            )
            if last is not None:
                why += f" (last claim: value {last.value!r}, {last.status})"
            raise InterruptAlreadyConsumed(f"thread {thread_id!r} refuses the resume: {why}", thread_id, last)
        refuse_subgraph_interrupts(graph, config, thread_id, head)
        return Parked(thread_id, ns, head.checkpoint["id"], parked_at)

    async def aparked(self, graph, config) -> Parked:
        """`parked` for an async graph."""
        return await asyncio.to_thread(self.parked, graph, config)

    def last_claim(self, config, graph=None) -> Claim | None:
        """The thread's newest claim, whatever its status; on the branch `config` names by its
        checkpoint_id (time travel), when `graph` is given to read it."""
        self.setup()
        branch = branch_of(graph, config) if graph is not None else None
        return self._decode(self._store.newest(*thread_of(config), statuses=None, checkpoints=branch))

    def outstanding_claim(self, config, graph=None) -> Claim | None:
        """The thread's newest claim whose value may not have been consumed yet (on the branch
        `config` names, when `graph` is given: see `last_claim`)."""
        self.setup()
        branch = branch_of(graph, config) if graph is not None else None
        return self._decode(self._store.newest(*thread_of(config), statuses=OUTSTANDING, checkpoints=branch))

    # -- resume ---------------------------------------------------------------------------

    def resume(
        self,
        graph,
        config,
        value,
        *,
        seen: Parked | None = None,
        interrupt_id: str | None = None,
        validate=None,
        **invoke_kwargs,
    ):
        """Claim the parked interrupt for `value`, then `graph.invoke(Command(resume=value))`.

        `validate(value)` (optional) runs first and may raise: a refused value claims nothing.
        `seen` is the `Parked` the client read (default: the head now). Raises
        `InterruptAlreadyClaimed` when another delivery claimed it, `InterruptAlreadyConsumed`
        when the head is not (or no longer) parked there, `NotCovered` for an interrupt inside a
        subgraph; in every case no node ran.
        """
        if validate is not None:
            validate(value)
        claim, payload = self._claim_parked(graph, config, value, seen, interrupt_id)
        return self._run(graph, config, claim, payload, invoke_kwargs)

    async def aresume(
        self,
        graph,
        config,
        value,
        *,
        seen: Parked | None = None,
        interrupt_id: str | None = None,
        validate=None,
        **invoke_kwargs,
    ):
        """`resume` for an async graph: the claim, then `await graph.ainvoke(...)`."""
        if validate is not None:
            validate(value)
        claim, payload = await asyncio.to_thread(self._claim_parked, graph, config, value, seen, interrupt_id)
        return await self._arun(graph, config, claim, payload, invoke_kwargs)

    def _claim_parked(self, graph, config, value, seen: Parked | None, interrupt_id: str | None):
        self.setup()
        if seen is not None:
            refuse_subgraph_interrupts(graph, config, seen.thread_id)
        target = seen or self.parked(graph, config)
        wanted = pick(target, interrupt_id)
        claim = self._claim(target, wanted, value)
        self._check_head(graph, config, claim)
        return claim, command(target, wanted, value)

    def _claim(self, target: Parked, interrupt_id: str, value) -> Claim:
        value_type, data = self._serde.dumps_typed(value)
        row = (
            target.thread_id,
            target.checkpoint_ns,
            target.checkpoint_id,
            interrupt_id,
            value_type,
            data,
            new_holder(),
            RUNNING,
            1,
            time.time(),
        )
        key = row[:4]
        if self._store.insert(row, self.lease):
            return self._decode(self._store.get(key))
        existing = self._decode(self._store.get(key))
        raise InterruptAlreadyClaimed(
            f"thread {target.thread_id!r}: interrupt {interrupt_id} at checkpoint {target.checkpoint_id} "
            f"was already claimed with value {existing.value!r} ({existing.status}); "
            f"this resume (value {value!r}) is refused and ran nothing",
            target.thread_id,
            existing,
        )

    def _check_head(self, graph, config, claim: Claim) -> None:
        """The claim is only good while the head is still the parked checkpoint (a writer that
        bypasses the gate can move it): else mark it stale and refuse."""
        head = head_of(graph, config)
        if head is not None and head.checkpoint["id"] == claim.checkpoint_id and not has_resume(head):
            return
        self._store.set_status(claim, STALE)
        raise InterruptAlreadyConsumed(
            f"thread {claim.thread_id!r} moved past checkpoint {claim.checkpoint_id} (or recorded a "
            "resume there) outside the gate: this resume is refused and ran nothing",
            claim.thread_id,
        )

    # -- recovery ---------------------------------------------------------------------------

    def recover(self, graph, config, *, force: bool = False, wait: float = 0.0, **invoke_kwargs):
        """Continue the thread from the store after a crash, with the claimed value if a claim is
        outstanding (never a new one); returns the invoke result, or None when nothing was to run.

        Without an outstanding claim this is LangGraph's own recovery (`invoke(None)`), except
        that a thread parked at an interrupt stays parked. A claim is taken over when its
        holder is known dead (a process of this host that is gone), when its run failed, or
        when its lease has lapsed (a holder on another host that died stopped renewing it);
        else `ClaimStillHeld`. `wait`: seconds to wait for a lease to lapse first. `force`
        takes a claim over from a holder that looks alive (its late writes are then refused).
        """
        plan = self._plan_recovery(graph, config, force, wait)
        if plan is None:
            return None
        if plan.claim is None:
            return graph.invoke(None, config, **invoke_kwargs)
        return self._run(graph, config, plan.claim, plan.payload, invoke_kwargs)

    async def arecover(self, graph, config, *, force: bool = False, wait: float = 0.0, **invoke_kwargs):
        """`recover` for an async graph."""
        plan = await asyncio.to_thread(self._plan_recovery, graph, config, force, wait)
        if plan is None:
            return None
        if plan.claim is None:
            return await graph.ainvoke(None, config, **invoke_kwargs)
        return await self._arun(graph, config, plan.claim, plan.payload, invoke_kwargs)

    def _plan_recovery(self, graph, config, force: bool, wait: float) -> _Plan | None:
        self.setup()
        claim = self.outstanding_claim(config, graph)
        if claim is None:
            return None if nothing_to_run(graph, config, head_of(graph, config)) else _Plan(None)
        claim = self._take_over(claim, force, wait)
        if claim is None:
            return None  # its holder finished it while we waited
        head = head_of(graph, config)  # read after the takeover: the old holder can write no more
        if head is not None and head.checkpoint["id"] == claim.checkpoint_id:
            # LangGraph reads a recorded resume value on invoke(None); else deliver the claimed one.
            parked = Parked(claim.thread_id, claim.checkpoint_ns, claim.checkpoint_id, interrupts(head))
            return _Plan(
                claim, None if has_resume(head) else command(parked, claim.interrupt_id, claim.value)
            )
        if nothing_to_run(graph, config, head):
            self._store.set_status(claim, DONE)  # consumed; the thread completed or parked further on
            return None
        return _Plan(claim)  # consumed and committed; the run died later: continue it

    def _take_over(self, claim: Claim, force: bool, wait: float) -> Claim | None:
        """The claim, now this process's under the next fence; None when it stopped being
        outstanding meanwhile (its holder finished). Waits up to `wait` seconds for a lease."""
        deadline = time.monotonic() + wait
        while True:
            try:
                return self._take_over_once(claim, force)
            except ClaimStillHeld as held:
                left = deadline - time.monotonic()
                if held.retry_after is None or left <= 0:
                    raise
                time.sleep(min(max(held.retry_after, 0.05), left))

    def _take_over_once(self, claim: Claim, force: bool) -> Claim | None:
        must_lapse = False
        if claim.status == RUNNING and not force:
            if not on_this_host(claim.holder):
                must_lapse = True  # the gate cannot see the holder: its lease says whether it lives
            elif alive_here(claim.holder):
                raise ClaimStillHeld(
                    f"thread {claim.thread_id!r}: the claim (value {claim.value!r}) is held by a live "
                    f"process of this host, {claim.holder}; recover it once that process is gone "
                    "(or force=True)",
                    claim.thread_id,
                    claim,
                )
        mine = attrs.evolve(claim, holder=new_holder(), status=RUNNING, attempts=claim.attempts + 1)
        if self._store.take_over(claim, mine, self.lease, lease_must_lapse=must_lapse):
            return mine
        now = self._decode(self._store.get(claim.key))
        if now is None or now.status not in OUTSTANDING:
            return None
        if (now.holder, now.attempts) == (claim.holder, claim.attempts):
            left = self._store.lease_left(now)
            left = max(left if left is not None else 0.0, 0.0)
            raise ClaimStillHeld(
                f"thread {claim.thread_id!r}: the claim (value {claim.value!r}) is held by {now.holder} on "
                f"another host, whose lease runs {left:.1f}s more; a live holder renews it, so it is "
                "recovered only once it lapses (wait=, or force=True)",
                claim.thread_id,
                now,
                retry_after=left,
            )
        raise ClaimStillHeld(
            f"thread {claim.thread_id!r}: another recovery took the claim over first "
            f"({now.holder}, fence {now.attempts})",
            claim.thread_id,
            now,
        )

    # -- running under a claim ----------------------------------------------------------------

    def _side(self) -> ClaimStore:
        side = self._store.side()
        side.limit_fenced_writes(self.lease)
        return side

    def _run(self, graph, config, claim: Claim, payload, invoke_kwargs):
        side = self._side()
        try:
            with _Lease(side, claim, self.lease):
                run = fenced(graph, lambda: side.fence(claim))
                try:
                    result = run.invoke(payload, config, **invoke_kwargs)
                except BaseException:
                    self._store.set_status(claim, FAILED)  # free for `recover`, if still ours
                    raise
                self._store.set_status(claim, DONE)
                return result
        finally:
            side.close()

    async def _arun(self, graph, config, claim: Claim, payload, invoke_kwargs):
        side = await asyncio.to_thread(self._side)
        try:
            with _Lease(side, claim, self.lease):
                run = fenced(graph, lambda: side.fence(claim), lambda: _afence(side, claim))
                try:
                    result = await run.ainvoke(payload, config, **invoke_kwargs)
                except BaseException:
                    await asyncio.to_thread(self._store.set_status, claim, FAILED)
                    raise
                await asyncio.to_thread(self._store.set_status, claim, DONE)
                return result
        finally:
            side.close()

    def forget(self, thread_id: str) -> None:
        """Delete every claim of a thread (when the thread itself is deleted)."""
        self.setup()
        self._store.delete_thread(thread_id)

    def close(self) -> None:
        """Close the connection the gate opened (none when it shares a checkpointer's)."""
        self._store.close()

    def _decode(self, row) -> Claim | None:
        if row is None:
            return None
        thread_id, ns, checkpoint_id, interrupt_id, value_type, data, holder, status, attempts, at, lease = (
            row
        )
        value = self._serde.loads_typed((value_type, bytes(data)))
        return Claim(
            thread_id,
            ns,
            checkpoint_id,
            interrupt_id,
            value,
            holder,
            status,
            int(attempts),
            float(at),
            float(lease),
        )


@asynccontextmanager
async def _afence(side: ClaimStore, claim: Claim):
    """The fence around an async write: its blocking statements in a worker thread."""
    await asyncio.to_thread(side.fence_begin, claim)
    try:
        yield
    finally:
        await asyncio.to_thread(side.fence_end, claim)


class _Lease:
    """Renews a claim's lease from a daemon thread while its holder runs (every third of the
    lease). A holder that dies stops renewing, and its lease lapses; one that finds the claim
    taken over stops (its writes are fenced anyway)."""

    def __init__(self, store: ClaimStore, claim: Claim, seconds: float) -> None:
        self._store, self._claim, self._seconds = store, claim, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="pymc-resume-gate-lease", daemon=True)
        self.lost = False

    def __enter__(self) -> _Lease:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _renew(self) -> None:
        while not self._stop.wait(self._seconds / 3):
            try:
                if not self._store.renew(self._claim, self._seconds):
                    self.lost = True
                    return
            except Exception:
                continue
