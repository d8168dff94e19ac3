"""The Hypothesis state machine that drives an adapter with the model's client actions.

Its rules are the model's client-visible actions: start a thread, resume it (one process, or k
processes held at a race window), recover a crashed thread, fork from any checkpoint (the head
included; forks of forks up to `max_forks` forks in all) with an intent, update the state.
For an adapter that declares two or more variants of an operation (`adapter.Variant`), every
step draws the variant it is performed with. For an adapter that declares the step capabilities
(`adapter.STEP_CAPABILITIES`), a step also draws which client serves it (a fresh process, or a
long-lived warm client) and the order in which held concurrent deliveries are released; the
draws are part of the step, so a seed replays the same decisions. The model's process-internal
atomic steps (claim, execute with its effect,
commit) become what a rule chooses: the crash point of the process that runs it, or the window
where concurrent deliveries are held at a barrier. Each rule applies one step to a `Session`,
which judges every clause on what the adapter then shows; `teardown` runs the liveness drain.

`machine_class(make_session)` builds the machine; `contract_test_case(adapter_factory, ...)`
returns a `unittest.TestCase` that framework authors put in their own suite.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from pymc_resume.bridge.adapter import (
    CRASH_POINTS,
    ORDERED_RELEASE,
    RACE_WINDOWS,
    WARM_CLIENT_IDS,
    WARM_CLIENTS,
    CrashPoint,
)
from pymc_resume.bridge.judging.session import Session
from pymc_resume.model.bounds import Bounds, load_bounds
from pymc_resume.model.workflow import INVALID

# Forks per example: two from one checkpoint can be compared, and a third reaches a fork of a
# fork of a fork. `machine_class(max_forks=...)` sets another depth.
MAX_FORKS = 3


# Draws do not depend on the state the adapter is in (a thread is chosen by an index taken
# modulo the candidates, a crash stage is absolute), so that when the shrinker deletes a step
# the draws of the steps after it still line up, and shrink toward 0 (the first candidate).
MAX_INDEX = 7


def clients():
    """A fresh process (what shrinking prefers) two times in three, else one of the warm
    clients: a warm client is never killed at a crash point, so drawing it half the time thinned
    out the crashes that the recovery faults need (their runs took up to twice as long)."""
    return st.sampled_from((None, None, *WARM_CLIENT_IDS))


def crash_points(end: int):
    """No crash (what shrinking prefers), or a stage and a point around it (a stage the
    operation never reaches is no crash)."""
    points = st.builds(
        lambda stage, when: CrashPoint(stage, when).as_json(),
        st.integers(0, end - 1),
        st.sampled_from(CRASH_POINTS),
    )
    return st.none() | points


def pick(data, candidates: list, label: str):
    """One of `candidates`, by an index drawn independently of how many there are."""
    return candidates[data.draw(st.integers(0, MAX_INDEX), label=label) % len(candidates)]


class ResumeContract(RuleBasedStateMachine):
    """The machine: each example runs in a fresh `make_session()`, with up to `processes`
    deliveries held together and `max_forks` forks. Made for a run by `machine_class`."""

    make_session: Callable[[], Session]
    processes = 2
    max_forks = MAX_FORKS

    def __init__(self) -> None:
        super().__init__()
        self.session = self.make_session()
        self.forks = 0
        capabilities = self.session.capabilities
        self.warm = WARM_CLIENTS in capabilities
        self.ordered = ORDERED_RELEASE in capabilities
        # Variants are drawn only for an adapter that has a choice somewhere, so that every
        # other adapter's examples are drawn as they always were.
        self.varied = any(len(variants) > 1 for variants in self.session.variants.values())

    # -- helpers ---------------------------------------------------------------------

    def _thread(self, data, candidates: list[int]) -> int:
        return pick(data, candidates, "thread")

    def _values(self, invalid: bool = True) -> list[int]:
        valid = list(range(1, self.session.values + 1))
        return valid + [INVALID] if invalid else valid

    def _crash(self, data) -> dict | None:
        return data.draw(crash_points(self.session.workflow.end), label="crash")

    def _forkable(self) -> list[int]:
        """Threads with checkpoints to fork from: started, or failed (an edit fork of a
        failed thread may take another input)."""
        if self.forks >= self.max_forks:
            return []
        return self.session.threads_where("free", "dead", "live", "failed")

    def _client(self, data) -> dict:
        """The step's client, for an adapter with warm clients: {} is a fresh process."""
        if not self.warm:
            return {}
        client = data.draw(clients(), label="client")
        return {} if client is None else {"client": client}

    def _variant(self, data, operation: str, intent: str | None = None) -> dict:
        """The step's variant: drawn for every step of an adapter with variants (so that the
        draws line up), named only where the operation has two or more."""
        if not self.varied:
            return {}
        names = self.session.variant_names(operation, intent)
        chosen = pick(data, names or [None], "variant")
        return {"variant": chosen} if len(names) > 1 else {}

    def _served(self, data) -> dict:
        """Who serves a step that runs nodes, and where it crashes: a drawn crash point, in a
        fresh process; else the drawn client (a fresh process, or the warm client, which is
        never killed: its memory is what it is for, and a killed warm client is only a
        fresh one). The crash is drawn first and keeps its share whatever the capabilities
        (warm clients once took a third of the crashes away, and two recovery faults with
        them); both are drawn either way, so that the draws line up."""
        crash, client = self._crash(data), self._client(data)
        return {"crash": crash} if crash is not None else {"crash": None, **client}

    # -- rules: the model's client actions ----------------------------------------

    @precondition(lambda self: bool(self.session.threads_where("new")))
    @rule(data=st.data())
    def start(self, data):
        t = self._thread(data, self.session.threads_where("new"))
        self.session.apply(
            {"action": "start", "thread": t, **self._served(data), **self._variant(data, "start")}
        )

    def _resumable(self) -> list[int]:
        """Started threads, and failed ones: a resume to a failed thread must be refused
        (and an example whose every thread failed still has a rule to run)."""
        return self.session.threads_where("free", "dead", "live", "failed")

    @precondition(lambda self: self.session.can("resume") and bool(self._resumable()))
    @rule(data=st.data())
    def resume(self, data):
        t = self._thread(data, self._resumable())
        value = data.draw(st.sampled_from(self._values()), label="value")
        step = {"action": "resume", "thread": t, "value": value, **self._served(data)}
        self.session.apply({**step, **self._variant(data, "resume")})

    @precondition(
        lambda self: (
            self.processes > 1 and self.session.can("resume-together") and bool(self.session.started())
        )
    )
    @rule(data=st.data())
    def resume_together(self, data):
        t = self._thread(data, self.session.started())
        values = data.draw(
            st.lists(st.sampled_from(self._values(invalid=False)), min_size=2, max_size=self.processes),
            label="values",
        )
        # Always held at a window: a free race would make the outcome (and so shrinking) flaky.
        window = data.draw(st.sampled_from(RACE_WINDOWS), label="window")
        step = {"action": "resume-together", "thread": t, "values": values, "window": window}
        if self.ordered:  # released one at a time, in an order that is part of the step
            step["order"] = data.draw(st.permutations(range(len(values))), label="order")
        self.session.apply({**step, **self._variant(data, "resume-together")})

    @precondition(lambda self: bool(self.session.threads_where("dead")))
    @rule(data=st.data())
    def recover(self, data):
        t = self._thread(data, self.session.threads_where("dead"))
        self.session.apply(
            {"action": "recover", "thread": t, **self._served(data), **self._variant(data, "recover")}
        )

    @precondition(lambda self: self.session.can("fork") and bool(self._forkable()))
    @rule(data=st.data())
    def fork(self, data):
        t = self._thread(data, self._forkable())
        intent = data.draw(st.sampled_from(["replay", "edit"]), label="intent")
        # Half the replay forks start from the head (where a warm client still holds the
        # thread's state); drawn either way, so that the draws line up.
        from_head = data.draw(st.booleans(), label="from the head")
        choices = self.session.fork_choices(t)  # the head first
        if intent == "edit":  # among the checkpoints an edit fork can start from, if any
            choices = [choice for choice in choices if choice[1]] or choices
        elif from_head:
            choices = choices[:1]
        checkpoint, edits = pick(data, choices, "checkpoint")
        value = pick(data, edits or [None], "new input")  # drawn either way: draws line up
        if intent == "replay" or value is None:
            intent, value = "replay", None
        self.forks += 1
        self.session.apply(
            {
                "action": "fork",
                "thread": t,
                "checkpoint": checkpoint,
                "intent": intent,
                "value": value,
                **self._client(data),
                **self._variant(data, "fork", intent),
            }
        )

    @precondition(
        lambda self: self.session.can("update") and bool(self.session.threads_where("free", "dead"))
    )
    @rule(data=st.data())
    def update(self, data):
        t = self._thread(data, self.session.threads_where("free", "dead"))
        value = data.draw(st.sampled_from(self._values()), label="value")
        self.session.apply({"action": "update", "thread": t, "value": value, **self._variant(data, "update")})

    def teardown(self) -> None:
        if self.session.failed:  # a rule already failed: report that failure, not the drain's
            self.session.close()
        elif not self.session.drained:
            self.session.finish()


