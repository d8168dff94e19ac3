"""The consume-once gate for LangGraph: one delivery consumes a parked interrupt, the others are
refused before any node runs.

LangGraph takes no claim when `invoke(Command(resume=v))` resumes an interrupt: k processes that
resume one parked interrupt at once each run the interrupted node (and fire what it gates).
The gate puts a claim in front of the resume, in the same database as the checkpointer (the
SQLite file of a `SqliteSaver`, the PostgreSQL database of a `PostgresSaver`): a row keyed by
(thread id, checkpoint ns, parked checkpoint id, interrupt id), inserted atomically. The one
delivery whose insert wins resumes the graph; every other one gets `InterruptAlreadyClaimed`,
naming the thread and the claimed value, and runs nothing.

    from pymc_resume.gate import ConsumeOnceGate, InterruptAlreadyClaimed

    gate = ConsumeOnceGate.for_checkpointer(saver)   # or .for_sqlite(path) / .for_postgres(url)
    try:
        gate.resume(graph, config, "approve")
    except InterruptAlreadyClaimed as refused:
        print(refused)                               # someone else's answer won

    gate.recover(graph, config)   # after the claimant died: continue with the CLAIMED value

The claim records the value. When its holder dies after the claim, `recover` continues the
thread with that value (never a new one); a resume to an interrupt whose head has moved on is
refused with `InterruptAlreadyConsumed`. See docs/gate.md for what it guarantees and what not.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import attrs

TABLE = "pymc_resume_claims"
RUNNING, FAILED, DONE, STALE = "running", "failed", "done", "stale"
OUTSTANDING = (RUNNING, FAILED)  # a claim whose value has not (surely) been consumed yet

INTERRUPT = "__interrupt__"  # LangGraph's pending-write channels (langgraph._internal._constants)
RESUME = "__resume__"

_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, interrupt_id, value_type, value, holder, status, attempts, claimed_at"


# -- what callers see ---------------------------------------------------------------------


@attrs.frozen
class Parked:
    """What a client saw when it read the thread: the parked checkpoint and its interrupt(s).

    Pass it back as `seen=` to `resume` so that the answer goes to the interrupt that was shown
    (a resume whose head moved on since is refused instead of landing on a later interrupt).
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    interrupts: tuple  # LangGraph `Interrupt`s (with `.id` and `.value`)


