"""The adapter protocol: the contract's operations on a live framework, and what it observes.

An adapter drives one framework through the operations of the contract. The bridge calls
`open` once per example with a fresh working directory and the effect sink, then any sequence
of operations, then `observe` after each, then `close`. Threads are numbered in creation
order: the root is 0, each fork that succeeds gets the next number.

Operations never raise for an error the framework returns to its client (a refused resume, a
refused update): they return `Outcome("refused", reason)`. An operation given a `CrashPoint`
runs in a child process that is SIGKILLed when execution reaches that point (if it never does,
the operation completes normally); it returns `Outcome("crashed")` when the kill happened.
An exception raised by an adapter is a bug in the adapter (or the framework) and stops the run.

Capabilities say what an adapter can observe; a clause that needs something the adapter cannot
observe is reported `skipped` with the reason, never `holds`:

- `recorded-inputs`: `ThreadView.inputs`, the recorded resume values and outstanding claims;
- `leases`: `ThreadView.run` tells a live holder from a crashed one;
- `executions`: node code receives the operation id and role (run, delivery, recovery);
- `late-inputs`: `ThreadView.late_inputs`, resume values recorded after consumption.

Two optional capabilities widen what the bridge draws, for adapters that can serve it (an
adapter without them never gets such steps, so nothing changes for it):

- `warm-clients`: `start`, `resume`, `recover` and `fork` accept a keyword `client`, a warm
  client id: the operation is served by that long-lived client process, which
  keeps whatever the framework keeps in memory between operations (it ran a thread, parked,
  then forks or resumes it), next to the fresh process of every other operation (ids:
  `WARM_CLIENT_IDS`). A warm client killed by a crash point is gone; the next operation for
  its id starts a new one.
- `ordered-release`: `resume_together` accepts a keyword `order`, a permutation of the
  deliveries: the barrier releases the held processes one at a time in that order, each
  running until it finishes, so the seed (not timing) decides which delivery wins.

Operations a framework cannot express at all (it has no interrupt API, no fork) are declared in
an optional `unsupported` mapping, operation -> why. The bridge never asks for them; without
`resume` the adapter gets the workflow without its consuming nodes (`expressible_workflow`).
The clauses that need such an operation are `not-applicable` with that reason, never `holds`.

Every operation an adapter performs goes through the framework's own public, documented API,
and where the framework documents several calls for one operation, each is a **variant**. The
adapter declares them in an optional `variants` tuple of `Variant`s (operation, name, call,
docs); a verdict holds only if it holds under every variant, so the bridge drives each of them
at every position (`bridge/fuzzing/scenarios.py`). When an operation has two or more variants,
the bridge passes the chosen one's name as a keyword, `variant=name`, and a step records it.
An adapter without `variants` may still name one call per operation in `framework_calls`,
contract operation (`CONTRACT_OPERATIONS`) -> the call, each read as one variant named
`default`. `profile --operations` prints the variants and the profile JSON carries them
(docs/profile.md). An operation the framework has no public call for is declared `unsupported`,
never emulated by writing the framework's storage; reading storage to observe is allowed,
read-only.

A refusal says who refused (`Outcome.by`): `FRAMEWORK` (the framework raised it, or a
component that a named configuration adds, such as the consume-once gate), `CLIENT` (the
adapter's own client code, before any call reached the framework) or `NOT_EXPRESSIBLE` (no
documented call of the variant expresses what was asked, such as a fork from a checkpoint the
framework cannot fork from). Only what reached the framework is evidence for a verdict: a
clause exercised only by other refusals is `skipped`, never `holds`. A refusal that does not
say is counted as the client's. An operation our client completed without calling the framework
at all (a recovery of a thread that had already ended: nothing to do) is an `OK` outcome with
`by=CLIENT`, a no-op: no evidence either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import attrs

from pymc_resume.model.state import Checkpoint
from pymc_resume.model.workflow import NodeKind, Workflow

# Where a process can be killed, around the execution of one stage.
CRASH_POINTS = ("before-execute", "after-execute", "after-commit")
# Where k concurrent deliveries are held until all of them got there (a barrier).
RACE_WINDOWS = ("after-load", "after-execute")

CAPABILITIES = frozenset({"recorded-inputs", "leases", "executions", "late-inputs", "stuck-runs"})
WARM_CLIENTS = "warm-clients"
ORDERED_RELEASE = "ordered-release"
# Capabilities that add steps (see the module docstring), next to the observing ones above.
STEP_CAPABILITIES = frozenset({WARM_CLIENTS, ORDERED_RELEASE})
WARM_CLIENT_IDS = ("w0",)  # one warm client next to the fresh processes: enough to reach its faults

# Client operations an adapter may declare `unsupported` (start and recover are always there).
OPERATIONS = ("resume", "resume-together", "fork", "update")

# Every operation of the contract, as an adapter's `framework_calls` names them: `crash` is how a
# process is killed (a SIGKILL at a crash point), the others are the client operations above.
CONTRACT_OPERATIONS = ("start", "resume", "resume-together", "crash", "recover", "fork", "update")

OK = "ok"
REFUSED = "refused"
CRASHED = "crashed"

# Who refused an operation (`Outcome.by`; see the module docstring).
FRAMEWORK = "framework"
CLIENT = "client"
NOT_EXPRESSIBLE = "not-expressible"
REFUSERS = (FRAMEWORK, CLIENT, NOT_EXPRESSIBLE)

# The operations a variant may name (a crash is a SIGKILL, the same for every framework).
VARIANT_OPERATIONS = tuple(op for op in CONTRACT_OPERATIONS if op != "crash")
INTENTS = ("replay", "edit")
# The name of the one variant an adapter declaring only `framework_calls` has per operation.
DEFAULT_VARIANT = "default"


@attrs.frozen
class CrashPoint:
    stage: int
    when: str  # one of CRASH_POINTS

    def as_json(self) -> dict:
        return {"stage": self.stage, "when": self.when}


@attrs.frozen
class Outcome:
    status: str  # OK, REFUSED or CRASHED
    detail: str = ""
    thread: int | None = None  # the new thread of a fork
    # Who refused (REFUSERS; a refusal that does not say is the client's); on an OK outcome,
    # CLIENT says our client did it alone, calling nothing of the framework (a no-op).
    by: str | None = None

    def reached_framework(self) -> bool:
        """Whether the framework performed or refused the operation (not our client alone)."""
        if self.status == REFUSED:
            return self.by == FRAMEWORK
        return self.by != CLIENT

    def as_json(self) -> dict:
        data = {"status": self.status, "detail": self.detail}
        if self.thread is not None:
            data["thread"] = self.thread
        if self.status == REFUSED:
            data["by"] = self.by if self.by in REFUSERS else CLIENT
        elif self.by == CLIENT:
            data["by"] = CLIENT
        return data


@attrs.frozen
class Variant:
    """One public, documented way the framework performs a contract operation."""

    operation: str  # one of VARIANT_OPERATIONS
    name: str  # unique within its operation, short kebab-case: "update-state"
    call: str  # the framework call as its user writes it
    docs: str  # where the framework documents it: a URL, or a doc page and section
    intents: tuple[str, ...] = ()  # a fork's: the intents this call performs; () is both

    def performs(self, intent: str | None) -> bool:
        """Whether this variant can perform a fork of `intent` (any other operation: always)."""
        return intent is None or not self.intents or intent in self.intents

    def as_json(self) -> dict:
        data = {"name": self.name, "call": self.call, "docs": self.docs}
        if self.intents:
            data["intents"] = list(self.intents)
        return data


@attrs.frozen
class ThreadView:
    """One thread as the adapter observes it in the framework's durable store."""

    chain: tuple[Checkpoint, ...]  # (pc, app state, committed stage or INITIAL/UPDATE)
    # "new", "free" (no lease), "live" (a running process holds it), "dead" (held by a crashed
    # process), "failed" (a node output was refused: the thread ends there, quiescent)
    run: str
    inputs: dict[int, int] | None = None  # stage -> recorded value or claim (recorded-inputs)
    late_inputs: tuple[tuple[int, int], ...] | None = None  # (stage, value) (late-inputs)


