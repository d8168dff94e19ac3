"""The model API as a newcomer meets it: defaults, validation, TLC's constraints, stopping at the
first violation, readable changes, and the derived encoding of plain states."""

from __future__ import annotations

import dataclasses
from collections import namedtuple

import attrs
import pytest

from pymc_resume.errors import BadInput
from pymc_resume.explore import Invariant, explore
from pymc_resume.explore.store.plain import PlainCodec
from pymc_resume.explore.store.stable_hash import stable_hash
from pymc_resume.explore.traces.changes import changes
from pymc_resume.explore.validate import INITIAL_STATES_CHECKED, ModelError, validated


class Counters:
    """Two counters that each go up by one; nothing optional is declared."""

    def initial_states(self):
        return [(0, 0)]

    def successors(self, state):
        a, b = state
        yield "IncA", (a + 1, b)
        yield "IncB", (a, b + 1)


class Bounded(Counters):
    """Counters kept at most `bound` by a TLC-style state constraint."""

    def __init__(self, bound: int = 3, invariant=None) -> None:
        self.bound = bound
        self.invariants = [Invariant("Small", invariant)] if invariant else []

    def constraint(self, state) -> bool:
        return max(state) <= self.bound


def test_a_model_needs_only_initial_states_and_successors():
    result = explore(Bounded(3))
    assert result.complete and result.violations == {}


def test_a_state_constraint_counts_successors_outside_it_as_generated():
    # TLC: 16 states inside (0..3 x 0..3), each generating 2 successors, plus the initial state.
    result = explore(Bounded(3))
    assert (result.distinct_states, result.states_generated, result.depth) == (16, 33, 7)


def test_invariants_are_checked_on_successors_outside_the_constraint():
    result = explore(Bounded(3, invariant=lambda state: max(state) < 4))
    trace = result.violations["Small"].trace
    assert max(trace[-1].state) == 4 and len(trace) == 5  # (0,0) -> ... -> (4,0): 4 steps


def test_successors_outside_the_constraint_are_no_deadlock():
    class OnlyOutside(Bounded):
        def successors(self, state):
            yield "Jump", (state[0] + 10, state[1])

    result = explore(OnlyOutside(3))
    assert result.violations == {} and result.distinct_states == 1


def test_an_action_constraint_filters_transitions():
    class NoB(Counters):
        def constraint(self, state):
            return max(state) <= 3

        def action_constraint(self, state, action, next_state):
            return action != "IncB"

    result = explore(NoB())
    assert (result.distinct_states, result.states_generated) == (4, 9)


def test_stop_at_first_stops_early_with_a_shortest_trace():
    model = Bounded(50, invariant=lambda state: state[0] + state[1] < 6)
    full = explore(model)
    first = explore(model, stop_at_first=True)
    assert not first.complete and "first violation" in first.stopped_because
    assert first.distinct_states < full.distinct_states
    assert len(first.violations["Small"].trace) == len(full.violations["Small"].trace) == 7


def test_deadlock_is_checked_by_default_and_can_be_switched_off():
    class Stops(Counters):
        def successors(self, state):
            if state[0] < 2:
                yield "IncA", (state[0] + 1, state[1])

    assert "deadlock" in explore(Stops()).violations
    assert explore(Stops(), check_deadlock=False).violations == {}


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_impossible_worker_counts_are_refused(workers):
    with pytest.raises(BadInput, match="workers"):
        explore(Bounded(), workers=workers)


class Broken(Counters):
    """Counters with one attribute replaced by `mistake`."""

    def __init__(self, **mistake) -> None:
        for name, value in mistake.items():
            setattr(self, name, value)


@pytest.mark.parametrize(
    ("mistake", "message"),
    [
        ({"initial_states": lambda: []}, r"model.initial_states\(\): returned no state"),
        ({"initial_states": lambda: [[0, 0]]}, "must be hashable"),
        ({"initial_states": 3}, "model.initial_states: must be a method"),
        ({"successors": lambda state: [(state[0] + 1, state[1])]}, r"must yield \(action, next_state\)"),
        ({"successors": lambda state: [(1, state)]}, "with a str action"),
        ({"successors": lambda state: [("Inc", [1, 2])]}, "must be hashable"),
        ({"successors": lambda state: None}, "must yield"),
        ({"invariants": [lambda state: True]}, r"model.invariants\[0\]: must be an Invariant"),
        ({"invariants": [Invariant("", bool)]}, "non-empty string"),
        ({"invariants": [Invariant("x", bool), Invariant("x", bool)]}, "two properties named"),
        ({"deadlock_is_error": "yes"}, "deadlock_is_error: must be True or False"),
    ],
)
def test_a_malformed_model_is_one_line_naming_the_attribute(mistake, message):
    with pytest.raises(ModelError, match=message) as raised:
        explore(Broken(**mistake))
    assert "\n" not in str(raised.value)


