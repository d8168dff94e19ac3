"""Random walks: the simulation mode, for state spaces too large to enumerate (TLC's -simulate).

A walk starts at a random initial state and takes a random successor at each step, until it
has taken `depth` steps, reached a state without successors, or stepped outside the model's
constraints (TLC's CONSTRAINT: such a state is checked, never expanded). Every state a walk
visits is checked against every invariant; a state without successors is a deadlock where the
model asks. A violation comes with the walk that reached it, cut at the violating state: a
trace, but not a shortest one (of the walks that found the property violated, the shortest
trace is kept). A simulation refutes; it never proves: a property it found no violation of is
unproved, and reachability properties (graph properties) are not checked at all.

Deterministic for a seed: walk `i` of seed `s` draws from its own generator, seeded by the
string `"s/i"` (SHA-512 inside `random`, the same in every process), so a walk is the same
whatever ran before it and however many walks run; a `max_seconds` run's first k walks are a
`walks=k` run's. This holds as long as the model yields its successors in the same order in
every process (a model that iterates a set of strings does not, because Python salts string
hashes per process: PYTHONHASHSEED).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable

import attrs

from pymc_resume.errors import BadInput
from pymc_resume.explore.protocol import Model
from pymc_resume.explore.result import DEADLOCK, Step, Violation
from pymc_resume.explore.validate import ValidModel, validated

DEFAULT_DEPTH = 100  # steps a walk takes at most (TLC's -depth default)
DEFAULT_WALKS = 1000  # walks when neither a walk count nor a time budget is given
PROGRESS_EVERY = 64  # walks between two progress callbacks


@attrs.frozen
class WalkProgress:
    """The simulation's counters at one moment (for progress lines)."""

    walks: int
    states_visited: int
    seconds: float


@attrs.frozen
class SimulationResult:
    """What a simulation found: its counts, and each violated invariant with a walk's trace.

    `complete` is always False: a simulation proves nothing, so a property absent from
    `violations` is unproved, not holding (see `unproved`).
    """

    seed: int
    max_depth: int
    walks: int
    states_visited: int  # every visit counted, repeats included (each one was checked)
    states_generated: int  # successors computed
    longest_walk: int  # steps of the longest walk taken
    seconds: float
    violations: dict[str, Violation]
    stopped_because: str
    complete = False
    mode = "simulate"
    worker_peak_rss: tuple[int, ...] = ()  # one process: no workers

    @property
    def walks_per_second(self) -> float:
        return self.walks / self.seconds if self.seconds > 0 else 0.0

    def holds(self, name: str) -> bool:
        return False

    def unproved(self, graph_property: bool = False) -> str:
        """Why a property without a violation has no verdict."""
        if graph_property:
            return "a graph property: random walks cannot decide it (explore exhaustively)"
        return (
            f"no violation in {self.walks:,} walks of up to {self.max_depth} steps "
            "(a simulation proves nothing)"
        )

    def counts_json(self) -> dict:
        """The counts, in the shape of an exhaustive run's (`ExplorationResult.counts_json`),
        with the mode and the simulation's own figures."""
        return {
            "mode": self.mode,
            "complete": False,
            "stopped_because": self.stopped_because,
            "distinct_states": None,  # not counted: a simulation keeps no visited set
            "states_generated": self.states_generated,
            "depth": self.longest_walk,
            "seconds": round(self.seconds, 3),
            "store": None,  # walks store no state: nothing could collide
            "collision_probability": None,
            "simulation": {
                "seed": self.seed,
                "max_depth": self.max_depth,
                "walks": self.walks,
                "states_visited": self.states_visited,
                "walks_per_second": round(self.walks_per_second, 1),
                "shortest_traces": False,
            },
        }


