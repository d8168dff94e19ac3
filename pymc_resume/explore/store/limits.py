"""When an exploration must stop early: a state, time or memory budget.

The memory budget is the whole run's: every process (coordinator and workers) at its peak, as
the JSON result's `peak_rss_mib` total adds them up. Deciding reachability (liveness) after the
search needs a little more: each partition keeps its edges where they are and marks its states
in two flags a state, scanning its edges a chunk at a time (`reachability`). So while a model
has reachability properties, the search also counts that future cost (`results_reserve`), and
stops early enough for the run to end within the budget.
"""

from __future__ import annotations

import time

import attrs

# Bytes the post-search reachability adds per edge and per state: the edges are stored already;
# a round's temporaries are bounded by its chunk of edges (`reachability.EDGE_CHUNK`, about 55
# MB) and the states it finds (8 bytes each, twice while they are made unique), plus two flags.
RESERVE_PER_EDGE = 1
RESERVE_PER_STATE = 24


def results_reserve(edges: int, states: int) -> int:
    """Memory that deciding reachability will need after a search of this size."""
    return RESERVE_PER_EDGE * edges + RESERVE_PER_STATE * states


@attrs.frozen
class Limits:
    max_states: int | None = None
    max_seconds: float | None = None
    # Bytes of resident memory, every process of the run together, each at its peak (`memory`).
    max_memory: int | None = None

    def exceeded(self, states: int, started: float, memory: int, headroom: int = 0) -> str | None:
        """Why the run must stop now, or None (`memory`: the run's peak resident bytes;
        `headroom`: what it may add before the next check, `MemoryForecast`)."""
        if self.max_states is not None and states >= self.max_states:
            return f"state limit of {self.max_states:,} reached"
        if self.max_seconds is not None and time.monotonic() - started > self.max_seconds:
            return f"time limit of {self.max_seconds:g}s reached"
        if self.max_memory is not None and memory + headroom > self.max_memory:
            ahead = f", and may add {headroom / 2**20:,.0f} MiB before its next check" if headroom else ""
            return self.memory_message(
                f"the run reached {memory / 2**20:,.0f} MiB (its processes at their peaks, and "
                f"what deciding liveness still needs){ahead}"
            )
        return None

    def memory_message(self, what: str) -> str:
        assert self.max_memory is not None  # asked only of a run with a memory budget
        return (
            f"memory budget of {self.max_memory / 2**20:,.0f} MiB: {what}; to go on, raise "
            "--max-memory or check smaller bounds"
        )


@attrs.define
class MemoryForecast:
    """How much a run's memory may grow before its next check: twice the largest growth seen
    between two checks so far.

    Memory is checked by sampling (every few thousand expansions); a level's admissions and
    batches land between two samples, so a run that only compared its memory with the budget
    would notice the budget was crossed one such step too late. Levels grow from one to the
    next, so the forecast allows the next step twice the largest seen. One per checking
    process, for the run's duration.
    """

    last: int | None = None
    largest_step: int = 0

    def headroom(self, memory: int) -> int:
        """Record `memory` (the run's, at this check); what to keep free for the next step."""
        if self.last is not None:
            self.largest_step = max(self.largest_step, memory - self.last)
        self.last = memory
        return 2 * self.largest_step
