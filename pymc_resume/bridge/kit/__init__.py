"""The adapter kit: what an adapter is built from, so that it is left with its framework's own
calls. `child_process_adapter` has `ChildProcessAdapter` (docs/adapters.md); `process` runs a
client operation in a child process that a real SIGKILL ends at a crash point, and holds
concurrent deliveries at a barrier; `warm` keeps long-lived client processes; `postgres` gives
a PostgreSQL example a schema of its own and sweeps those a killed run left; `chains` builds a
thread's checkpoint chain from per-stage results.

May import: `bridge.adapter` and `pymc_resume.model`.
"""

from pymc_resume.bridge.kit.child_process_adapter import ChildProcessAdapter, NoOp, NotExpressible, Refusal

__all__ = ["ChildProcessAdapter", "NoOp", "NotExpressible", "Refusal"]
