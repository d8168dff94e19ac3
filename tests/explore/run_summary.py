"""What two explorations must agree on to count as the same run: the explorer's tests compare
engines, worker counts and recoveries by it."""


def summary(result):
    """Distinct and generated states, depth, and each violation's trace length."""
    lengths = {name: len(v.trace) for name, v in result.violations.items()}
    return result.distinct_states, result.states_generated, result.depth, lengths
