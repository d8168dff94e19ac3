"""Evidence for verdicts: which operations a run exercised, where, and what the sink counted.

A `holds` verdict is worth what exercised it. So every session records, per kind of operation
(a resume, a fork, a crash, ...), where in the workflow it happened (`Exercised`), and the
profile counts, for each id, only the scenarios and examples that ran that id's operations
(`EXERCISED_BY`), naming the stages and checkpoints they ran at (`Evidence.holds_reason`). An id
whose operations no scenario and no example ran was not checked: it is `skipped`, never `holds`.

The effect sink's log gives the other half (`EffectCounts`): every fire, every application, the
keyed ones, and each re-fire that a key absorbed. A re-fire hidden by a key is what the contract
asks of a fire in the window before its commit, but only if the key is the framework's stable
identity of the effect; so the profile names the key and says where a key hid a re-fire.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from pymc_resume.bridge.adapter.sink import SinkEvent
from pymc_resume.model.contract import (
    CHECKPOINT_VALIDITY,
    CONSUME_ONCE_CONSUMPTION,
    CONSUME_ONCE_VALUE,
    EFFECT_EXACTLY_ONCE,
    FORK_DETERMINISM,
    FORK_INTENT,
    LIVENESS,
    PREFIX_CONTINUATION,
    RECOVERY_DETERMINISM,
)
from pymc_resume.model.workflow import NodeKind, Workflow

# Kinds of exercise a session records (`Exercised`), besides the operations' own names.
EFFECT = "effect"  # an effect fired (the sink logged it)
CRASH = "crash"  # a process was killed at a crash point
INVALID_INPUT = "invalid-input"  # a schema-invalid update or resume value, or an overflowing node ran
DRAIN = "drain"  # the session ended with the liveness drain
# a resume reached the framework for an interrupt that had already consumed a value
LATE_RESUME = "late-resume"

# Clause id -> (the kinds of exercise that judge it, how a reason names them).
EXERCISED_BY: dict[str, tuple[tuple[str, ...], str]] = {
    PREFIX_CONTINUATION: (("resume", "recover"), "resumed or recovered a thread"),
    EFFECT_EXACTLY_ONCE: ((EFFECT,), "fired an effect"),
    FORK_DETERMINISM: (("fork",), "made a fork"),
    CHECKPOINT_VALIDITY: ((INVALID_INPUT,), "sent a schema-invalid value or ran a node that can write one"),
    CONSUME_ONCE_VALUE: ((LATE_RESUME,), "resumed an interrupt that had already consumed a value"),
    CONSUME_ONCE_CONSUMPTION: (("resume-together",), "delivered resumes concurrently"),
    RECOVERY_DETERMINISM: ((CRASH,), "crashed a process"),
    FORK_INTENT: (("fork",), "made a fork"),
    LIVENESS: ((DRAIN,), "ended with the liveness drain"),
}

# The operations whose variants (`bridge/adapter/protocol.py`) a kind of exercise performs.
OPERATIONS_OF_KIND: dict[str, tuple[str, ...]] = {
    "resume": ("resume",),
    LATE_RESUME: ("resume",),
    "resume-together": ("resume-together",),
    "recover": ("recover",),
    "fork": ("fork",),
    "update": ("update",),
    INVALID_INPUT: ("resume", "update"),
}

# How many places a reason lists before it says "and N more".
PLACES_LISTED = 8
# How many hidden re-fires a note describes (all are counted).
REFIRES_LISTED = 3


def effect_places(workflow: Workflow, events: Iterable[SinkEvent]) -> dict[str, set[str]]:
    """What the sink's log shows was exercised: effects fired, overflowing nodes run."""
    exercised: dict[str, set[str]] = {}
    for event in events:
        if event.kind == "fire":
            exercised.setdefault(EFFECT, set()).add(f"stage {event.stage}")
        elif event.kind == "execute" and workflow.nodes[event.node] is NodeKind.OVERFLOW:
            exercised.setdefault(INVALID_INPUT, set()).add(f"node output at stage {event.stage}")
    return exercised