@attrs.frozen
class Observation:
    threads: tuple[ThreadView, ...]


@attrs.frozen
class FuzzSetup:
    """What an adapter gets for one example."""

    workflow: Workflow  # node kinds in order (the model's shape)
    values: int  # valid resume values are 1..values; 1 approves a gated node
    workdir: Path  # a fresh directory for the framework's store
    # The node code: run_node(stage, state, value, context) -> state, with a
    # `bridge.adapter.nodes.NodeContext` (a `bridge.adapter.nodes.NodeCode`).
    run_node: object


def unsupported_operations(adapter) -> dict[str, str]:
    """Operation -> why the adapter's framework cannot express it (the optional attribute)."""
    declared = dict(getattr(adapter, "unsupported", None) or {})
    unknown = sorted(set(declared) - set(OPERATIONS))
    if unknown:
        raise ValueError(
            f"adapter {adapter.name!r} declares unknown operations {unknown} (known: {', '.join(OPERATIONS)})"
        )
    if "resume" in declared:  # no resume at all: no concurrent resume either
        declared.setdefault("resume-together", declared["resume"])
    return declared


def framework_calls(adapter) -> dict[str, str]:
    """Contract operation -> the framework's public call(s) the adapter performs it with, in
    contract order (several variants' calls joined by " | "; a crash as the optional
    `framework_calls` names it); operations declared `unsupported` are left out."""
    calls = {
        op: " | ".join(variant.call for variant in variants)
        for op, variants in declared_variants(adapter).items()
    }
    crash = (getattr(adapter, "framework_calls", None) or {}).get("crash")
    if crash is not None:
        calls["crash"] = str(crash)
    return {op: calls[op] for op in CONTRACT_OPERATIONS if op in calls}