def simulate(
    model: Model,
    *,
    seed: int = 0,
    depth: int = DEFAULT_DEPTH,
    walks: int | None = None,
    max_seconds: float | None = None,
    stop_at_first: bool = False,
    check_deadlock: bool | None = None,
    progress: Callable[..., None] | None = None,
) -> SimulationResult:
    """Take seeded random walks through `model`, checking every invariant on every visited
    state. Stops after `walks` walks or `max_seconds` seconds, whichever comes first
    (`DEFAULT_WALKS` walks when neither is given), at the first violation with
    `stop_at_first`, or once every invariant (and deadlock, where checked) is violated."""
    _refuse_impossible(seed, depth, walks, max_seconds)
    if walks is None and max_seconds is None:
        walks = DEFAULT_WALKS
    valid = validated(model, check_deadlock)
    walker = _Walker(valid, depth)
    started = time.monotonic()
    wanted = {invariant.name for invariant in valid.invariants}
    if valid.deadlock_is_error:
        wanted.add(DEADLOCK)
    taken = 0
    while True:
        stopped_because = _stop_reason(
            taken, walks, max_seconds, started, walker.found, wanted, stop_at_first
        )
        if stopped_because:
            break
        walker.walk(random.Random(f"{seed}/{taken}"))
        taken += 1
        if progress and taken % PROGRESS_EVERY == 0:
            progress(WalkProgress(taken, walker.visited, time.monotonic() - started))
    seconds = time.monotonic() - started
    if progress:
        progress(WalkProgress(taken, walker.visited, seconds), final=True)
    violations = {
        name: Violation(name, tuple(Step(action, state) for action, state in trace))
        for name, trace in walker.found.items()
    }
    return SimulationResult(
        seed,
        depth,
        taken,
        walker.visited,
        walker.generated,
        walker.longest,
        seconds,
        violations,
        stopped_because,
    )


def _refuse_impossible(seed, depth, walks, max_seconds) -> None:
    """Options that would walk nowhere, or never stop, are refused (one line)."""
    for name, value, low in (("seed", seed, 0), ("depth", depth, 1), ("walks", walks, 1)):
        if value is None and name == "walks":
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise BadInput(f"{name}: must be a whole number of at least {low}, got {value!r}")
    if max_seconds is not None and not max_seconds > 0:
        raise BadInput(f"max_seconds: must be positive, got {max_seconds!r}")


def _stop_reason(
    taken: int,
    walks: int | None,
    max_seconds: float | None,
    started: float,
    found: dict,
    wanted: set,
    stop_at_first: bool,
) -> str | None:
    if walks is not None and taken >= walks:
        return f"{walks:,} walks taken"
    if max_seconds is not None and time.monotonic() - started > max_seconds:
        return f"time limit of {max_seconds:g}s reached"
    if stop_at_first and found:
        return "stopped at the first violation (--stop-at-first)"
    if wanted and wanted <= found.keys():
        return "every checked property is violated"
    return None


class _Walker:
    """Takes walks through one model and keeps, per violated property, its shortest trace."""

    def __init__(self, model: ValidModel, depth: int) -> None:
        self.model = model
        self.depth = depth
        self.initial = list(model.initial_states())
        self.found: dict[str, list[tuple[str | None, Hashable]]] = {}
        self.visited = 0
        self.generated = 0
        self.longest = 0

    def walk(self, draw: random.Random) -> None:
        """One walk, drawing its choices from `draw`."""
        model = self.model
        successors = model.successors
        constraint, action_constraint = model.constraint, model.action_constraint
        state = self.initial[draw.randrange(len(self.initial))]
        self.generated += 1  # an initial state counts as generated, as in an exhaustive run
        path: list[tuple[str | None, Hashable]] = [(None, state)]
        self._check(state, path)
        inside = constraint is None or constraint(state)
        while inside and len(path) <= self.depth:
            choices = list(successors(state))
            self.generated += len(choices)
            if not choices:
                if model.deadlock_is_error:
                    self._record(DEADLOCK, path)
                break
            action, following = choices[draw.randrange(len(choices))]
            inside = (constraint is None or constraint(following)) and (
                action_constraint is None or action_constraint(state, action, following)
            )
            state = following
            path.append((action, state))
            self._check(state, path)
        self.longest = max(self.longest, len(path) - 1)

    def _check(self, state: Hashable, path: list) -> None:
        self.visited += 1
        all_hold = self.model.all_hold
        if all_hold is not None and all_hold(state):
            return
        for invariant in self.model.invariants:
            if not invariant.holds(state):
                self._record(invariant.name, path)

    def _record(self, name: str, path: list) -> None:
        """Keep `path` (up to its last state) as `name`'s trace, if it is the shortest yet."""
        kept = self.found.get(name)
        if kept is None or len(path) < len(kept):
            self.found[name] = list(path)