@attrs.frozen
class Claim:
    """A claim row: the delivery that consumes one parked interrupt, with its value."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    interrupt_id: str
    value: object
    holder: str  # host/pid/process-start/nonce of the process that holds it
    status: str  # running, failed (the run raised), done, stale (the head had moved on)
    attempts: int  # 1 + recoveries
    claimed_at: float


class GateRefusal(Exception):
    """A resume or recovery the gate refused before any node ran. `thread_id` names the thread."""

    def __init__(self, message: str, thread_id: str, claim: Claim | None = None) -> None:
        super().__init__(message)
        self.thread_id = thread_id
        self.claim = claim


class InterruptAlreadyClaimed(GateRefusal):
    """Another delivery claimed this interrupt first; `claim.value` is the value it consumes."""


class InterruptAlreadyConsumed(GateRefusal):
    """The thread's head is not parked at the interrupt this resume aims at (it moved on, or it
    never parked there): nothing is recorded."""


class ClaimStillHeld(GateRefusal):
    """`recover` found the claim's holder alive on this host (pass `force=True` if you know
    better), or another recovery took the claim over first."""


# -- the gate --------------------------------------------------------------------------------


class ConsumeOnceGate:
    """Claims consumption of a parked LangGraph interrupt before resuming it. One per process
    (it holds a connection); every process that resumes the thread must go through a gate on
    the same store."""

    def __init__(self, store, serde=None) -> None:
        self._store = store
        self._serde = serde or _default_serde()
        self._ready = False

    @classmethod
    def for_sqlite(cls, path_or_conn, serde=None) -> ConsumeOnceGate:
        """The SQLite file of a `SqliteSaver` (a path, or a `sqlite3.Connection` to it)."""
        return cls(_SqliteClaims.open(path_or_conn), serde)

    @classmethod
    def for_postgres(cls, url_or_conn, serde=None) -> ConsumeOnceGate:
        """The database of a `PostgresSaver` (a URL, a psycopg connection or a ConnectionPool)."""
        return cls(_PostgresClaims.open(url_or_conn), serde)

    @classmethod
    def for_checkpointer(cls, saver) -> ConsumeOnceGate:
        """The store of a `SqliteSaver` or `PostgresSaver`, through its own connection and lock."""
        kind = type(saver).__mro__
        if any(c.__name__ == "SqliteSaver" for c in kind):
            return cls(_SqliteClaims(saver.conn, saver.lock), saver.serde)
        if any(c.__name__ == "PostgresSaver" for c in kind):
            return cls(_PostgresClaims(saver.conn, saver.lock), saver.serde)
        raise TypeError(f"the gate needs a SqliteSaver or PostgresSaver, not {type(saver).__name__} "
                        "(an in-memory saver is no shared store)")

    def setup(self) -> None:
        """Create the claims table if it is not there (idempotent; done on first use)."""
        if not self._ready:
            self._store.setup()
            self._ready = True

    # -- reading -------------------------------------------------------------------------

    def parked(self, graph, config) -> Parked:
        """The thread's head, which must be parked at an interrupt no resume was recorded for."""
        thread_id, ns = _thread_of(config)
        head = graph.checkpointer.get_tuple(_latest(config))
        if head is None:
            raise InterruptAlreadyConsumed(f"thread {thread_id!r} has no checkpoint: nothing is parked",
                                           thread_id)
        interrupts = _interrupts(head)
        if not interrupts or _has_resume(head):
            last = self.last_claim(config)
            if last is not None and last.status in OUTSTANDING and last.checkpoint_id == head.checkpoint["id"]:
                raise InterruptAlreadyClaimed(
                    f"thread {thread_id!r}: the interrupt at checkpoint {last.checkpoint_id} was already "
                    f"claimed with value {last.value!r} ({last.status}); this resume is refused and ran nothing",
                    thread_id, last)
            why = ("a resume value is already recorded on its head" if interrupts else
                   f"its head {head.checkpoint['id']} is not parked at an interrupt")
            if last is not None:
                why += f" (last claim: value {last.value!r}, {last.status})"
            raise InterruptAlreadyConsumed(f"thread {thread_id!r} refuses the resume: {why}", thread_id, last)
        return Parked(thread_id, ns, head.checkpoint["id"], interrupts)

    def last_claim(self, config) -> Claim | None:
        """The thread's newest claim, whatever its status."""
        self.setup()
        return self._decode(self._store.newest(*_thread_of(config), statuses=None))

    def outstanding_claim(self, config) -> Claim | None:
        """The thread's newest claim whose value may not have been consumed yet."""
        self.setup()
        return self._decode(self._store.newest(*_thread_of(config), statuses=OUTSTANDING))

    # -- resume ---------------------------------------------------------------------------

    def resume(self, graph, config, value, *, seen: Parked | None = None, interrupt_id: str | None = None,
               validate=None, **invoke_kwargs):
        """Claim the parked interrupt for `value`, then `graph.invoke(Command(resume=value))`.

        `validate(value)` (optional) runs first and may raise: a refused value claims nothing.
        `seen` is the `Parked` the client read (default: the head now). Raises
        `InterruptAlreadyClaimed` when another delivery claimed it, `InterruptAlreadyConsumed`
        when the head is not (or no longer) parked there; in both cases no node ran.
        """
        if validate is not None:
            validate(value)
        self.setup()
        target = seen or self.parked(graph, config)
        interrupt = _pick(target, interrupt_id)
        claim = self._claim(target, interrupt, value)
        self._check_head(graph, config, claim)
        return self._run(graph, config, claim, _command(target, interrupt, value), invoke_kwargs)

    def _claim(self, target: Parked, interrupt_id: str, value) -> Claim:
        value_type, data = self._serde.dumps_typed(value)
        row = (target.thread_id, target.checkpoint_ns, target.checkpoint_id, interrupt_id,
               value_type, data, _holder(), RUNNING, 1, time.time())
        if self._store.insert(row):
            return self._decode(row)
        existing = self._decode(self._store.get(row[:4]))
        raise InterruptAlreadyClaimed(
            f"thread {target.thread_id!r}: interrupt {interrupt_id} at checkpoint {target.checkpoint_id} "
            f"was already claimed with value {existing.value!r} ({existing.status}); "
            f"this resume (value {value!r}) is refused and ran nothing",
            target.thread_id, existing)

    def _check_head(self, graph, config, claim: Claim) -> None:
        """The claim is only good while the head is still the parked checkpoint (a writer that
        bypasses the gate can move it): else mark it stale and refuse."""
        head = graph.checkpointer.get_tuple(_latest(config))
        if head is not None and head.checkpoint["id"] == claim.checkpoint_id and not _has_resume(head):
            return
        self._store.set_status(claim, STALE)
        raise InterruptAlreadyConsumed(
            f"thread {claim.thread_id!r} moved past checkpoint {claim.checkpoint_id} (or recorded a "
            "resume there) outside the gate: this resume is refused and ran nothing", claim.thread_id)

    # -- recovery ---------------------------------------------------------------------------

    def recover(self, graph, config, *, force: bool = False, **invoke_kwargs):
        """Continue the thread from the store after a crash, with the claimed value if a claim is
        outstanding (never a new one); returns the invoke result, or None when nothing was to run.

        Without an outstanding claim this is LangGraph's own recovery (`invoke(None)`), except
        that a thread parked at an interrupt stays parked. A claim whose holder is alive on this
        host is not taken over unless `force`; across hosts the gate cannot tell, so call it
        when you know the holder is gone.
        """
        self.setup()
        claim = self.outstanding_claim(config)
        head = graph.checkpointer.get_tuple(_latest(config))
        if claim is None:
            if _nothing_to_run(graph, config, head):
                return None
            return graph.invoke(None, _latest(config), **invoke_kwargs)
        claim = self._take_over(claim, force)
        if head is not None and head.checkpoint["id"] == claim.checkpoint_id:
            # LangGraph reads a recorded resume value on invoke(None); else deliver the claimed one.
            parked = Parked(claim.thread_id, claim.checkpoint_ns, claim.checkpoint_id, _interrupts(head))
            payload = None if _has_resume(head) else _command(parked, claim.interrupt_id, claim.value)
        elif _nothing_to_run(graph, config, head):
            self._store.set_status(claim, DONE)  # consumed; the thread completed or parked further on
            return None
        else:
            payload = None  # consumed and committed; the run died later: continue it
        return self._run(graph, config, claim, payload, invoke_kwargs)

    def _take_over(self, claim: Claim, force: bool) -> Claim:
        if claim.status == RUNNING and not force and _holder_alive(claim.holder):
            raise ClaimStillHeld(
                f"thread {claim.thread_id!r}: the claim (value {claim.value!r}) is held by a live "
                f"process {claim.holder}; recover it once that process is gone (or force=True)",
                claim.thread_id, claim)
        mine = attrs.evolve(claim, holder=_holder(), status=RUNNING, attempts=claim.attempts + 1)
        if not self._store.take_over(claim, mine):
            raise ClaimStillHeld(f"thread {claim.thread_id!r}: another recovery took the claim over first",
                                 claim.thread_id, claim)
        return mine

    def _run(self, graph, config, claim: Claim, payload, invoke_kwargs):
        try:
            result = graph.invoke(payload, _latest(config), **invoke_kwargs)
        except BaseException:
            self._store.set_status(claim, FAILED)  # free for `recover`, with the same value
            raise
        self._store.set_status(claim, DONE)
        return result

    def forget(self, thread_id: str) -> None:
        """Delete every claim of a thread (when the thread itself is deleted)."""
        self.setup()
        self._store.delete_thread(thread_id)

    def _decode(self, row) -> Claim | None:
        if row is None:
            return None
        thread_id, ns, checkpoint_id, interrupt_id, value_type, data, holder, status, attempts, at = row
        value = self._serde.loads_typed((value_type, bytes(data)))
        return Claim(thread_id, ns, checkpoint_id, interrupt_id, value, holder, status, int(attempts), float(at))


