"""The effect sink: the outside world, a SQLite file apart from any framework's store.

Node code writes two kinds of events here, each in its own transaction so that they survive a
SIGKILL of the process that wrote them:

- `execute`: a stage's node code ran (thread, stage, operation id and role);
- `fire`: an effect was sent, with the idempotency key the framework handed the node (or none)
  and the state the node saw. The sink dedupes applications by key (`INSERT OR IGNORE` into
  `applied_keys`): a fire with a key already applied is logged with `applied = 0`; a fire
  without a key always applies.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import attrs

SCHEMA = """
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    thread INTEGER NOT NULL,
    stage INTEGER NOT NULL,
    node INTEGER NOT NULL,
    op TEXT,
    role TEXT,
    key TEXT,
    applied INTEGER NOT NULL DEFAULT 0,
    app TEXT,
    pid INTEGER NOT NULL
);
CREATE TABLE applied_keys (key TEXT PRIMARY KEY);
"""


@attrs.frozen
class SinkEvent:
    seq: int
    kind: str  # "execute" or "fire"
    thread: int
    stage: int
    node: int
    op: str | None
    role: str | None
    key: str | None
    applied: bool
    app: tuple[int, ...] | None
    pid: int


class Sink:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls, path: str | Path) -> Sink:
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
        finally:
            db.close()
        return cls(path)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def record_execution(self, context) -> None:
        db = self._connect()
        try:
            db.execute(
                "INSERT INTO events (kind, thread, stage, node, op, role, pid) "
                "VALUES ('execute', ?, ?, ?, ?, ?, ?)",
                (
                    context.thread,
                    context.stage,
                    context.node,
                    getattr(context, "op", None),
                    getattr(context, "role", None),
                    os.getpid(),
                ),
            )
        finally:
            db.close()

    def fire(self, context, app: tuple[int, ...]) -> bool:
        """Apply an effect unless its key was applied before; log the fire either way."""
        key = getattr(context, "idempotency_key", None)
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            applied = True
            if key is not None:
                applied = db.execute("INSERT OR IGNORE INTO applied_keys VALUES (?)", (key,)).rowcount == 1
            db.execute(
                "INSERT INTO events (kind, thread, stage, node, op, role, key, applied, app, pid) "
                "VALUES ('fire', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    context.thread,
                    context.stage,
                    context.node,
                    getattr(context, "op", None),
                    getattr(context, "role", None),
                    key,
                    int(applied),
                    json.dumps(list(app)),
                    os.getpid(),
                ),
            )
            db.execute("COMMIT")
            return applied
        finally:
            db.close()

    def events(self) -> list[SinkEvent]:
        db = self._connect()
        try:
            rows = db.execute(
                "SELECT seq, kind, thread, stage, node, op, role, key, applied, app, pid "
                "FROM events ORDER BY seq"
            ).fetchall()
        finally:
            db.close()
        return [
            SinkEvent(
                seq,
                kind,
                thread,
                stage,
                node,
                op,
                role,
                key,
                bool(applied),
                tuple(json.loads(app)) if app is not None else None,
                pid,
            )
            for seq, kind, thread, stage, node, op, role, key, applied, app, pid in rows
        ]
