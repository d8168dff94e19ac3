"""The claims table, in the checkpointer's own database: one `ClaimStore` for SQLite and
PostgreSQL, which differ in SQL dialect only (placeholders, types, the clock, row locks).

A claim row is keyed by (thread id, checkpoint ns, parked checkpoint id, interrupt id); the one
insert that wins the key is the claim. Besides the value it records:

- `holder`: who runs it (`_holders`), and `attempts`, 1 + the takeovers so far, which is also
  the claim's *fence*: a takeover increments it, and every write of the old holder is checked
  against holder and fence, so that once a claim is taken over the old holder can change
  nothing (neither the claim row nor, through `fence`, LangGraph's checkpoints);
- `lease_until`: until when the holder is taken to be alive, on the database's clock (so that
  hosts with skewed clocks agree); the holder renews it while it runs.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import attrs

from pymc_resume.gate._holders import host_of
from pymc_resume.gate._refusals import ClaimLost

TABLE = "pymc_resume_claims"
RUNNING, FAILED, DONE, STALE = "running", "failed", "done", "stale"
OUTSTANDING = (RUNNING, FAILED)  # a claim whose value has not (surely) been consumed yet

_KEY = "thread_id=? AND checkpoint_ns=? AND checkpoint_id=? AND interrupt_id=?"
_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, interrupt_id, value_type, value, holder, status, "
    "attempts, claimed_at, lease_until"
)


@attrs.frozen
class Claim:
    """A claim row: the delivery that consumes one parked interrupt, with its value."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    interrupt_id: str
    value: object
    holder: str  # host/pid:start/nonce of the process that holds it
    status: str  # running, failed (the run raised), done, stale (the head had moved on)
    attempts: int  # 1 + takeovers: the claim's fence
    claimed_at: float
    lease_until: float = 0.0  # the database's clock, seconds since the epoch

    @property
    def host(self) -> str:
        return host_of(self.holder)

    @property
    def fence(self) -> int:
        return self.attempts

    @property
    def key(self) -> tuple:
        return self.thread_id, self.checkpoint_ns, self.checkpoint_id, self.interrupt_id


@attrs.frozen
class _Dialect:
    name: str
    placeholder: str
    blob: str
    real: str
    now: str  # the database's clock in seconds since the epoch
    insert: str  # "INSERT ... {rest}" that ignores a row whose key exists
    share_lock: str  # appended to the fence's SELECT


SQLITE = _Dialect(
    "sqlite",
    "?",
    "BLOB",
    "REAL",
    "((julianday('now') - 2440587.5) * 86400.0)",
    "INSERT OR IGNORE INTO {table} ({columns}) VALUES ({values})",
    "",
)
POSTGRES = _Dialect(
    "postgres",
    "%s",
    "BYTEA",
    "DOUBLE PRECISION",
    "EXTRACT(EPOCH FROM clock_timestamp())",
    "INSERT INTO {table} ({columns}) VALUES ({values}) ON CONFLICT DO NOTHING",
    " FOR SHARE",
)


