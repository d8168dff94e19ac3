"""A generic explicit-state explorer in the spirit of TLC.

It knows nothing of workflows: a model (see `protocol`) gives initial states, labelled
successors, named invariants and named reachability properties; `search.explore` enumerates
every reachable state breadth-first and reports each violated property with a shortest trace.
Temporal properties under fairness (`temporal`) are decided on the state graph after the search
(`liveness`), each violation a lasso.
"""

from pymc_resume.explore.protocol import AlwaysReachable, Invariant, Model
from pymc_resume.explore.result import ExplorationResult, Step, Violation
from pymc_resume.explore.search import explore
from pymc_resume.explore.temporal import SF, WF, EventuallyAlways, InfinitelyOften, LeadsTo
from pymc_resume.explore.validate import ModelError

__all__ = [
    "SF",
    "WF",
    "AlwaysReachable",
    "EventuallyAlways",
    "ExplorationResult",
    "InfinitelyOften",
    "Invariant",
    "LeadsTo",
    "Model",
    "ModelError",
    "Step",
    "Violation",
    "explore",
]
