"""A generic explicit-state explorer in the spirit of TLC.

It knows nothing of workflows: a model (see `protocol`) gives initial states, labelled
successors, named invariants and named reachability properties; `search.explore` enumerates
every reachable state breadth-first and reports each violated property with a shortest trace.
"""

from pymc_resume.explore.protocol import AlwaysReachable, Invariant, Model
from pymc_resume.explore.result import ExplorationResult, Step, Violation
from pymc_resume.explore.search import explore
from pymc_resume.explore.validate import ModelError

__all__ = [
    "AlwaysReachable",
    "ExplorationResult",
    "Invariant",
    "Model",
    "ModelError",
    "Step",
    "Violation",
    "explore",
]
