"""TwoPhase.tla for minicheck 0.4.0, the baseline the explorer benchmark compares against.

The same specification as bench/two_phase_packed.py and examples/two_phase.py
(tlaplus/Examples specifications/transaction_commit/TwoPhase.tla, invariants TPTypeOK and
TCConsistent), written the way minicheck's README writes a model: a `minicheck.Protocol` whose
state is a flat tuple of named fields, a `transitions` function returning a list of
`(label, next_state)` pairs, and invariants as predicates over `{field: value}` (minicheck builds
that dict once per new state). The sets of the spec are flattened into one field per element,
as minicheck's fields are scalars:

    rmState_r1 .. rmState_rN       "working" | "prepared" | "committed" | "aborted"
    tmState                        "init" | "committed" | "aborted"
    tmPrepared_r1 .. tmPrepared_rN 0 | 1   (rm \\in tmPrepared)
    msg_Prepared_r1 .. _rN         0 | 1   ([type |-> "Prepared", rm |-> rm] \\in msgs)
    msg_Commit, msg_Abort          0 | 1

`check_safety(protocol(n), max_states=...)["reachable_states"]` counts distinct reachable states,
initial state included -- the same quantity as TLC's distinct states and our `distinct_states`.
Successors are listed in the same order and with the same stuttering steps as our models.
"""

from __future__ import annotations

from minicheck import Protocol, check_safety

RM_STATES = ("working", "prepared", "committed", "aborted")
TM_STATES = ("init", "committed", "aborted")


def fields(n: int) -> tuple[str, ...]:
    rms = [f"r{rm + 1}" for rm in range(n)]
    return (
        tuple(f"rmState_{r}" for r in rms)
        + ("tmState",)
        + tuple(f"tmPrepared_{r}" for r in rms)
        + tuple(f"msg_Prepared_{r}" for r in rms)
        + ("msg_Commit", "msg_Abort")
    )


def protocol(n: int) -> Protocol:
    """TwoPhase with RM = {r1, ..., rN} as a minicheck Protocol."""
    names = fields(n)
    tm = n  # position of tmState
    tm_prepared = [n + 1 + rm for rm in range(n)]  # positions of tmPrepared_r*
    prepared_msg = [2 * n + 1 + rm for rm in range(n)]  # positions of msg_Prepared_r*
    commit_msg, abort_msg = 3 * n + 1, 3 * n + 2
    labels = [
        tuple(
            f"{action}(r{rm + 1})"
            for action in ("TMRcvPrepared", "RMPrepare", "RMChooseToAbort", "RMRcvCommitMsg", "RMRcvAbortMsg")
        )
        for rm in range(n)
    ]

    def update(s: tuple, changes) -> tuple:
        nxt = list(s)
        for position, value in changes:
            nxt[position] = value
        return tuple(nxt)

    def transitions(s: tuple) -> list:
        out = []
        tm_init = s[tm] == "init"
        if tm_init:
            # TMCommit: tmState = "init" /\ tmPrepared = RM
            if all(s[p] for p in tm_prepared):
                out.append(("TMCommit", update(s, ((tm, "committed"), (commit_msg, 1)))))
            # TMAbort: tmState = "init"
            out.append(("TMAbort", update(s, ((tm, "aborted"), (abort_msg, 1)))))
        for rm in range(n):
            rcv_prepared, prepare, choose_to_abort, rcv_commit, rcv_abort = labels[rm]
            # TMRcvPrepared(rm): tmState = "init" /\ Prepared(rm) \in msgs
            if tm_init and s[prepared_msg[rm]]:
                out.append((rcv_prepared, update(s, ((tm_prepared[rm], 1),))))
            if s[rm] == "working":
                # RMPrepare(rm), RMChooseToAbort(rm): rmState[rm] = "working"
                out.append((prepare, update(s, ((rm, "prepared"), (prepared_msg[rm], 1)))))
                out.append((choose_to_abort, update(s, ((rm, "aborted"),))))
            # RMRcvCommitMsg(rm), RMRcvAbortMsg(rm)
            if s[commit_msg]:
                out.append((rcv_commit, update(s, ((rm, "committed"),))))
            if s[abort_msg]:
                out.append((rcv_abort, update(s, ((rm, "aborted"),))))
        return out

    rm_names, flag_names = names[:n], names[n + 1 :]

    def type_ok(d: dict) -> bool:
        return (
            all(d[f] in RM_STATES for f in rm_names)
            and d["tmState"] in TM_STATES
            and all(d[f] in (0, 1) for f in flag_names)
        )

    def consistent(d: dict) -> bool:
        states = [d[f] for f in rm_names]
        return not ("aborted" in states and "committed" in states)

    return Protocol(
        name=f"TwoPhase{n}",
        candidate=False,
        fields=names,
        initial=("working",) * n + ("init",) + (0,) * (2 * n + 2),
        transitions=transitions,
        invariants={"TPTypeOK": type_ok, "TCConsistent": consistent},
    )


def distinct_states(n: int, max_states: int = 10**9) -> int:
    """Check TwoPhase(n) with minicheck; return its count of distinct reachable states."""
    result = check_safety(protocol(n), max_states=max_states)
    assert result["exhaustive"], result.get("incomplete_reason")
    assert all(p["holds"] for p in result["properties"].values()), result["properties"]
    return result["reachable_states"]
