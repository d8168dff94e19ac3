"""Tinyflow, the durable executor of docs/adapters.md, on one SQLite file. A flow is a list of
steps `(state, value, key) -> state`; some wait for a client's value. A run lease names the
process running it ("pid:start time"); `resume` validates, then claims the waiting step and takes
the lease in one transaction before any step runs; a commit is a compare-and-set on the run's
head by the lease holder; a step's key is (lineage, step, inputs so far); forks copy."""
import json, os, sqlite3
from collections import namedtuple
from pathlib import Path

SCHEMA = """PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, status TEXT, head INT, lease TEXT, parent INT, edited INT);
CREATE TABLE IF NOT EXISTS checkpoints (run INT, seq INT, position INT, source TEXT, state TEXT, PRIMARY KEY (run, seq));
CREATE TABLE IF NOT EXISTS inputs (run INT, step INT, value INT, PRIMARY KEY (run, step));"""
HEAD = "SELECT status, head, lease, position, state FROM runs JOIN checkpoints ON run = id AND seq = head WHERE id = ?"


class Refused(Exception):
    """The executor refuses a client's request."""


# run: (state: dict, value or None, key: str) -> the new state; waits: takes a value from a client (`resume`)
Step = namedtuple("Step", "name run waits", defaults=(False,))