# -- LangGraph's store, read raw (get_state would validate, and raise on a bad state) -------


def _thread_of(config) -> tuple[str, str]:
    configurable = config.get("configurable", {})
    if "thread_id" not in configurable:
        raise ValueError("config['configurable'] has no thread_id")
    return str(configurable["thread_id"]), configurable.get("checkpoint_ns", "")


def _latest(config) -> dict:
    """`config` aimed at the thread's head (a checkpoint_id would make LangGraph time-travel)."""
    configurable = {k: v for k, v in config.get("configurable", {}).items() if k != "checkpoint_id"}
    return {**config, "configurable": configurable}


def _interrupts(head) -> tuple:
    found = []
    for _, channel, value in head.pending_writes or ():
        if channel == INTERRUPT:
            found.extend(value if isinstance(value, (list, tuple)) else [value])
    return tuple(found)


def _has_resume(head) -> bool:
    return any(channel == RESUME for _, channel, _ in head.pending_writes or ())


def _nothing_to_run(graph, config, head) -> bool:
    """The thread is parked at an interrupt with no value recorded, or complete (or empty)."""
    if head is None or (_interrupts(head) and not _has_resume(head)):
        return True
    try:
        return not graph.get_state(_latest(config)).next
    except Exception:  # noqa: BLE001 - a state get_state cannot read: let LangGraph's invoke judge it
        return False


