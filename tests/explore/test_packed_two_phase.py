"""The benchmark's bit-packed TwoPhase (bench/two_phase_packed.py) is the readable TwoPhase.

The packed model exists to measure the explorer, so it must explore the same graph as the
readable encoding in examples/two_phase.py: same distinct states, states generated and depth for
N = 3..6 (and TLC's counts where tlaplus/Examples records them), and, for small N, the very same
reachable set once packed states are decoded into the readable vocabulary.
"""

from __future__ import annotations

import pytest
from two_phase import TwoPhase

from bench.two_phase_packed import TwoPhasePacked
from pymc_resume.explore import explore

# TLC's distinct states: TwoPhase.cfg (three RMs) and the spec's closing comment (six RMs).
TLC_DISTINCT = {3: 288, 6: 50816}


def reachable(model) -> set:
    """Every state reachable in `model`, by a plain breadth-first search."""
    seen = set(model.initial_states())
    queue = list(seen)
    for state in queue:  # the queue grows as the loop runs
        for _action, successor in model.successors(state):
            if successor not in seen:
                seen.add(successor)
                queue.append(successor)
    return seen


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_packed_counts_match_readable(n):
    packed, readable = explore(TwoPhasePacked(n)), explore(TwoPhase(n))
    for result in (packed, readable):
        assert result.complete and result.violations == {}
    assert packed.distinct_states == readable.distinct_states
    assert packed.states_generated == readable.states_generated
    assert packed.depth == readable.depth
    if n in TLC_DISTINCT:
        assert packed.distinct_states == TLC_DISTINCT[n]


@pytest.mark.parametrize("n", [3, 4])
def test_decoded_packed_states_are_the_readable_reachable_set(n):
    packed = TwoPhasePacked(n)
    states = reachable(packed)
    decoded = {packed.decode(state) for state in states}
    assert len(decoded) == len(states)  # decode is injective on reachable states
    assert decoded == reachable(TwoPhase(n))
    assert all(packed.encode(packed.decode(state)) == state for state in states)


@pytest.mark.parametrize("n", [3, 4])
def test_packed_successors_decode_to_readable_successors(n):
    """Action by action: the same labelled successors, in the same order."""
    packed, readable = TwoPhasePacked(n), TwoPhase(n)
    for state in reachable(packed):
        mine = [(action, packed.decode(nxt)) for action, nxt in packed.successors(state)]
        assert mine == list(readable.successors(packed.decode(state)))


def test_packed_invariants_agree_with_readable():
    packed, readable = TwoPhasePacked(3), TwoPhase(3)
    inconsistent = packed.encode(
        (("aborted", "committed", "working"), "committed", frozenset(), frozenset({("Commit",)}))
    )
    assert not packed.consistent(inconsistent)
    assert not readable.consistent(packed.decode(inconsistent))
    assert not packed.type_ok(0b11 << 6)  # tmState = 0b11 is no state of the TM
    assert not packed.type_ok(1 << 16)  # a bit past the layout
    assert not packed.type_ok(-1)
    for state in reachable(packed):
        assert packed.type_ok(state) and readable.type_ok(packed.decode(state))
        assert packed.consistent(state) == readable.consistent(packed.decode(state))


def test_packed_parallel_matches_serial():
    serial, parallel = explore(TwoPhasePacked(5)), explore(TwoPhasePacked(5), workers=2)
    assert (parallel.distinct_states, parallel.states_generated, parallel.depth) == (
        serial.distinct_states,
        serial.states_generated,
        serial.depth,
    )
    # each worker says how many states it owns and how long it stepped levels (none for one)
    assert serial.worker_load == () and len(parallel.worker_load) == 2
    assert sum(states for states, _busy in parallel.worker_load) == parallel.distinct_states
    assert all(0 < busy <= parallel.seconds for _states, busy in parallel.worker_load)