def machine_class(make_session: Callable[[], Session], processes: int = 2, max_forks: int = MAX_FORKS):
    """A RuleBasedStateMachine whose examples each run in a fresh `make_session()` (a subclass
    of `ResumeContract` per run, so that a seed set on one never reaches another)."""
    settings_of_run = {
        "make_session": staticmethod(make_session),
        "processes": processes,
        "max_forks": max_forks,
    }
    return type("ResumeContract", (ResumeContract,), settings_of_run)


def fuzz_settings(examples: int, steps: int, database=None, shrink: bool = True) -> settings:
    """Settings for driving a live adapter: no deadline (real processes and fsyncs), a single
    failure shrunk (the first clause found), no health check for slow examples (each step
    forks processes and writes SQLite files, which is slow by design). With a database,
    failures saved by an earlier run are replayed first."""
    phases = [Phase.explicit]
    if database is not None:
        phases.append(Phase.reuse)
    phases.append(Phase.generate)
    if shrink:
        phases.append(Phase.shrink)
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=database,
        derandomize=False,
        report_multiple_bugs=False,
        print_blob=False,
        phases=phases,
        # large_base_example: a long --steps makes the smallest example long, which is what was asked.
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


def contract_test_case(
    adapter_factory: Callable[[], object],
    *,
    bounds: str | Bounds = "default",
    examples: int = 50,
    steps: int = 12,
    seed: int | None = None,
    step_timeout: float | None = 30.0,
    max_forks: int = MAX_FORKS,
):
    """A `unittest.TestCase` class that fuzzes `adapter_factory()`'s adapter against the
    contract; put it in a test module as `TestMyFramework = contract_test_case(MyAdapter)`.

    A failure is an AssertionError naming the clause, with Hypothesis's minimal steps.
    """
    chosen = load_bounds(bounds) if isinstance(bounds, str) else bounds

    def make_session() -> Session:
        return Session(adapter_factory(), chosen.workflow, chosen.values, step_timeout=step_timeout)

    machine = machine_class(make_session, processes=chosen.processes, max_forks=max_forks)
    if seed is not None:
        hypothesis_seed(seed)(machine)
    case = machine.TestCase
    case.settings = fuzz_settings(examples, steps)
    return case