def declared_variants(adapter) -> dict[str, tuple[Variant, ...]]:
    """Operation -> its variants, in contract order: the optional `variants` attribute, else one
    `default` variant per call of the optional `framework_calls` mapping. Operations declared
    `unsupported` are left out. Raises ValueError, naming what is wrong, for a malformed
    declaration."""
    name = getattr(adapter, "name", "?")
    unsupported = unsupported_operations(adapter)
    declared = getattr(adapter, "variants", None)
    if declared is None:
        calls = dict(getattr(adapter, "framework_calls", None) or {})
        unknown = sorted(set(calls) - set(CONTRACT_OPERATIONS))
        if unknown:
            raise ValueError(
                f"adapter {name!r} names framework calls for unknown operations {unknown} "
                f"(known: {', '.join(CONTRACT_OPERATIONS)})"
            )
        declared = [
            Variant(op, DEFAULT_VARIANT, str(call), "")
            for op, call in calls.items()
            if op != "crash" and op not in unsupported
        ]
    by_operation: dict[str, list[Variant]] = {}
    for variant in declared:
        _check_variant(name, variant, unsupported)
        same = by_operation.setdefault(variant.operation, [])
        if any(other.name == variant.name for other in same):
            raise ValueError(
                f"adapter {name!r} declares the {variant.operation} variant {variant.name!r} twice"
            )
        same.append(variant)
    return {op: tuple(by_operation[op]) for op in VARIANT_OPERATIONS if op in by_operation}


def _check_variant(adapter: str, variant: object, unsupported: dict[str, str]) -> None:
    if not isinstance(variant, Variant):
        raise ValueError(f"adapter {adapter!r}: a variant must be a Variant, got {type(variant).__name__}")
    if variant.operation not in VARIANT_OPERATIONS:
        raise ValueError(
            f"adapter {adapter!r}: variant {variant.name!r} names the unknown operation "
            f"{variant.operation!r} (known: {', '.join(VARIANT_OPERATIONS)})"
        )
    if variant.operation in unsupported:
        raise ValueError(
            f"adapter {adapter!r}: variant {variant.name!r} of {variant.operation}, "
            "which it declares unsupported"
        )
    if not (isinstance(variant.name, str) and variant.name and variant.name.replace("-", "").isalnum()):
        raise ValueError(f"adapter {adapter!r}: variant name {variant.name!r} is not short kebab-case")
    unknown = [intent for intent in variant.intents if intent not in INTENTS]
    if unknown or (variant.intents and variant.operation != "fork"):
        raise ValueError(
            f"adapter {adapter!r}: variant {variant.name!r} declares intents {list(variant.intents)} "
            "(only a fork's, among replay and edit)"
        )


def variants_of(
    variants: dict[str, tuple[Variant, ...]], operation: str, intent: str | None = None
) -> tuple[Variant, ...]:
    """The declared variants that can perform `operation` (a fork of `intent`)."""
    return tuple(v for v in variants.get(operation, ()) if v.performs(intent))


def expressible_workflow(workflow: Workflow, unsupported: dict[str, str]) -> Workflow:
    """The workflow an adapter can run: without interrupts when it cannot resume (interrupt
    and gated nodes dropped, an effect-then-interrupt node keeps its effect)."""
    if "resume" not in unsupported:
        return workflow
    kept = []
    for kind in workflow.nodes:
        if kind is NodeKind.EFFECT_THEN_INTERRUPT:
            kept.append(NodeKind.EFFECT)
        elif kind not in (NodeKind.INTERRUPT, NodeKind.GATED):
            kept.append(kind)
    return Workflow(tuple(kept))


@runtime_checkable
class Adapter(Protocol):
    name: str
    version: str
    capabilities: frozenset[str]

    def options(self) -> dict: ...

    def open(self, setup: FuzzSetup) -> None: ...

    def close(self) -> None: ...

    def start(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome: ...

    def resume(self, thread: int, value: int, crash: CrashPoint | None, op: str) -> Outcome: ...

    def resume_together(
        self, thread: int, values: list[int], window: str | None, op: str
    ) -> list[Outcome]: ...

    def recover(self, thread: int, crash: CrashPoint | None, op: str) -> Outcome: ...

    def fork(self, thread: int, checkpoint: int, intent: str, value: int | None) -> Outcome: ...

    def update(self, thread: int, note: int) -> Outcome: ...

    def observe(self) -> Observation: ...
