"""Kindflow: Tinyflow (tutorial_executor.py) with node kinds of its own instead of your code, as
many workflow engines have. A flow is a list of configured nodes, run in order on a dict state:

- `Sum(field, of)`: writes the sum of the fields `of`;
- `Send(field, channel)`: sends a message through the flow's transport, then writes 1;
- `Ask(field)`: waits for a client's answer (`resume`) and writes it;
- `Approve(field, channel)`: waits for an answer, writes it, and sends a message when it is 1.

A message is `{"id", "channel", "node", "state"}`; its id is the node's key, (lineage, node,
answers so far), the same whenever the node runs again on the same answers. A schema bounds
every field and every answer (`Schema`); anything outside is refused. Callbacks say when a node
starts, when it has run, and when its checkpoint is stored (`on_commit(run, node)`): the only
places a client of Kindflow can act around a node. Runs, leases, claims, commits and forks are
Tinyflow's.
"""

import sys
from collections import namedtuple
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # Tinyflow lives beside this file
from tutorial_executor import Flow, Refused, Step, alive  # noqa: F401 (Refused, alive: Kindflow's too)

Sum = namedtuple("Sum", "field of")
Send = namedtuple("Send", "field channel")
Ask = namedtuple("Ask", "field")
Approve = namedtuple("Approve", "field channel")
WAITING = (Ask, Approve)


class Schema(namedtuple("Schema", "fields answers")):
    """`fields`: field -> (lowest, highest) allowed; `answers`: (lowest, highest) of an answer."""

    def valid(self, state: dict) -> bool:
        return all(low <= state[field] <= high for field, (low, high) in self.fields.items())

    def valid_answer(self, value: int) -> bool:
        return self.answers[0] <= value <= self.answers[1]


def nothing(*args) -> None:
    pass


class Kindflow(Flow):
    def __init__(
        self,
        path,
        nodes: list,
        schema: Schema,
        transport,
        on_start=nothing,
        on_finish=nothing,
        on_commit=nothing,
    ):  # on_start(node, key), on_finish(node)
        self.nodes, self.transport, self.on_start, self.on_finish = nodes, transport, on_start, on_finish
        steps = [
            Step(type(node).__name__, self._runner(i), waits=isinstance(node, WAITING))
            for i, node in enumerate(nodes)
        ]
        super().__init__(
            path, steps, valid=schema.valid, valid_value=schema.valid_answer, on_commit=on_commit
        )

    def _runner(self, index: int):
        def run(state: dict, answer, key: str) -> dict:
            self.on_start(index, key)
            state = self._run_node(index, self.nodes[index], dict(state), answer, key)
            self.on_finish(index)
            return state

        return run

    def _run_node(self, index: int, node, state: dict, answer, key: str) -> dict:
        if isinstance(node, Sum):
            state[node.field] = sum(state[field] for field in node.of)
        elif isinstance(node, Send):
            self._send(node.channel, key, index, state)
            state[node.field] = 1
        else:  # Ask or Approve: the answer claimed for this node
            state[node.field] = answer
            if isinstance(node, Approve) and answer == 1:
                self._send(node.channel, key, index, state)
        return state

    def _send(self, channel: str, key: str, index: int, state: dict) -> None:
        self.transport({"id": key, "channel": channel, "node": index, "state": dict(state)})
