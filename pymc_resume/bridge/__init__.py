"""The bridge: the resume contract against live adapters, by Hypothesis stateful fuzzing.

- `adapter`: the protocol an adapter implements, and what it observes;
- `adapters/`: one module per framework (the only place a framework library is imported) and
  `adapters/reference`, the adapter for the reference runtime (`pymc_resume.runtime`);
- `process`: child processes, real SIGKILLs at crash points, the barrier for concurrent resumes;
- `sink`: the effect sink, outside any framework;
- `nodes`: the fuzzing workflow's plain-function node code;
- `session`: one example: apply steps, observe, judge, drain;
- `observe`, `clauses`: from observations to the model's clause predicates;
- `machine`: the Hypothesis state machine, and `contract_test_case` for users' suites;
- `fuzz`: `run_fuzz`, the `pymc-resume fuzz` engine;
- `shrink`, `repro`: minimal repros, their JSON and pytest files, and replay;
- `kit`: `ChildProcessAdapter`, the base class for a framework's adapter (docs/adapters.md).
"""

# Names an adapter author uses, loaded on first use (importing the bridge stays cheap).
_LAZY = {
    "ChildProcessAdapter": "pymc_resume.bridge.kit",
    "Refusal": "pymc_resume.bridge.kit",
    "NodeContext": "pymc_resume.bridge.nodes",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def contract_test_case(adapter_factory, **kwargs):
    """A unittest.TestCase fuzzing `adapter_factory()` against the contract (see machine.py)."""
    from pymc_resume.bridge.machine import contract_test_case as build

    return build(adapter_factory, **kwargs)


__all__ = ["ChildProcessAdapter", "NodeContext", "Refusal", "contract_test_case"]
