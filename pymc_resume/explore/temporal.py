"""Temporal properties and fairness, as a model declares them (TLC's common cases).

A model lists its temporal properties in `temporal` and its fairness conditions in `fairness`:

    temporal = [LeadsTo("Detected", terminated, detected), InfinitelyOften("Idle", idle)]
    fairness = [WF("System"), SF(lambda action: action.startswith("Send("), name="Send")]
    stuttering = True  # TLA+'s behaviours: any state may repeat forever (what TLC checks)

The three kinds are TLA+'s `P ~> Q` (`LeadsTo`), `[]<>P` (`InfinitelyOften`) and `<>[]P`
(`EventuallyAlways`), each over state predicates. A fairness condition names an action: an
action label that `successors` yields, or a predicate over labels (the disjunction of every
label it accepts, e.g. all of `PassToken(1)`, `PassToken(2)`: TLA+'s `WF_vars(\\E i: A(i))`;
for `\\A i: WF_vars(A(i))` list one condition per label). A state-dependent action (TLA+'s
`WF_vars(c /\\ A)`, c a state predicate) is written with the labels: `successors` yields A's
steps under another label where c holds (`"Grant(p) urgent"`), and the condition names those.
A condition that no step takes is an error (`liveness.unknown_fairness_labels`). `liveness`
decides them on the explored graph; its docstring states the semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import attrs

State = Hashable


@attrs.frozen
class LeadsTo:
    """`P ~> Q`: whenever `p` holds, `q` holds then or later, in every fair behaviour."""

    name: str
    p: Callable[[State], bool]
    q: Callable[[State], bool]
    formula = "P ~> Q"


@attrs.frozen
class InfinitelyOften:
    """`[]<>P`: `p` holds infinitely often in every fair behaviour."""

    name: str
    p: Callable[[State], bool]
    formula = "[]<>P"


@attrs.frozen
class EventuallyAlways:
    """`<>[]P`: from some point on, `p` holds forever in every fair behaviour."""

    name: str
    p: Callable[[State], bool]
    formula = "<>[]P"


TemporalProperty = LeadsTo | InfinitelyOften | EventuallyAlways
TEMPORAL_KINDS = (LeadsTo, InfinitelyOften, EventuallyAlways)


def _label_matcher(action: str | Callable[[str], bool]) -> Callable[[str], bool]:
    if isinstance(action, str):
        return action.__eq__
    return action


@attrs.frozen
class _Fairness:
    action: str | Callable[[str], bool]
    name: str | None = attrs.field(default=None, kw_only=True)

    def matches(self, label: str) -> bool:
        """Whether `label` is a step of this action."""
        return bool(_label_matcher(self.action)(label))

    def shown(self) -> str:
        """`WF(name)`, for messages and reports."""
        what = self.name or (self.action if isinstance(self.action, str) else "?")
        return f"{type(self).__name__}({what})"


@attrs.frozen
class WF(_Fairness):
    """Weak fairness of an action (TLA+'s `WF_vars(A)`): a behaviour in which the action is
    from some point on always enabled must take it infinitely often."""


@attrs.frozen
class SF(_Fairness):
    """Strong fairness of an action (TLA+'s `SF_vars(A)`): a behaviour in which the action is
    infinitely often enabled must take it infinitely often."""


Fairness = WF | SF
