"""CheckpointResume: N processes, each counting up to K, checkpointing its counter and resuming
from the checkpoint after a crash. The resume contract in miniature, written plainly.

Per process, a tuple (pc, counter, saved): pc is "running" or "crashed", counter the value in
memory (lost by a crash), saved the last checkpointed value. Actions of process i:

    Step(i)        running, counter < K          counter' = counter + 1
    Checkpoint(i)  running, saved < counter      saved' = counter
    Crash(i)       running                       pc' = "crashed", counter' = 0
    Resume(i)      crashed                       pc' = "running", counter' = saved

Invariants: a running process never has more saved than it counted (ResumeFromCheckpoint:
resuming restores the checkpoint, never a later value), and counters stay within 0..K. Each
process has (K+1)(K+2)/2 running states and K+1 crashed ones, so there are
((K+1)(K+2)/2 + K+1)^N distinct states, all reachable: N=4, K=5 gives 27^4 = 531,441.

`CheckpointResume` is the model for `pymc_resume.explore` (a state is a tuple of N such
tuples, no codec); `protocol` is the same model for minicheck 0.4.0 (one flat tuple of named
fields, as minicheck's README writes models), with the same successors in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator

from pymc_resume.explore import Invariant

RUNNING, CRASHED = "running", "crashed"


def distinct_states(n: int, k: int) -> int:
    """The exact number of reachable states (every combination of per-process states)."""
    return ((k + 1) * (k + 2) // 2 + k + 1) ** n


class CheckpointResume:
    """N processes counting to K with checkpoints and crashes (see the module docstring)."""

    def __init__(self, n: int = 4, k: int = 5) -> None:
        self.n, self.k = n, k
        self.labels = [
            tuple(f"{action}({i})" for action in ("Step", "Checkpoint", "Crash", "Resume")) for i in range(n)
        ]
        self.invariants = [
            Invariant("ResumeFromCheckpoint", self.resume_from_checkpoint),
            Invariant("Bounded", self.bounded),
        ]

    def initial_states(self):
        return [((RUNNING, 0, 0),) * self.n]

    def successors(self, state) -> Iterator[tuple[str, tuple]]:
        k = self.k
        for i, (pc, counter, saved) in enumerate(state):
            step, checkpoint, crash, resume = self.labels[i]
            if pc == RUNNING:
                if counter < k:
                    yield step, replace(state, i, (RUNNING, counter + 1, saved))
                if saved < counter:
                    yield checkpoint, replace(state, i, (RUNNING, counter, counter))
                yield crash, replace(state, i, (CRASHED, 0, saved))
            else:
                yield resume, replace(state, i, (RUNNING, saved, saved))

    def resume_from_checkpoint(self, state) -> bool:
        return all(pc == CRASHED or saved <= counter for pc, counter, saved in state)

    def bounded(self, state) -> bool:
        return all(0 <= saved <= self.k and 0 <= counter <= self.k for _, counter, saved in state)


def replace(state: tuple, index: int, process: tuple) -> tuple:
    return state[:index] + (process,) + state[index + 1 :]


def protocol(n: int = 4, k: int = 5):
    """The same model as a minicheck Protocol: fields pc_i, counter_i, saved_i per process."""
    from minicheck import Protocol

    names = tuple(f"{field}_{i}" for i in range(n) for field in ("pc", "counter", "saved"))
    labels = CheckpointResume(n, k).labels

    def update(s: tuple, changes) -> tuple:
        nxt = list(s)
        for position, value in changes:
            nxt[position] = value
        return tuple(nxt)

    def transitions(s: tuple) -> list:
        out = []
        for i in range(n):
            pc, counter, saved = 3 * i, 3 * i + 1, 3 * i + 2
            step, checkpoint, crash, resume = labels[i]
            if s[pc] == RUNNING:
                if s[counter] < k:
                    out.append((step, update(s, ((counter, s[counter] + 1),))))
                if s[saved] < s[counter]:
                    out.append((checkpoint, update(s, ((saved, s[counter]),))))
                out.append((crash, update(s, ((pc, CRASHED), (counter, 0)))))
            else:
                out.append((resume, update(s, ((pc, RUNNING), (counter, s[saved])))))
        return out

    def resume_from_checkpoint(d: dict) -> bool:
        return all(d[f"pc_{i}"] == CRASHED or d[f"saved_{i}"] <= d[f"counter_{i}"] for i in range(n))

    def bounded(d: dict) -> bool:
        return all(0 <= d[f"saved_{i}"] <= k and 0 <= d[f"counter_{i}"] <= k for i in range(n))

    return Protocol(
        name=f"CheckpointResume{n}x{k}",
        candidate=False,
        fields=names,
        initial=(RUNNING, 0, 0) * n,
        transitions=transitions,
        invariants={"ResumeFromCheckpoint": resume_from_checkpoint, "Bounded": bounded},
    )