def test_only_the_first_initial_states_successors_are_checked_before_the_search():
    # A spec whose variables may start anywhere has many initial states (EWD840 with N = 8:
    # 524,288); their successors are generated by the search, not twice.
    asked = []

    class ManyStarts:
        deadlock_is_error = False

        def initial_states(self):
            return range(5000)

        def successors(self, state):
            asked.append(state)
            return iter(())

    validated(ManyStarts())
    assert len(asked) == INITIAL_STATES_CHECKED < 5000


def test_pair_states_without_labels_are_not_misread():
    # States are (str, int) pairs and successors forget the label: ("a", 1) must not be taken
    # for the action "a" leading to the state 1.
    class Pairs:
        def initial_states(self):
            return [("a", 0)]

        def successors(self, state):
            yield (state[0], state[1] + 1)

    with pytest.raises(ModelError, match="does it yield"):
        explore(Pairs())


# --- what changed, field by field ----------------------------------------------------------

Point = namedtuple("Point", "x y")


@attrs.frozen
class Box:
    name: str
    items: frozenset


@dataclasses.dataclass(frozen=True)
class Pair:
    left: int
    right: tuple


def test_changes_are_named_field_by_field():
    assert changes(Point(1, 2), Point(1, 3)) == ["y: 2 -> 3"]
    assert changes(Box("a", frozenset({1})), Box("a", frozenset({2}))) == ["items: + 2", "items: - 1"]
    assert changes(Pair(1, (0, 0)), Pair(1, (0, 5))) == ["right[1]: 0 -> 5"]
    assert changes({"k": 1}, {"k": 2}) == ["['k']: 1 -> 2"]
    assert changes((("w", "w"), 1), (("p", "w"), 1), ["rms", "n"]) == ["rms[0]: 'w' -> 'p'"]
    assert changes(None, Point(1, 2)) == ["x = 1", "y = 2"]
    assert changes(3, 4) == ["state: 3 -> 4"]


# --- the derived encoding --------------------------------------------------------------------


@pytest.mark.parametrize(
    "state",
    [
        (("working", "prepared"), "init", frozenset({1}), frozenset({("Prepared", 0)})),
        Point(1, "x"),
        Box("b", frozenset({"y"})),
        Pair(3, (None, True)),
        "text",
        (),
        7.5,
    ],
)
def test_plain_states_round_trip_and_hash_stably(state):
    codec = PlainCodec()
    key = codec.encode(state)
    assert codec.decode(key) == state and type(codec.decode(key)) is type(state)
    assert codec.owner_hash(key) == stable_hash(state)


def test_keys_travel_between_partitions():
    sender, receiver = PlainCodec(), PlainCodec()
    receiver.encode(("other", 1))  # the receiver's ids differ from the sender's
    state = Box("z", frozenset({"q"}))
    key = sender.encode(state)
    translation = receiver.new_translation()
    _mark, delta = sender.delta(None)
    receiver.absorb(translation, delta)
    assert receiver.decode(receiver.translate(key, translation)) == state


def test_equal_states_hash_alike_whatever_their_type():
    assert stable_hash(Point(1, 2)) == stable_hash((1, 2))
    assert stable_hash(frozenset({"a", "b"})) == stable_hash(frozenset({"b", "a"}))
    assert stable_hash(True) == stable_hash(1)


def test_sets_with_equal_sums_of_parts_hash_apart():
    # (exchanging workers take the hash for the state's fingerprint: {1, 2} once lost {0, 3})
    assert stable_hash(frozenset({1, 2})) != stable_hash(frozenset({0, 3}))
    assert stable_hash((frozenset({1, 2}), 0)) != stable_hash((frozenset({0, 3}), 0))


def test_initial_states_outside_the_constraint_are_checked_not_explored():
    class StartsOutside(Bounded):
        def initial_states(self):
            return [(0, 0), (9, 0)]

    result = explore(StartsOutside(3, invariant=lambda state: state[0] < 9))
    assert result.distinct_states == 16 and result.states_generated == 34
    assert [step.state for step in result.violations["Small"].trace] == [(9, 0)]


@attrs.frozen
class Clock:
    """A state of class instances (with a named tuple and a string inside)."""

    hands: Point
    label: str


class Clocks:
    def initial_states(self):
        return [Clock(Point(0, 0), "start")]

    def successors(self, state):
        x, y = state.hands
        if x < 40:
            yield "tick", Clock(Point(x + 1, y), f"t{x + 1}")
        if y < 40:
            yield "tock", Clock(Point(x, y + 1), state.label)


def test_a_two_worker_run_of_class_states_resumes_to_the_same_counts(tmp_path):
    from pymc_resume.explore.search import SnapshotSchedule
    from pymc_resume.explore.snapshots import snapshot

    whole = explore(Clocks(), workers=2)
    snapshots = SnapshotSchedule(str(tmp_path), every=0.0, run={"what": "clocks"})
    first = explore(Clocks(), workers=2, max_states=500, snapshots=snapshots)
    assert not first.complete
    recovered = explore(Clocks(), workers=2, from_snapshot=snapshot.load(tmp_path), snapshots=snapshots)
    counts = lambda r: (r.distinct_states, r.states_generated, r.depth)
    assert counts(recovered) == counts(whole) and whole.complete
