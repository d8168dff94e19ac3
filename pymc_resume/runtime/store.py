"""The runtime's durable store: one SQLite file.

Tables:

- `threads`: one row per thread (the root and every fork), with its fork parent, the index of
  the parent's checkpoint it was forked from (`base`), the declared intent, the head (the
  sequence number of its newest checkpoint: commits are compare-and-set on it), its status, and
  its run lease (`lease`: the holder's token, or NULL when free).
- `checkpoints`: a thread's chain, `(thread, seq)` unique; each names the stage it commits
  (`INITIAL` and `UPDATE` mark checkpoints that commit none) and the position after it (`pc`).
  The application state lives in `states`, so a fork by copy copies state rows and a (faulty)
  fork by reference shares them.
- `inputs`: the recorded input of a consuming stage, `(thread, stage)` unique: a claim is the
  insert of that row, so two deliveries can never both claim one interrupt. `consumed` turns
  1 when the stage commits.
- `late_inputs`: only written by the fault `record-second-resume`.

Writes run in `BEGIN IMMEDIATE` transactions (one writer at a time, others wait up to the busy
timeout); the journal is WAL with `synchronous=NORMAL`, durable against a process crash
(SIGKILL), which is what the contract's crashes are. For power loss use `synchronous=FULL`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

from pymc_resume.model.state import INITIAL, UPDATE  # noqa: F401  (re-exported stage markers)

BUSY_TIMEOUT_SECONDS = 30.0

SCHEMA = """
CREATE TABLE threads (
    id INTEGER PRIMARY KEY,
    parent INTEGER,
    base INTEGER,
    intent TEXT NOT NULL,
    edit_value INTEGER,
    status TEXT NOT NULL,
    head INTEGER NOT NULL,
    lease TEXT,
    mid_node INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE states (id INTEGER PRIMARY KEY, app TEXT NOT NULL);
CREATE TABLE checkpoints (
    thread INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    pc INTEGER NOT NULL,
    stage INTEGER NOT NULL,
    state INTEGER NOT NULL REFERENCES states(id),
    PRIMARY KEY (thread, seq)
);
CREATE TABLE inputs (
    thread INTEGER NOT NULL,
    stage INTEGER NOT NULL,
    value INTEGER NOT NULL,
    consumed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread, stage)
);
CREATE TABLE late_inputs (thread INTEGER NOT NULL, stage INTEGER NOT NULL, value INTEGER NOT NULL);
"""


@attrs.frozen
class ThreadRow:
    id: int
    parent: int | None
    base: int | None
    intent: str  # "root", "replay" or "edit"
    edit_value: int | None
    status: str  # "new", "started"
    head: int
    lease: str | None
    mid_node: bool


@attrs.frozen
class CheckpointRow:
    seq: int
    pc: int
    stage: int
    app: tuple[int, ...]
    state_id: int


class Store:
    """Connections and transactions on the store file, plus the queries the executor needs.

    Every method that takes `db` runs inside a transaction the caller opened; a connection is
    opened per transaction, so a store object is safe to use in forked child processes.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls, path: str | Path, initial_app: tuple[int, ...]) -> Store:
        """A new store holding the root thread (id 0) with its initial checkpoint."""
        store = cls(path)
        db = store._connect()
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            with store.transaction() as tx:
                state = store.insert_state(tx, initial_app)
                tx.execute(
                    "INSERT INTO threads (id, parent, base, intent, status, head) "
                    "VALUES (0, NULL, NULL, 'root', 'new', 0)"
                )
                tx.execute("INSERT INTO checkpoints VALUES (0, 0, 0, ?, ?)", (INITIAL, state))
        finally:
            db.close()
        return store

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (`BEGIN IMMEDIATE`): committed on success, rolled back on error."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: one consistent view of the store."""
        db = self._connect()
        try:
            db.execute("BEGIN")
            yield db
            db.execute("COMMIT")
        finally:
            db.close()

    # -- queries inside a transaction ----------------------------------------------------

    @staticmethod
    def thread(db: sqlite3.Connection, thread: int) -> ThreadRow | None:
        row = db.execute(
            "SELECT id, parent, base, intent, edit_value, status, head, lease, mid_node "
            "FROM threads WHERE id = ?",
            (thread,),
        ).fetchone()
        if row is None:
            return None
        thread_id, parent, base, intent, edit_value, status, head, lease, mid_node = row
        return ThreadRow(thread_id, parent, base, intent, edit_value, status, head, lease, bool(mid_node))

    @classmethod
    def known_thread(cls, db: sqlite3.Connection, thread: int) -> ThreadRow:
        """The row of a thread that exists (its id came from the store)."""
        row = cls.thread(db, thread)
        if row is None:
            raise LookupError(f"thread {thread} is not in the store")
        return row

    @staticmethod
    def thread_ids(db: sqlite3.Connection) -> list[int]:
        return [row[0] for row in db.execute("SELECT id FROM threads ORDER BY id")]

    @staticmethod
    def chain(db: sqlite3.Connection, thread: int) -> list[CheckpointRow]:
        rows = db.execute(
            "SELECT c.seq, c.pc, c.stage, s.app, c.state FROM checkpoints c "
            "JOIN states s ON s.id = c.state WHERE c.thread = ? ORDER BY c.seq",
            (thread,),
        )
        return [
            CheckpointRow(seq, pc, stage, tuple(json.loads(app)), sid) for seq, pc, stage, app, sid in rows
        ]

    @staticmethod
    def head(db: sqlite3.Connection, thread: int) -> CheckpointRow:
        seq, pc, stage, app, sid = db.execute(
            "SELECT c.seq, c.pc, c.stage, s.app, c.state FROM checkpoints c "
            "JOIN threads t ON t.id = c.thread AND t.head = c.seq "
            "JOIN states s ON s.id = c.state WHERE c.thread = ?",
            (thread,),
        ).fetchone()
        return CheckpointRow(seq, pc, stage, tuple(json.loads(app)), sid)

    @staticmethod
    def inputs(db: sqlite3.Connection, thread: int) -> dict[int, tuple[int, bool]]:
        """stage -> (value, consumed) for every recorded input or outstanding claim."""
        rows = db.execute("SELECT stage, value, consumed FROM inputs WHERE thread = ?", (thread,))
        return {stage: (value, bool(consumed)) for stage, value, consumed in rows}

    @staticmethod
    def late_inputs(db: sqlite3.Connection, thread: int) -> list[tuple[int, int]]:
        rows = db.execute("SELECT stage, value FROM late_inputs WHERE thread = ? ORDER BY rowid", (thread,))
        return [(stage, value) for stage, value in rows]

    @staticmethod
    def insert_state(db: sqlite3.Connection, app: tuple[int, ...]) -> int:
        row_id = db.execute("INSERT INTO states (app) VALUES (?)", (json.dumps(list(app)),)).lastrowid
        assert row_id is not None  # an INSERT always has one
        return row_id

    @staticmethod
    def overwrite_state(db: sqlite3.Connection, state_id: int, app: tuple[int, ...]) -> None:
        db.execute("UPDATE states SET app = ? WHERE id = ?", (json.dumps(list(app)), state_id))

    def append_checkpoint(
        self,
        db: sqlite3.Connection,
        thread: int,
        expected_head: int,
        pc: int,
        stage: int,
        app: tuple[int, ...],
        holder: str | None,
    ) -> bool:
        """Compare-and-set: append a checkpoint iff the head is still `expected_head` and the
        lease is held by `holder` (or, when `holder` is None, by nobody). False when refused."""
        if holder is None:
            moved = db.execute(
                "UPDATE threads SET head = head + 1 WHERE id = ? AND head = ? AND lease IS NULL",
                (thread, expected_head),
            )
        else:
            moved = db.execute(
                "UPDATE threads SET head = head + 1 WHERE id = ? AND head = ? AND lease = ?",
                (thread, expected_head, holder),
            )
        if moved.rowcount != 1:
            return False
        state = self.insert_state(db, app)
        db.execute(
            "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?)",
            (thread, expected_head + 1, pc, stage, state),
        )
        return True

    @staticmethod
    def set_lease(db: sqlite3.Connection, thread: int, holder: str | None) -> None:
        db.execute("UPDATE threads SET lease = ? WHERE id = ?", (holder, thread))