class ClaimStore:
    """The claims table on one connection (shared with the checkpointer, with its lock, or the
    store's own). Every method is one short transaction."""

    def __init__(self, dialect: _Dialect, conn, lock=None, *, owned: bool = False) -> None:
        self.dialect = dialect
        self.conn = conn  # sqlite3.Connection; psycopg Connection or ConnectionPool
        self.lock = lock or threading.Lock()
        self._owned = owned  # close the connection in `close`
        self._fence_conn = None  # the PostgreSQL connection of the fence in progress

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def sqlite(cls, path_or_conn, lock=None) -> ClaimStore:
        import sqlite3

        if isinstance(path_or_conn, sqlite3.Connection):
            return cls(SQLITE, path_or_conn, lock)
        return cls(
            SQLITE, sqlite3.connect(str(path_or_conn), timeout=30.0, check_same_thread=False), owned=True
        )

    @classmethod
    def postgres(cls, url_or_conn, lock=None) -> ClaimStore:
        if isinstance(url_or_conn, str):
            import psycopg

            return cls(POSTGRES, psycopg.connect(url_or_conn, autocommit=True), owned=True)
        return cls(POSTGRES, url_or_conn, lock)

    def side(self) -> ClaimStore:
        """A store on a connection of its own to the same database: a run's lease renewals and
        fence checks must not wait for (or sit inside) the checkpointer's transactions."""
        if self.dialect is SQLITE:
            with self._cursor() as cur:
                files = [row[2] for row in cur.execute("PRAGMA database_list").fetchall() if row[1] == "main"]
            if not files or not files[0]:
                raise TypeError("the gate needs a SQLite file (an in-memory database is no shared store)")
            return ClaimStore.sqlite(files[0])
        if not hasattr(self.conn, "info"):  # a ConnectionPool: its connections are the store's own
            return ClaimStore(POSTGRES, self.conn)
        return ClaimStore.postgres(conninfo_of(self.conn))

    def limit_fenced_writes(self, seconds: float) -> None:
        """A fenced write holds the claim row share-locked, and a takeover waits for it: the
        server ends this connection's transaction if its holder stalls (a frozen or cut-off
        host) for longer than `seconds`, releasing the row."""
        if self.dialect is POSTGRES and hasattr(self.conn, "execute"):
            self.conn.execute(f"SET idle_in_transaction_session_timeout = {int(seconds * 1000)}")

    def close(self) -> None:
        if self._owned:
            self.conn.close()

    # -- statements ------------------------------------------------------------------------

    def _sql(self, text: str) -> str:
        return text.replace("?", self.dialect.placeholder)

    @contextmanager
    def _cursor(self) -> Iterator:
        with self.lock:
            if self.dialect is SQLITE:
                cursor = self.conn.cursor()
                try:
                    yield cursor
                    self.conn.commit()
                except BaseException:
                    self.conn.rollback()
                    raise
                finally:
                    cursor.close()
            else:
                # One statement per call: on an autocommit connection it is its own transaction,
                # so that no row lock outlives the statement (a frozen holder must not keep one).
                with _pg_connection(self.conn) as conn:
                    with (
                        contextlib.nullcontext() if conn.autocommit else conn.transaction(),
                        conn.cursor() as cursor,
                    ):
                        yield cursor

    def _one(self, sql: str, args=()) -> tuple | None:
        with self._cursor() as cur:
            cur.execute(self._sql(sql), args)
            return _row(cur.fetchone())

    def _update(self, sql: str, args) -> bool:
        with self._cursor() as cur:
            cur.execute(self._sql(sql), args)
            return cur.rowcount == 1

    def setup(self) -> None:
        dialect = self.dialect
        create = (
            f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, "
            f"checkpoint_id TEXT NOT NULL, interrupt_id TEXT NOT NULL, value_type TEXT NOT NULL, "
            f"value {dialect.blob} NOT NULL, holder TEXT NOT NULL, status TEXT NOT NULL, "
            f"attempts INTEGER NOT NULL, claimed_at {dialect.real} NOT NULL, "
            f"lease_until {dialect.real} NOT NULL DEFAULT 0, "
            "PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, interrupt_id))"
        )
        if dialect is SQLITE:
            with self._cursor() as cur:
                cur.execute(create)
                columns = [row[1] for row in cur.execute(f"PRAGMA table_info({TABLE})").fetchall()]
                if "lease_until" not in columns:  # a table of the gate before leases
                    cur.execute(f"ALTER TABLE {TABLE} ADD COLUMN lease_until REAL NOT NULL DEFAULT 0")
            return
        import psycopg

        for statement in (
            create,
            f"ALTER TABLE {TABLE} ADD COLUMN IF NOT EXISTS lease_until DOUBLE PRECISION NOT NULL DEFAULT 0",
        ):
            try:
                with self._cursor() as cur:
                    cur.execute(statement)
            except (
                psycopg.errors.UniqueViolation,
                psycopg.errors.DuplicateTable,
                psycopg.errors.DuplicateColumn,
            ):
                pass  # another process did it at the same moment

    def insert(self, row: tuple, lease: float) -> bool:
        """The claim: insert `row` (every column but the lease) unless its key exists."""
        values = ",".join("?" * (len(row))) + f", {self.dialect.now} + ?"
        sql = self.dialect.insert.format(table=TABLE, columns=_COLUMNS, values=values)
        return self._update(sql, (*row, lease))

    def get(self, key: tuple) -> tuple | None:
        return self._one(f"SELECT {_COLUMNS} FROM {TABLE} WHERE {_KEY}", key)

    def newest(self, thread_id: str, ns: str, statuses, checkpoints=None) -> tuple | None:
        """The thread's newest claim (with one of `statuses`, on one of `checkpoints`)."""
        where, args = "thread_id=? AND checkpoint_ns=?", [thread_id, ns]
        if statuses:
            where += f" AND status IN ({','.join('?' * len(statuses))})"
            args += list(statuses)
        if checkpoints is not None:
            where += f" AND checkpoint_id IN ({','.join('?' * len(checkpoints)) or 'NULL'})"
            args += list(checkpoints)
        return self._one(
            f"SELECT {_COLUMNS} FROM {TABLE} WHERE {where} ORDER BY claimed_at DESC LIMIT 1", args
        )

    def set_status(self, claim: Claim, status: str) -> bool:
        """Only while the claim is still `claim.holder`'s under the same fence."""
        return self._update(
            f"UPDATE {TABLE} SET status=? WHERE {_KEY} AND holder=? AND attempts=?",
            (status, *claim.key, claim.holder, claim.attempts),
        )

    def renew(self, claim: Claim, lease: float) -> bool:
        """Extend a running claim's lease; False when it is no longer `claim.holder`'s."""
        return self._update(
            f"UPDATE {TABLE} SET lease_until={self.dialect.now} + ? "
            f"WHERE {_KEY} AND holder=? AND attempts=? AND status=?",
            (lease, *claim.key, claim.holder, claim.attempts, RUNNING),
        )

    def take_over(self, old: Claim, new: Claim, lease: float, *, lease_must_lapse: bool) -> bool:
        """Compare-and-set `old` (holder, fence, status) to `new`; with `lease_must_lapse`, only
        once old's lease has lapsed on the database's clock. False also when the row is locked
        longer than a lease (its holder is inside a fenced write): try again later."""
        lapsed = f" AND lease_until < {self.dialect.now}" if lease_must_lapse else ""
        sql = self._sql(
            f"UPDATE {TABLE} SET holder=?, status=?, attempts=?, lease_until={self.dialect.now} + ? "
            f"WHERE {_KEY} AND holder=? AND attempts=? AND status=?{lapsed}"
        )
        args = (new.holder, new.status, new.attempts, lease, *old.key, old.holder, old.attempts, old.status)
        if self.dialect is SQLITE:
            return self._update(sql, args)
        import psycopg

        with self.lock, _pg_connection(self.conn) as conn:
            try:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute(f"SET LOCAL lock_timeout = {int(lease * 1000)}")
                    cur.execute(sql, args)
                    return cur.rowcount == 1
            except psycopg.errors.LockNotAvailable:
                return False

    def lease_left(self, claim: Claim) -> float | None:
        """Seconds until `claim`'s lease lapses (negative: lapsed), None if it changed hands."""
        row = self._one(
            f"SELECT lease_until - {self.dialect.now} FROM {TABLE} WHERE {_KEY} AND holder=? AND attempts=?",
            (*claim.key, claim.holder, claim.attempts),
        )
        return None if row is None else float(row[0])

    def delete_thread(self, thread_id: str) -> None:
        self._update(f"DELETE FROM {TABLE} WHERE thread_id=?", (thread_id,))

    # -- the fence ---------------------------------------------------------------------------

    def fence_begin(self, claim: Claim) -> None:
        """Begin a write of `claim`'s holder: raise `ClaimLost` unless the claim is still its own
        under the same fence. On PostgreSQL the claim row stays share-locked until `fence_end`,
        so that a takeover (an UPDATE of that row) waits for the write to finish, and the
        write cannot land after it. Holds this store's lock until `fence_end`."""
        self.lock.acquire()
        try:
            sql = self._sql(
                f"SELECT attempts FROM {TABLE} WHERE {_KEY} AND holder=? AND attempts=?"
                f"{self.dialect.share_lock}"
            )
            args = (*claim.key, claim.holder, claim.attempts)
            held: bool | None
            if self.dialect is SQLITE:  # one host: the check right before the write
                held = self.conn.execute(sql, args).fetchone() is not None
            else:
                conn = self._fence_conn = self.conn if hasattr(self.conn, "execute") else self.conn.getconn()
                held = self._pg_held(conn, sql, args)
                if not held:
                    self._fence_finish("ROLLBACK")
        except BaseException:
            self._fence_finish("ROLLBACK")
            raise
        if held is None:
            raise ClaimLost(
                f"thread {claim.thread_id!r}: the server ended this holder's session with the claim store "
                "(it stalled for longer than a lease, frozen or cut off), so the claim (value "
                f"{claim.value!r}, fence {claim.attempts}) cannot be confirmed: this write is refused",
                claim.thread_id,
                claim,
            )
        if not held:
            raise ClaimLost(
                f"thread {claim.thread_id!r}: the claim (value {claim.value!r}, fence {claim.attempts}) was "
                "taken over by a recovery after this holder's lease lapsed: this write is refused",
                claim.thread_id,
                claim,
            )

    @staticmethod
    def _pg_held(conn, sql: str, args) -> bool | None:
        """Whether the claim row is still this holder's, share-locking it; None if the server
        has ended the session (`idle_in_transaction_session_timeout`, a restart): a holder that
        cannot confirm its claim must not write."""
        import psycopg

        try:
            conn.execute("BEGIN")
            return conn.execute(sql, args).fetchone() is not None
        except psycopg.OperationalError:
            if conn.closed:
                return None
            raise

    def fence_end(self, claim: Claim) -> None:
        """End a write of `claim`'s holder; raise `ClaimLost` if the server ended the fence's
        session before it could commit (the row lock went with it, so a recovery may have
        taken the claim over while the write was under way)."""
        if self._fence_finish("COMMIT"):
            return
        raise ClaimLost(
            f"thread {claim.thread_id!r}: the server ended this holder's session with the claim store "
            "while a write was under way (it stalled for longer than a lease, frozen or cut off), so "
            f"the claim (value {claim.value!r}, fence {claim.attempts}) was not held to the end of the "
            "write and may have been taken over; the write went through the checkpointer's own "
            "connection and may have landed; this run stops here",
            claim.thread_id,
            claim,
        )

    def _fence_finish(self, statement: str) -> bool:
        """End the fence's transaction (PostgreSQL) and release the lock; once per fence.
        False if the server had ended the fence's session (its transaction is gone)."""
        conn, self._fence_conn = self._fence_conn, None
        try:
            if conn is not None:
                try:
                    if conn.closed:  # a closed session holds nothing, and commits nothing
                        return False
                    try:
                        conn.execute(statement)
                    except Exception:
                        if conn.closed:  # ended by the server (the idle-in-transaction timeout)
                            return False
                        raise
                finally:
                    if conn is not self.conn:
                        self.conn.putconn(conn)
        finally:
            if self.lock.locked():
                self.lock.release()
        return True

    @contextmanager
    def fence(self, claim: Claim) -> Iterator[None]:
        self.fence_begin(claim)
        try:
            yield
        finally:
            self.fence_end(claim)


def conninfo_of(conn) -> str:
    """A psycopg connection's connection string, with its password (a new connection to the
    same server and database)."""
    from psycopg.conninfo import make_conninfo

    password = conn.info.password
    return make_conninfo(conn.info.dsn, **({"password": password} if password else {}))


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
    return tuple(row.values())
