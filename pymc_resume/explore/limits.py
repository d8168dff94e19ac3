"""When an exploration must stop early: a state, time or memory budget."""

from __future__ import annotations

import time

import attrs


@attrs.frozen
class Limits:
    max_states: int | None = None
    max_seconds: float | None = None
    # Bytes of resident memory, every process of the run together, each at its peak (`memory`).
    max_memory: int | None = None

    def exceeded(self, states: int, started: float, memory: int) -> str | None:
        """Why the run must stop now, or None (`memory`: the run's peak resident bytes)."""
        if self.max_states is not None and states >= self.max_states:
            return f"state limit of {self.max_states:,} reached"
        if self.max_seconds is not None and time.monotonic() - started > self.max_seconds:
            return f"time limit of {self.max_seconds:g}s reached"
        if self.max_memory is not None and memory > self.max_memory:
            return self.memory_message(f"the run's processes reached {memory / 2**20:,.0f} MiB")
        return None

    def memory_message(self, what: str) -> str:
        return (
            f"memory budget of {self.max_memory / 2**20:,.0f} MiB: {what}; to go on, raise "
            "--max-memory or check smaller bounds"
        )
