"""Peterson's mutual-exclusion algorithm for two processes.

Encodes the TLA+ translation of the PlusCal algorithm in tlaplus/Examples
specifications/locks_auxiliary_vars/Peterson.tla (Init, Next over processes 1..2 with labels
a0, a1, a2, a3, cs, a4; invariants TypeOK and Inv), checked there with model Peterson.cfg
(no constants). Inv includes mutual exclusion: both processes are never in {cs, a4} at once.

State: a tuple (pc, c, turn) where pc and c are tuples indexed by process - 1 (pc[0] is
process 1's label, c[0] its flag) and turn is 1 or 2.

TLC's counts for model Peterson.cfg, recorded in
specifications/locks_auxiliary_vars/manifest.json of tlaplus/Examples (commit
32a32c7b0b97562da2dd4b2e55b7f81cd6fea2b9): 42 distinct states, 77 states generated, depth 11. Check it with

    pymc-resume explore examples/peterson.py:model
"""

from __future__ import annotations

from collections.abc import Iterator

from tla import except_

from pymc_resume.explore import Invariant

PROCS = (1, 2)
LABELS = frozenset({"a0", "a1", "a2", "a3", "cs", "a4"})


def other(p: int) -> int:
    return 2 if p == 1 else 1


def pc_of(state, p):
    return state[0][p - 1]


def c_of(state, p):
    return state[1][p - 1]


def goto(pc, p, label):
    """pc' = [pc EXCEPT ![p] = label]."""
    return except_(pc, p - 1, label)


# One function per PlusCal label: each returns the next state, or None when not enabled.


def a0(state, p):
    pc, c, turn = state
    if pc[p - 1] == "a0":
        return (goto(pc, p, "a1"), c, turn)
    return None


def a1(state, p):
    pc, c, turn = state
    if pc[p - 1] == "a1":
        return (goto(pc, p, "a2"), except_(c, p - 1, True), turn)
    return None


def a2(state, p):
    pc, c, turn = state
    if pc[p - 1] == "a2":
        return (goto(pc, p, "a3"), c, other(p))
    return None


def a3(state, p):
    pc, c, turn = state
    if pc[p - 1] == "a3" and (not c[other(p) - 1] or turn == p):
        return (goto(pc, p, "cs"), c, turn)
    return None


def cs(state, p):
    pc, c, turn = state
    if pc[p - 1] == "cs":
        return (goto(pc, p, "a4"), c, turn)
    return None


def a4(state, p):
    pc, c, turn = state
    if pc[p - 1] == "a4":
        return (goto(pc, p, "a0"), except_(c, p - 1, False), turn)
    return None


ACTIONS = (("a0", a0), ("a1", a1), ("a2", a2), ("a3", a3), ("cs", cs), ("a4", a4))


def type_ok(state) -> bool:
    pc, c, turn = state
    return (
        len(pc) == 2
        and all(label in LABELS for label in pc)
        and len(c) == 2
        and all(isinstance(flag, bool) for flag in c)
        and turn in PROCS
    )


def lockcs(state, p) -> bool:
    return pc_of(state, p) in ("cs", "a4")


def inv(state) -> bool:
    turn = state[2]
    return (
        all(c_of(state, p) == (pc_of(state, p) in ("a2", "a3", "cs", "a4")) for p in PROCS)
        and all(
            not lockcs(state, p) or turn == p or pc_of(state, other(p)) in ("a0", "a1", "a2") for p in PROCS
        )
        and not (lockcs(state, 1) and lockcs(state, 2))
    )


class Peterson:
    """Peterson.tla: two processes, labels a0..a4 and cs."""

    invariants = [Invariant("TypeOK", type_ok), Invariant("Inv", inv)]
    reachability = ()
    deadlock_is_error = True  # Peterson.cfg checks deadlock (TLC's default); there is none

    def initial_states(self):
        return [(("a0", "a0"), (False, False), 1)]

    def successors(self, state) -> Iterator[tuple[str, tuple]]:
        """Next == \\E self \\in 1..2 : proc(self), proc(self) the disjunction of the labels."""
        for p in PROCS:
            for name, action in ACTIONS:
                next_state = action(state, p)
                if next_state is not None:
                    yield f"{name}({p})", next_state


def model() -> Peterson:
    """The model of the cfg above."""
    return Peterson()