def _interrupt_id(interrupt) -> str:
    return str(interrupt["id"] if isinstance(interrupt, dict) else interrupt.id)


def _pick(target: Parked, interrupt_id: str | None) -> str:
    ids = [_interrupt_id(i) for i in target.interrupts]
    if interrupt_id is None:
        if len(ids) != 1:
            raise ValueError(f"thread {target.thread_id!r} has {len(ids)} parked interrupts: pass interrupt_id")
        return ids[0]
    if interrupt_id not in ids:
        raise InterruptAlreadyConsumed(f"thread {target.thread_id!r}: interrupt {interrupt_id} is not parked "
                                       f"at checkpoint {target.checkpoint_id}", target.thread_id)
    return interrupt_id


def _command(target: Parked, interrupt_id: str, value):
    from langgraph.types import Command

    if len(target.interrupts) > 1:
        return Command(resume={interrupt_id: value})
    return Command(resume=value)


def _default_serde():
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer()


# -- who holds a claim -------------------------------------------------------------------------


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name (Linux): [state, ppid, ...]; [] elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _start_token(pid: int) -> str:
    """The process's start time, so that a reused pid is not taken for the holder."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else ""


def _holder() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}/{pid}/{_start_token(pid)}/{uuid.uuid4().hex[:8]}"


def _holder_alive(holder: str) -> bool:
    """True when the holder is a live process on this host; False when it is gone, or elsewhere
    (the gate cannot see other hosts' processes)."""
    try:
        host, pid_text, token, _ = holder.split("/")
        pid = int(pid_text)
    except ValueError:
        return False
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _stat(pid)
    if fields and fields[0] in ("Z", "X"):  # killed, not yet reaped by its parent
        return False
    return not token or _start_token(pid) == token


# -- the claims table in each store ---------------------------------------------------------


class _SqliteClaims:
    """The claims table in the checkpointer's SQLite file. Every write is one statement in
    autocommit or committed at once, so the unique insert is the atomic claim."""

    def __init__(self, conn, lock=None) -> None:
        self.conn = conn
        self.lock = lock or threading.Lock()

    @classmethod
    def open(cls, path_or_conn) -> _SqliteClaims:
        import sqlite3

        if isinstance(path_or_conn, sqlite3.Connection):
            return cls(path_or_conn)
        return cls(sqlite3.connect(str(path_or_conn), timeout=30.0, check_same_thread=False))

    @contextmanager
    def _cursor(self) -> Iterator:
        with self.lock:
            cursor = self.conn.cursor()
            try:
                yield cursor
                self.conn.commit()
            except BaseException:
                self.conn.rollback()
                raise
            finally:
                cursor.close()

    def setup(self) -> None:
        with self._cursor() as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
                "checkpoint_id TEXT NOT NULL, interrupt_id TEXT NOT NULL, value_type TEXT NOT NULL, "
                "value BLOB NOT NULL, holder TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL, "
                "claimed_at REAL NOT NULL, PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, interrupt_id))")

    def insert(self, row) -> bool:
        with self._cursor() as cur:
            cur.execute(f"INSERT OR IGNORE INTO {TABLE} ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", row)
            return cur.rowcount == 1

    def get(self, key):
        with self._cursor() as cur:
            return cur.execute(f"SELECT {_COLUMNS} FROM {TABLE} WHERE thread_id=? AND checkpoint_ns=? "
                               "AND checkpoint_id=? AND interrupt_id=?", key).fetchone()

    def newest(self, thread_id, ns, statuses):
        where, args = "thread_id=? AND checkpoint_ns=?", [thread_id, ns]
        if statuses:
            where += f" AND status IN ({','.join('?' * len(statuses))})"
            args += list(statuses)
        with self._cursor() as cur:
            return cur.execute(f"SELECT {_COLUMNS} FROM {TABLE} WHERE {where} "
                               "ORDER BY claimed_at DESC LIMIT 1", args).fetchone()

    def set_status(self, claim: Claim, status: str) -> None:
        with self._cursor() as cur:
            cur.execute(f"UPDATE {TABLE} SET status=? WHERE thread_id=? AND checkpoint_ns=? AND "
                        "checkpoint_id=? AND interrupt_id=? AND holder=?", (status, *_key(claim), claim.holder))

    def take_over(self, old: Claim, new: Claim) -> bool:
        with self._cursor() as cur:
            cur.execute(f"UPDATE {TABLE} SET holder=?, status=?, attempts=? WHERE thread_id=? AND "
                        "checkpoint_ns=? AND checkpoint_id=? AND interrupt_id=? AND holder=? AND status=?",
                        (new.holder, new.status, new.attempts, *_key(old), old.holder, old.status))
            return cur.rowcount == 1

    def delete_thread(self, thread_id: str) -> None:
        with self._cursor() as cur:
            cur.execute(f"DELETE FROM {TABLE} WHERE thread_id=?", (thread_id,))


