"""The serial explorer on small hand-made models whose answers are known."""

from pymc_resume.explore import AlwaysReachable, Invariant, explore


class Jugs:
    """Die Hard's jugs (3 and 5 gallons); the invariant "big jug never holds 4" fails."""

    invariants = [Invariant("NotSolved", lambda s: s[1] != 4)]
    reachability = []
    deadlock_is_error = False

    def initial_states(self):
        return [(0, 0)]

    def successors(self, state):
        small, big = state
        yield "FillSmall", (3, big)
        yield "FillBig", (small, 5)
        yield "EmptySmall", (0, big)
        yield "EmptyBig", (small, 0)
        poured = min(small, 5 - big)
        yield "SmallToBig", (small - poured, big + poured)
        poured = min(big, 3 - small)
        yield "BigToSmall", (small + poured, big - poured)


class Line:
    """0 -> 1 -> ... -> n-1; optionally a trap n-1 -> n that cannot get back to 0."""

    invariants = []
    deadlock_is_error = True

    def __init__(self, n, trap=False):
        self.n, self.trap = n, trap
        self.reachability = [AlwaysReachable("home", lambda s: s == 0)]

    def initial_states(self):
        return [0]

    def successors(self, state):
        if state < self.n - 1:
            yield "next", state + 1
        elif state == self.n - 1:
            yield "home", 0
            if self.trap:
                yield "fall", self.n


def test_counts_all_states_and_finds_the_shortest_counterexample():
    result = explore(Jugs())
    assert result.complete and result.distinct_states == 16
    trace = result.violations["NotSolved"].trace
    assert trace[0].action is None and trace[0].state == (0, 0)
    assert trace[-1].state[1] == 4
    assert len(trace) - 1 == 6  # the known shortest solution has six pours


def test_trace_is_a_real_path_of_the_model():
    model = Jugs()
    trace = explore(model).violations["NotSolved"].trace
    for before, after in zip(trace, trace[1:]):
        assert (after.action, after.state) in list(model.successors(before.state))


def test_reachability_holds_on_a_cycle_and_fails_on_a_trap():
    assert "home" not in explore(Line(4)).violations
    result = explore(Line(4, trap=True))
    assert [s.state for s in result.violations["home"].trace] == [0, 1, 2, 3, 4]


def test_deadlock_is_reported_only_where_the_model_asks():
    result = explore(Line(4, trap=True))
    assert [s.state for s in result.violations["deadlock"].trace][-1] == 4
    assert "deadlock" not in explore(Line(4)).violations


def test_state_limit_stops_and_marks_the_result_incomplete():
    result = explore(Jugs(), max_states=5)
    assert not result.complete and result.stopped_because
    assert not result.holds("NotSolved")


def test_canonical_merges_symmetric_states_and_keeps_real_traces():
    class Pair(Jugs):
        invariants = [Invariant("Small", lambda s: max(s) < 3)]

        def initial_states(self):
            return [(0, 0)]

        def successors(self, state):
            a, b = state
            if a < 3:
                yield "incA", (a + 1, b)
            if b < 3:
                yield "incB", (a, b + 1)

    full = explore(Pair())
    reduced = explore(Pair(), canonical=lambda s: tuple(sorted(s)))
    assert full.distinct_states == 16 and reduced.distinct_states == 10
    assert len(full.violations["Small"].trace) == len(reduced.violations["Small"].trace)
    model = Pair()
    trace = reduced.violations["Small"].trace
    for before, after in zip(trace, trace[1:]):
        assert (after.action, after.state) in list(model.successors(before.state))
