"""A reference runtime: a small, real, durable workflow executor on SQLite that satisfies the
resume contract, and a readable example of how a layer gets resume right.

- `store`: the durable store (threads, checkpoints, recorded inputs and claims) and its
  transactions;
- `holders`: who holds a run lease, and whether that process is still alive;
- `workflow`: what the executor runs (node kinds in order, the node code, the state schema);
- `executor`: the operations (start, resume, recover, fork, update) and the run loop;
- `faults`: fault switches, named after the model's mutants, that break it on purpose.
"""

from pymc_resume.runtime.executor import Refused, Runtime
from pymc_resume.runtime.faults import RUNTIME_FAULTS, faults_for
from pymc_resume.runtime.workflow import NodeContext, Probe, RuntimeWorkflow

__all__ = [
    "NodeContext",
    "Probe",
    "Refused",
    "Runtime",
    "RuntimeWorkflow",
    "RUNTIME_FAULTS",
    "faults_for",
]
