"""The adapter protocol: what the bridge asks of an adapter and what an adapter hands back.

`protocol` has the operations, their outcomes and what an adapter observes; `nodes` the
workflow's node code the bridge hands an adapter to run; `sink` the effect sink that node code
writes to, outside any framework. An adapter imports the protocol's names from here
(`from pymc_resume.bridge.adapter import OK, Outcome, ...`), as it always has.

May import: `pymc_resume.model` only (nothing else of the bridge: everything builds on this).
"""

from pymc_resume.bridge.adapter.protocol import (
    CAPABILITIES,
    CLIENT,
    CONTRACT_OPERATIONS,
    CRASH_POINTS,
    CRASHED,
    DEFAULT_VARIANT,
    FRAMEWORK,
    INTENTS,
    NOT_EXPRESSIBLE,
    OK,
    OPERATIONS,
    ORDERED_RELEASE,
    RACE_WINDOWS,
    REFUSED,
    REFUSERS,
    STEP_CAPABILITIES,
    VARIANT_OPERATIONS,
    WARM_CLIENT_IDS,
    WARM_CLIENTS,
    Adapter,
    CrashPoint,
    FuzzSetup,
    Observation,
    Outcome,
    ThreadView,
    Variant,
    declared_variants,
    expressible_workflow,
    framework_calls,
    unsupported_operations,
    variants_of,
)

__all__ = [
    "CAPABILITIES",
    "CLIENT",
    "DEFAULT_VARIANT",
    "FRAMEWORK",
    "INTENTS",
    "NOT_EXPRESSIBLE",
    "REFUSERS",
    "VARIANT_OPERATIONS",
    "Variant",
    "declared_variants",
    "variants_of",
    "CONTRACT_OPERATIONS",
    "CRASHED",
    "CRASH_POINTS",
    "OK",
    "OPERATIONS",
    "ORDERED_RELEASE",
    "RACE_WINDOWS",
    "REFUSED",
    "STEP_CAPABILITIES",
    "WARM_CLIENTS",
    "WARM_CLIENT_IDS",
    "Adapter",
    "CrashPoint",
    "FuzzSetup",
    "Observation",
    "Outcome",
    "ThreadView",
    "expressible_workflow",
    "framework_calls",
    "unsupported_operations",
]