@attrs.define
class Evidence:
    """What a set of sessions exercised: for each id, how many sessions ran its operations,
    and where (stages, checkpoints)."""

    sessions: int = 0
    counts: dict[str, int] = attrs.Factory(dict)  # clause id -> sessions that exercised it
    places: dict[str, set[str]] = attrs.Factory(dict)  # kind of exercise -> where
    variants: dict[str, set[str]] = attrs.Factory(dict)  # kind of exercise -> "operation: variant"

    def add(self, exercised: dict[str, set[str]], variants: dict[str, set[str]] | None = None) -> None:
        """One more session, which exercised `exercised` (kind -> places) with `variants`
        (kind -> "operation: variant", for operations the adapter declares variants of)."""
        self.sessions += 1
        for kind, names in (variants or {}).items():
            self.variants.setdefault(kind, set()).update(names)
        for clause_id, (kinds, _) in EXERCISED_BY.items():
            if any(kind in exercised for kind in kinds):
                self.counts[clause_id] = self.counts.get(clause_id, 0) + 1
        for kind, places in exercised.items():
            self.places.setdefault(kind, set()).update(places)

    def add_all(self, other: Evidence) -> None:
        """Everything `other`'s sessions exercised, as if they were this one's."""
        self.sessions += other.sessions
        for clause_id, count in other.counts.items():
            self.counts[clause_id] = self.counts.get(clause_id, 0) + count
        for kind, places in other.places.items():
            self.places.setdefault(kind, set()).update(places)
        for kind, names in other.variants.items():
            self.variants.setdefault(kind, set()).update(names)

    def exercising(self, clause_id: str) -> int:
        """How many sessions ran any of the operations that judge `clause_id`."""
        return self.counts.get(clause_id, 0)

    def where(self, clause_id: str) -> list[str]:
        kinds, _ = EXERCISED_BY[clause_id]
        places = set().union(*(self.places.get(kind, set()) for kind in kinds))
        if len(kinds) > 1:  # say which operation ran where
            places = {f"{kind} at {place}" for kind in kinds for place in self.places.get(kind, set())}
        return sorted(places, key=_place_order)


def variants_exercising(clause_id: str, parts: list[tuple[Evidence, str]]) -> list[str]:
    """ "operation: variant" for every variant that performed an operation judging `clause_id`."""
    kinds, _ = EXERCISED_BY[clause_id]
    return sorted(
        set().union(*(evidence.variants.get(kind, set()) for evidence, _ in parts for kind in kinds))
    )


def variants_missing(
    clause_id: str, parts: list[tuple[Evidence, str]], declared: dict[str, list[str]]
) -> list[str]:
    """ "operation: variant" for every declared variant (of an operation with two or more) of an
    operation judging `clause_id` that no session ran for it."""
    kinds, _ = EXERCISED_BY[clause_id]
    operations = {op for kind in kinds for op in OPERATIONS_OF_KIND.get(kind, ())}
    used = set(variants_exercising(clause_id, parts))
    return [
        f"{op}: {name}"
        for op in sorted(operations)
        if len(declared.get(op, ())) > 1
        for name in declared[op]
        if f"{op}: {name}" not in used
    ]


def variants_phrase(clause_id: str, parts: list[tuple[Evidence, str]], declared: dict[str, list[str]]) -> str:
    """ "; under variants a, b; variant c never reached the framework here" (only for operations
    with two or more variants), or ""."""
    several = {op for op, names in declared.items() if len(names) > 1}
    used = [v for v in variants_exercising(clause_id, parts) if v.split(":")[0] in several]
    missing = variants_missing(clause_id, parts, declared)
    text = f"; under variants {', '.join(used)}" if used else ""
    if missing:
        text += f"; never exercised for it: {', '.join(missing)}"
    return text


def variants_in(steps: list[dict]) -> list[str]:
    """ "operation: variant" for every variant a list of steps names, in the order first named."""
    return list(dict.fromkeys(f"{s['action']}: {s['variant']}" for s in steps if s.get("variant")))


def _place_order(place: str) -> tuple:
    """Places in workflow order: by the first number in them, then by text."""
    words = place.replace(",", " ").replace(")", " ").split()
    digits = next((int(word) for word in words if word.isdigit()), -1)
    return (digits, place)


def places_text(places: list[str]) -> str:
    if not places:
        return ""
    shown = places[:PLACES_LISTED]
    more = f" and {len(places) - PLACES_LISTED} more" if len(places) > PLACES_LISTED else ""
    return "; ".join(shown) + more


def exercise_phrase(clause_id: str) -> str:
    return EXERCISED_BY[clause_id][1]


def holds_reason(clause_id: str, parts: list[tuple[Evidence, str]]) -> str | None:
    """ "held in 2 of 28 targeted scenarios and 5 of 25 fuzzed examples that made a fork (at:
    ...)", or None when none of them exercised the id (it was not checked). `parts` pairs each
    set of sessions with its name ("targeted scenarios", "fuzzed examples")."""
    counted = [(evidence.exercising(clause_id), evidence.sessions, name) for evidence, name in parts]
    if not any(count for count, _, _ in counted):
        return None
    scope = " and ".join(f"{count} of {total} {name}" for count, total, name in counted if total)
    places = set().union(*(evidence.where(clause_id) for evidence, _ in parts))
    where = places_text(sorted(places, key=_place_order))
    return f"held in {scope} that {exercise_phrase(clause_id)}" + (f" (at: {where})" if where else "")