def holder(pid="self") -> str | None:
    """A running process's lease token, "pid:start time"; None when it is gone (or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else f"{os.getpid() if pid == 'self' else pid}:{fields[19]}"


def alive(lease: str) -> bool:
    return holder(lease.split(":")[0]) == lease


class Flow:
    def __init__(self, path, steps: list[Step], valid=lambda state: True, valid_value=lambda value: True,
                 on_commit=lambda run, step: None):  # on_commit: right after a step's checkpoint is stored
        self.path, self.steps, self.valid, self.valid_value, self.on_commit = path, steps, valid, valid_value, on_commit
        sqlite3.connect(path).executescript(SCHEMA).close()

    def db(self) -> sqlite3.Connection:
        """`with self.db() as db:` is one BEGIN IMMEDIATE transaction, committed at the end (rolled back on an
        error); the connection closes when the last reference to it goes."""
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        return db

    def create(self, state: dict) -> int:
        with self.db() as db:
            run = db.execute("INSERT INTO runs (status, head) VALUES ('new', 0)").lastrowid
            db.execute("INSERT INTO checkpoints VALUES (?, 0, 0, 'start', ?)", (run, json.dumps(state)))
        return run

    def read(self, db, run: int) -> tuple[tuple, tuple, dict]:
        """(status, head, lease), the head checkpoint (seq, position, state), {step: input}."""
        status, head, lease, position, state = db.execute(HEAD, (run,)).fetchone()
        return (status, head, lease), (head, position, json.loads(state)), dict(db.execute(
            "SELECT step, value FROM inputs WHERE run = ?", (run,)).fetchall())

    def start(self, run: int) -> None:
        self._take(run, lambda row, head, inputs: row[0] != "new" and f"run {run} is {row[0]}")

    def resume(self, run: int, value: int) -> None:
        self._take(run, lambda row, head, inputs: (  # validate, then check the run, then claim
            not self.valid_value(value) and f"invalid value {value}"
            or row[0] != "started" and f"run {run} is {row[0]}" or row[2] and f"run {run} is running"
            or (head[1] == len(self.steps) or not self.steps[head[1]].waits) and "not waiting for a value"
            or head[1] in inputs and f"step {head[1]} has its value already"), claim=value)

    def recover(self, run: int) -> None:
        self._take(run, lambda row, head, inputs: (not row[2] or alive(row[2])) and f"run {run} has no dead lease")

    def _take(self, run: int, refusal, claim: int | None = None) -> None:
        """In one transaction: refuse if `refusal(row, head, inputs)` says why; claim; take the lease. Then run."""
        with self.db() as db:
            if why := refusal(*self.read(db, run)):
                raise Refused(why)
            if claim is not None:  # claim before execute: the waiting step's input, unique per step
                db.execute("INSERT INTO inputs VALUES (?, ?, ?)", (run, self.read(db, run)[1][1], claim))
            db.execute("UPDATE runs SET status = 'started', lease = ? WHERE id = ?", (holder(), run))
        self._run(run)

    def _run(self, run: int) -> None:
        """Run steps under the lease until the run waits for a value or ends; then release the lease."""
        while True:
            with self.db() as db:
                _, (seq, position, state), inputs = self.read(db, run)
                key = f"{self.lineage(db, run, position)}/{position}/{[inputs[s] for s in sorted(inputs) if s <= position]}"
            if position == len(self.steps) or (self.steps[position].waits and position not in inputs):
                return self._release(run, "started")
            state = self.steps[position].run(state, inputs.get(position), key)
            if not self.valid(state):
                self._release(run, "failed")
                raise Refused(f"step {self.steps[position].name} wrote an invalid state: run {run} failed")
            with self.db() as db:  # compare-and-set: only the lease holder, only from the head it read
                if not db.execute("UPDATE runs SET head = head + 1 WHERE id = ? AND head = ? AND lease = ?",
                                  (run, seq, holder())).rowcount:
                    raise Refused(f"run {run} moved on: this process lost its lease")
                db.execute("INSERT INTO checkpoints VALUES (?, ?, ?, 'step', ?)",
                           (run, seq + 1, position + 1, json.dumps(state)))
            self.on_commit(run, position)

    def lineage(self, db, run: int, position: int) -> int:
        """Whose effects a step at `position` repeats: the root's, or the nearest edit fork's at or after its edit."""
        parent, edited = db.execute("SELECT parent, edited FROM runs WHERE id = ?", (run,)).fetchone()
        return run if parent is None or (edited is not None and position >= edited) else self.lineage(db, parent, position)

    def _release(self, run: int, status: str) -> None:
        with self.db() as db:
            db.execute("UPDATE runs SET lease = NULL, status = ? WHERE id = ? AND lease = ?", (status, run, holder()))

    def fork(self, run: int, seq: int, value: int | None = None) -> int:
        """A new run from checkpoint `seq` of `run`, by copy: an edit with the new input `value`, else a replay."""
        with self.db() as db:
            _, (_, done, _), inputs = self.read(db, run)  # done: the steps before the head's position committed
            at = db.execute("SELECT position FROM checkpoints WHERE run = ? AND seq = ?", (run, seq)).fetchone()
            if at is None or (value is not None and not self.valid_value(value)):
                raise Refused(f"no checkpoint {seq} of run {run}, or an invalid value")
            upto = at[0] if value is not None else done  # a replay keeps every input the parent consumed
            new = db.execute("INSERT INTO runs (status, head, parent, edited) VALUES ('new', ?, ?, ?)",
                             (seq, run, None if value is None else at[0])).lastrowid
            db.execute("INSERT INTO checkpoints SELECT ?, seq, position, source, state FROM checkpoints "
                       "WHERE run = ? AND seq <= ?", (new, run, seq))
            inputs = {step: v for step, v in inputs.items() if step < upto} | ({} if value is None else {at[0]: value})
            db.executemany("INSERT INTO inputs VALUES (?, ?, ?)", [(new, step, v) for step, v in inputs.items()])
        return new

    def update(self, run: int, changes: dict) -> None:
        with self.db() as db:
            (status, _, lease), (seq, position, state), _ = self.read(db, run)
            if status != "started" or (lease and alive(lease)) or not self.valid({**state, **changes}):
                raise Refused(f"run {run} is not parked, or the update is invalid")
            db.execute("UPDATE runs SET head = head + 1 WHERE id = ?", (run,))
            db.execute("INSERT INTO checkpoints VALUES (?, ?, ?, 'update', ?)",
                       (run, seq + 1, position, json.dumps({**state, **changes})))
