"""The state of the reference semantics: durable store, processes, client budget and sink.

Everything is an immutable named tuple of small ints and tuples, so states hash fast and can be
compared by value. Processes never name each other and the store never names a process (a run
lease is FREE, LIVE or DEAD, and the holder knows it holds it), so permuting processes is a
symmetry of the model.
"""

from __future__ import annotations

from typing import NamedTuple

# Checkpoint.stage for checkpoints that do not commit a stage.
INITIAL = -2
UPDATE = -1

# Thread.status
NEW = 0  # created (root or fork), not yet run
STARTED = 1
FAILED = 2  # a node's output failed the schema and was refused: the thread ends here (quiescent)

# Thread.runner: the per-thread run lease.
FREE = 0
LIVE = 1  # held by a running process
DEAD = 2  # held by a process that crashed; recovery takes it over
STUCK = 3  # fault no-mid-node-recovery: held by a process that crashed mid-node, for good

# Process.phase
IDLE = 0
LOADED = 1  # a delivery that validated its value and read the head, before its claim
READY = 2  # holds a loaded position, about to execute stage `pc`
EXECUTED = 3  # executed stage `pc` in memory (effects fired), about to commit

# Thread.intent
ROOT = 0
REPLAY = 1
EDIT = 2
INTENT_NAMES = {ROOT: "root", REPLAY: "replay", EDIT: "edit"}

NO_VALUE = 0  # in `claims` and `Process.value`: nothing claimed / no value in hand


class Checkpoint(NamedTuple):
    """A durable record of a thread's application state and position (next stage)."""

    pc: int
    app: tuple[int, ...]
    stage: int  # the stage this checkpoint commits; INITIAL or UPDATE otherwise


class Thread(NamedTuple):
    """One thread in the store, with the history variables the clauses need."""

    chain: tuple[Checkpoint, ...]  # oldest first; a fork's starts with its inherited ancestry
    status: int
    runner: int
    claims: tuple[int, ...]  # per stage: the recorded (claimed or replayed) input, or NO_VALUE
    parent: int  # -1 for the root thread
    base: int  # index in the parent's chain this fork starts from (-1 for the root)
    intent: int
    edit_value: int  # the new input an edit fork declares (NO_VALUE otherwise)
    inherited: int  # stages below this one take their recorded input from the parent
    by_reference: bool  # fault: the fork shares the parent's checkpoint state
    # History variables (not part of a real store):
    crashed: bool  # a crash in this thread's history (forks inherit it)
    crashed_since_fork: bool
    deliveries: tuple[int, ...]  # per stage: deliveries that executed it
    second_records: tuple[tuple[int, int], ...]  # (stage, value) recorded after consumption
    ancestry_executed: bool  # a fork executed a stage of its checkpoint's ancestry

    @property
    def head(self) -> Checkpoint:
        return self.chain[-1]


class Process(NamedTuple):
    """A process: idle, or working on one thread with an in-memory copy of a checkpoint."""

    phase: int
    thread: int
    pc: int  # the stage to execute (READY), executed (EXECUTED), or targeted (LOADED)
    loaded: int  # length of the thread's chain when loaded: the compare-and-set expectation
    app: tuple[int, ...]
    value: int  # the resume value in hand for the stage at pc, or NO_VALUE
    holds_lease: bool
    recovering: bool
    delivery: bool  # a client delivery that has not yet executed its interrupt


IDLE_PROCESS = Process(IDLE, -1, -1, -1, (), NO_VALUE, False, False, False)


class Budget(NamedTuple):
    """What the client may still do."""

    resumes: int
    crashes: int
    forks: int
    invalid_updates: int


class World(NamedTuple):
    """A state of the reference semantics."""

    budget: Budget
    processes: tuple[Process, ...]
    threads: tuple[Thread, ...]
    sink: tuple[tuple[tuple, int], ...]  # sorted (effect identity, applications)
