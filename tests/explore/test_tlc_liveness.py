"""Temporal properties against TLC: two tlaplus/Examples specifications with fairness.

EWD840 (examples/ewd840.py): `Liveness == terminated ~> terminationDetected` under
`WF_vars(System)` holds; tlaplus/Examples' specifications/ewd840/manifest.json records "success"
for EWD840.cfg (commit 32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9), and TLC 2.15 run here agrees.
Without the fairness TLC 2.15 reports a counterexample of 3 states, then stuttering.

DistributedReplicatedLog (examples/distributed_replicated_log.py): InSync fails;
specifications/FiniteMonotonic/manifest.json records "liveness failure" for
MCDistributedReplicatedLog.cfg. TLC 2.15 run here: 37 distinct states, 271 generated, and a lasso
of 6 states looping back to state 2 (the module docstrings give the runs). TLC's lasso is not a
shortest one (it is built from TLC's depth-first search); ours is shorter, so the tests check
that TLC's lasso is a fair behaviour of our model violating the same property, and that ours is
no longer.
"""

from __future__ import annotations

from distributed_replicated_log import DistributedReplicatedLog
from ewd840 import EWD840
from test_temporal import judge_lasso

from pymc_resume.explore import explore
from pymc_resume.explore.result import Step, Violation


def test_ewd840_liveness_holds_under_weak_fairness_of_system():
    result = explore(EWD840(3))
    assert result.complete and result.violations == {}
    assert result.holds("Liveness")
    assert (result.distinct_states, result.depth) == (302, 9)  # TLC: 302 states, depth 9


def test_ewd840_liveness_fails_without_fairness():
    model = EWD840(3, fair=False)
    result = explore(model)
    lasso = result.violations["Liveness"]
    judge_lasso(model, model.temporal[0], lasso)
    # TLC 2.15 (SpecNoFairness): 3 states, then stuttering; ours: the terminated initial
    # state itself, stuttering forever.
    assert lasso.loops_back == "stuttering" and len(lasso.trace) <= 3


TLC_LASSO = [  # TLC 2.15's counterexample, as log lengths (n1, n2, n3)
    (None, (0, 0, 0)),
    ("Extend(n2)", (0, 3, 0)),
    ("Copy(n3)", (0, 3, 3)),
    ("Copy(n1)", (2, 3, 3)),
    ("Extend(n2)", (2, 4, 3)),
    ("Copy(n1)", (3, 4, 3)),
]  # "Back to state 2: Extend"


def test_distributed_replicated_log_violates_in_sync():
    model = DistributedReplicatedLog()
    result = explore(model)  # the cfg's VIEW is the model's `view`, always applied
    assert result.complete
    assert (result.distinct_states, result.states_generated) == (37, 271)  # TLC 2.15's counts
    assert result.holds("BoundedLag") and "deadlock" not in result.violations
    in_sync = {prop.name: prop for prop in model.temporal}
    assert "InSync(n1,n2)" in result.violations  # the pair TLC's lasso violates
    for name, violation in result.violations.items():
        judge_lasso(model, in_sync[name], violation)
        assert len(violation.trace) <= len(TLC_LASSO)
    # The graph pass by fingerprints (hashed: the states are tuples) finds what whole states do.
    assert 0 < result.collision_probability < 1e-12
    assert explore(model, exact=True).violations == result.violations
    tlc = Violation(
        "InSync(n1,n2)",
        tuple(Step(action, state) for action, state in TLC_LASSO),
        cycle_start=1,
        loops_back="Extend(n2)",
    )
    judge_lasso(model, in_sync["InSync(n1,n2)"], tlc)