def not_exercised_reason(clause_id: str, parts: list[tuple[Evidence, str]]) -> str:
    scope = " and ".join(f"{evidence.sessions} {name}" for evidence, name in parts if evidence.sessions)
    return f"not checked: none of the {scope or 'sessions'} {exercise_phrase(clause_id)}"


# -- effects -------------------------------------------------------------------------------


@attrs.frozen
class EffectCounts:
    """What the effect sink counted over some sessions: fires, applications, and keyed ones.

    A keyed fire is applied unless its key was applied before; one that was not is a re-fire
    the key hid (`hidden`, with a few of them described in `hidden_examples`)."""

    fires: int = 0
    applications: int = 0
    keyed_fires: int = 0
    keyed_applications: int = 0
    hidden: int = 0
    hidden_examples: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()  # a few of the keys the sink saw, as examples of their shape

    @classmethod
    def of(cls, events: Iterable[SinkEvent], where: str) -> EffectCounts:
        fires = applications = keyed_fires = keyed_applications = hidden = 0
        examples, keys = [], []
        for event in events:
            if event.kind != "fire":
                continue
            fires += 1
            applications += event.applied
            if event.key is None:
                continue
            keyed_fires += 1
            keyed_applications += event.applied
            if len(keys) < 2 and event.key not in keys:
                keys.append(event.key)
            if not event.applied:
                hidden += 1
                if len(examples) < REFIRES_LISTED:
                    examples.append(
                        f"{where}: t{event.thread} stage {event.stage} fired again with key "
                        f"{event.key!r} ({event.role or 'unknown role'}), which the sink had "
                        "applied already"
                    )
        return cls(fires, applications, keyed_fires, keyed_applications, hidden, tuple(examples), tuple(keys))

    def __add__(self, other: EffectCounts) -> EffectCounts:
        return EffectCounts(
            self.fires + other.fires,
            self.applications + other.applications,
            self.keyed_fires + other.keyed_fires,
            self.keyed_applications + other.keyed_applications,
            self.hidden + other.hidden,
            (self.hidden_examples + other.hidden_examples)[:REFIRES_LISTED],
            tuple(dict.fromkeys(self.keys + other.keys))[:2],
        )

    def as_json(self) -> dict:
        return {
            "fires": self.fires,
            "applications": self.applications,
            "keyed_fires": self.keyed_fires,
            "keyed_applications": self.keyed_applications,
            "hidden_refires": self.hidden,
            "hidden_refire_examples": list(self.hidden_examples),
            "example_keys": list(self.keys),
        }


def effect_key_text(declared: dict | str | None, counts: EffectCounts) -> tuple[str, str]:
    """(the key the sink deduplicated by, why it is the framework's stable identity), from the
    adapter's `effect_key` declaration, or what the sink saw when it declares none."""
    if isinstance(declared, dict):
        key, why = declared.get("key"), declared.get("why")
        return str(key or "(unnamed)"), str(why or "the adapter does not say why")
    if isinstance(declared, str):
        return declared, "the adapter does not say why"
    if counts.keyed_fires == 0:
        return "none", (
            "no fire carried a key: the sink applied every fire (the framework hands node code "
            "no stable identity, or the adapter passes none)"
        )
    shape = ", ".join(repr(key) for key in counts.keys)
    return (
        f"the idempotency key the adapter handed node code (e.g. {shape})",
        "the adapter declares no effect_key saying which framework identity it is",
    )


def effects_json(declared: dict | str | None, counts: EffectCounts) -> dict:
    """The sink's counts with the key it deduplicated by and why that key is the framework's
    stable identity: what a profile's and a fuzz run's JSON carry as `effects`."""
    key, why = effect_key_text(declared, counts)
    return {**counts.as_json(), "key": key, "why": why}


def effect_notes(declared: dict | str | None, counts: EffectCounts, scope: str) -> tuple[str, ...]:
    """The notes of the `effect-exactly-once` cell: both counts, the key and why, and every
    re-fire a key hid (counted, a few described)."""
    key, why = effect_key_text(declared, counts)
    notes = [
        f"the sink logged {counts.fires} fires and {counts.applications} applications in {scope} "
        f"({counts.keyed_fires} fires carried a key, {counts.keyed_applications} of them applied); "
        f"deduplicated by: {key}; why it is the framework's stable identity: {why}"
    ]
    if counts.hidden:
        notes.append(
            f"{counts.hidden} re-fire(s) hidden by the key (the sink applied each key once): "
            + "; ".join(counts.hidden_examples)
        )
    return tuple(notes)