class _PostgresClaims:
    """The claims table in the checkpointer's PostgreSQL database; the unique insert
    (`ON CONFLICT DO NOTHING`) is the atomic claim."""

    def __init__(self, conn, lock=None) -> None:
        self.conn = conn  # a psycopg Connection or a ConnectionPool
        self.lock = lock or threading.Lock()

    @classmethod
    def open(cls, url_or_conn) -> _PostgresClaims:
        if isinstance(url_or_conn, str):
            import psycopg

            return cls(psycopg.connect(url_or_conn, autocommit=True))
        return cls(url_or_conn)

    @contextmanager
    def _cursor(self) -> Iterator:
        with self.lock, _pg_connection(self.conn) as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    def setup(self) -> None:
        import psycopg

        try:
            with self._cursor() as cur:
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
                    "checkpoint_id TEXT NOT NULL, interrupt_id TEXT NOT NULL, value_type TEXT NOT NULL, "
                    "value BYTEA NOT NULL, holder TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL, "
                    "claimed_at DOUBLE PRECISION NOT NULL, "
                    "PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, interrupt_id))")
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
            pass  # another process created it at the same moment

    def insert(self, row) -> bool:
        with self._cursor() as cur:
            cur.execute(f"INSERT INTO {TABLE} ({_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                        "ON CONFLICT DO NOTHING", row)
            return cur.rowcount == 1

    def get(self, key):
        with self._cursor() as cur:
            cur.execute(f"SELECT {_COLUMNS} FROM {TABLE} WHERE thread_id=%s AND checkpoint_ns=%s "
                        "AND checkpoint_id=%s AND interrupt_id=%s", key)
            return _row(cur.fetchone())

    def newest(self, thread_id, ns, statuses):
        where, args = "thread_id=%s AND checkpoint_ns=%s", [thread_id, ns]
        if statuses:
            where += " AND status = ANY(%s)"
            args.append(list(statuses))
        with self._cursor() as cur:
            cur.execute(f"SELECT {_COLUMNS} FROM {TABLE} WHERE {where} ORDER BY claimed_at DESC LIMIT 1", args)
            return _row(cur.fetchone())

    def set_status(self, claim: Claim, status: str) -> None:
        with self._cursor() as cur:
            cur.execute(f"UPDATE {TABLE} SET status=%s WHERE thread_id=%s AND checkpoint_ns=%s AND "
                        "checkpoint_id=%s AND interrupt_id=%s AND holder=%s", (status, *_key(claim), claim.holder))

    def take_over(self, old: Claim, new: Claim) -> bool:
        with self._cursor() as cur:
            cur.execute(f"UPDATE {TABLE} SET holder=%s, status=%s, attempts=%s WHERE thread_id=%s AND "
                        "checkpoint_ns=%s AND checkpoint_id=%s AND interrupt_id=%s AND holder=%s AND status=%s",
                        (new.holder, new.status, new.attempts, *_key(old), old.holder, old.status))
            return cur.rowcount == 1

    def delete_thread(self, thread_id: str) -> None:
        with self._cursor() as cur:
            cur.execute(f"DELETE FROM {TABLE} WHERE thread_id=%s", (thread_id,))


@contextmanager
def _pg_connection(conn) -> Iterator:
    """A connection from a pool, or the connection itself."""
    if hasattr(conn, "connection") and not hasattr(conn, "cursor"):
        with conn.connection() as pooled:
            yield pooled
    else:
        yield conn


def _row(row):
    """A psycopg row (a tuple or, with PostgresSaver's dict_row factory, a dict) as a tuple."""
    if row is None or isinstance(row, tuple):
        return row
    return tuple(row[name.strip()] for name in _COLUMNS.split(","))


def _key(claim: Claim) -> tuple:
    return claim.thread_id, claim.checkpoint_ns, claim.checkpoint_id, claim.interrupt_id
