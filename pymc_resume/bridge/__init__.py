"""The bridge: the resume contract against live adapters, by Hypothesis stateful fuzzing.

Its subpackages, from the bottom up: each may import some of those listed before it, and its
docstring's "May import:" line says which (`tests/test_layers.py` reads that line and keeps it so):

- `adapter/`: the adapter protocol (operations, outcomes, observations), the node code the
  bridge hands an adapter and the effect sink that code writes to;
- `kit/`: what an adapter is built from: `ChildProcessAdapter`, child processes killed by a real
  SIGKILL at crash points, barriers for concurrent deliveries, warm clients;
- `hosting/`: where adapter code runs (a host process with deadlines, work folders) and how an
  adapter is found by name (the registry of built-in adapters and framework families);
- `judging/`: one example against a hosted adapter (`Session`): steps, observations, the
  model's clause predicates on them, and the evidence each session exercised;
- `repro/`: minimal repros, their file format, and their replay;
- `fuzzing/`: the Hypothesis state machine, the deterministic battery, `run_fuzz`, shrinking and
  time budgets;
- `race/`: k real processes resuming one parked interrupt, on one host or several;
- `adapters/`: one module per framework, the only place a framework library is imported;
- `profile.py`, on top: a framework configuration's clause-by-clause conformance profile.
"""

# Names an adapter author uses, loaded on first use (importing the bridge stays cheap).
_LAZY = {
    "ChildProcessAdapter": "pymc_resume.bridge.kit",
    "Refusal": "pymc_resume.bridge.kit",
    "NodeContext": "pymc_resume.bridge.adapter.nodes",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def contract_test_case(adapter_factory, **kwargs):
    """A unittest.TestCase fuzzing `adapter_factory()` against the contract (see machine.py)."""
    from pymc_resume.bridge.fuzzing.machine import contract_test_case as build

    return build(adapter_factory, **kwargs)


__all__ = ["ChildProcessAdapter", "NodeContext", "Refusal", "contract_test_case"]
