"""TLC-style progress lines for long explorations: distinct states, rate, queue and depth."""

from __future__ import annotations

import sys
import time
from typing import TextIO

import attrs


@attrs.frozen
class Snapshot:
    """The explorer's counters at one moment."""

    distinct_states: int
    states_generated: int
    queue: int
    depth: int
    seconds: float


class ProgressPrinter:
    """Prints a snapshot at most every `interval` seconds (and always the last one)."""

    def __init__(self, stream: TextIO = sys.stderr, interval: float = 5.0) -> None:
        self.stream = stream
        self.interval = interval
        self._last = time.monotonic()
        self._last_distinct = 0

    def __call__(self, snapshot: Snapshot, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._last < self.interval:
            return
        rate = (snapshot.distinct_states - self._last_distinct) / max(now - self._last, 1e-9)
        self._last, self._last_distinct = now, snapshot.distinct_states
        label = "done" if final else "progress"
        print(
            f"{label}: {snapshot.distinct_states:,} distinct states, "
            f"{snapshot.states_generated:,} generated, {rate:,.0f} states/s, "
            f"queue {snapshot.queue:,}, depth {snapshot.depth}, {snapshot.seconds:.1f}s",
            file=self.stream,
            flush=True,
        )


class WalkPrinter:
    """Prints a simulation's counters (`simulate.WalkProgress`) at most every `interval`
    seconds, and always the last ones."""

    def __init__(self, stream: TextIO = sys.stderr, interval: float = 5.0) -> None:
        self.stream = stream
        self.interval = interval
        self._last = time.monotonic()

    def __call__(self, progress, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._last < self.interval:
            return
        self._last = now
        rate = progress.walks / progress.seconds if progress.seconds > 0 else 0.0
        print(
            f"{'done' if final else 'progress'}: {progress.walks:,} walks, "
            f"{progress.states_visited:,} states visited, {rate:,.1f} walks/s, "
            f"{progress.seconds:.1f}s",
            file=self.stream,
            flush=True,
        )
