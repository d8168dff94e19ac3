"""A repro as a story: each step, what the framework answered, what the store and the sink showed
after it; drawn as a step table and as a sequence diagram (inline SVG) with four lanes:
the client (the bridge), the framework, its durable store, the effect sink.

Everything drawn is read from the violated cell's JSON: its steps (`trace`), their `outcomes`,
where the clause was seen failing (`violated_at`), and `observed`: the store after each step
(`stores`) and the sink's events with the operation that caused them (`events`). A profile
written before those were recorded still gets the steps and outcomes it has; nothing is
inferred from the model (an arrow is drawn only for something observed).

Steps are described here rather than with the bridge's `describe_step`, because the report
reads JSON only (see the package docstring); the words follow it.
"""

from __future__ import annotations

import attrs

from pymc_resume.model.state import INITIAL, UPDATE
from pymc_resume.model.workflow import INVALID
from pymc_resume.report.markup import Markup, html, join

DRAIN = "drain"
LANES = ("client", "framework", "store", "sink")
# What one step draws, at most (the rest is counted): a story is drawn twice (table, diagram),
# so what a cell's JSON holds must not multiply without bound on the page.
MAX_EVENTS = 8  # sink events
MAX_STORE_LINES = 12  # changes in the store
MAX_OUTCOMES = 8  # answers (one per client of a concurrent resume)
MAX_LINE = 200  # characters of any one line (the whole text is in the cell's JSON)
MAX_STEPS = 200  # steps of one repro (a repro file holds at most 200)


@attrs.frozen
class StepStory:
    index: int | str  # the step's number, or DRAIN for the liveness drain
    text: str  # "resume t0 with v1, crash at stage 2 after-execute"
    variant: str  # "fork: update-state" or ""
    call: str  # the framework call the variant names, or ""
    outcomes: tuple[str, ...]  # "ok: parked", "refused by the framework: ...", "crashed: ..."
    crashed: bool
    store: tuple[str, ...]  # what changed in the store after the step
    sink: tuple[str, ...]  # the sink's events the step's operations caused
    violated: bool  # the clause was seen failing right after this step


def value_text(value) -> str:
    return "invalid" if value == INVALID else f"v{value}"


def step_text(step: dict) -> str:
    """One line for a repro step (as the bridge's `describe_step` words it)."""
    action, t = step.get("action", "?"), step.get("thread", "?")
    crash = step.get("crash")
    killed = f", crash at stage {crash['stage']} {crash['when']}" if crash else ""
    killed += f", by warm client {step['client']}" if step.get("client") else ""
    if action == "resume":
        return f"resume t{t} with {value_text(step.get('value'))}{killed}"
    if action == "resume-together":
        values = ", ".join(map(value_text, step.get("values") or []))
        window = f", held together {step['window']}" if step.get("window") else ""
        order = ""
        if step.get("order") is not None:
            order = ", released in order " + ", ".join(f"#{i}" for i in step["order"])
        return f"resume t{t} concurrently with {values}{window}{order}"
    if action == "fork":
        edit = f", new input {value_text(step.get('value'))}" if step.get("intent") == "edit" else ""
        return f"fork t{t} at checkpoint {step.get('checkpoint')} ({step.get('intent')}{edit}){killed}"
    if action == "update":
        return f"update t{t} note to {value_text(step.get('value'))}"
    return f"{action} t{t}{killed}"


def outcome_text(outcome: dict) -> str:
    status, detail = outcome.get("status", "?"), " ".join(str(outcome.get("detail") or "").split())
    if status == "refused":
        by = outcome.get("by") or "client"
        who = {"framework": "the framework", "client": "our client", "not-expressible": "not expressible"}
        status = f"refused by {who.get(by, by)}"
    return f"{status}: {detail}" if detail else status


def _stage_mark(stage) -> str:
    if stage == INITIAL:
        return "the start"
    if stage == UPDATE:
        return "an update"
    return f"stage {stage}"


def store_changes(before: list[dict] | None, after: list[dict]) -> list[str]:
    """What changed in the store between two `stores` entries (each thread's summary)."""
    lines = []
    for t, now in enumerate(after):
        was = before[t] if before is not None and t < len(before) else None
        if was is None:
            lines.append(
                f"t{t}: {now['checkpoints']} checkpoints, head after {_stage_mark(now['stage'])}, "
                f"run {now['run']}"
            )
            lines += [
                f"t{t}: input at stage {s} = {value_text(v)}" for s, v in (now.get("inputs") or {}).items()
            ]
            continue
        added = now["checkpoints"] - was["checkpoints"]
        if added > 0:
            lines.append(f"t{t}: +{added} checkpoint(s), head after {_stage_mark(now['stage'])}")
        elif added < 0 or (now["pc"], now["stage"]) != (was["pc"], was["stage"]):
            lines.append(
                f"t{t}: head now after {_stage_mark(now['stage'])} ({now['checkpoints']} checkpoints)"
            )
        old_inputs, new_inputs = was.get("inputs") or {}, now.get("inputs") or {}
        for stage in sorted(set(old_inputs) | set(new_inputs), key=int):
            if stage not in old_inputs:
                lines.append(f"t{t}: input at stage {stage} = {value_text(new_inputs[stage])} recorded")
            elif stage not in new_inputs:
                lines.append(f"t{t}: input at stage {stage} gone (was {value_text(old_inputs[stage])})")
            elif old_inputs[stage] != new_inputs[stage]:
                lines.append(
                    f"t{t}: input at stage {stage} changed: "
                    f"{value_text(old_inputs[stage])} to {value_text(new_inputs[stage])}"
                )
        if now["run"] != was["run"]:
            lines.append(f"t{t}: run {was['run']} to {now['run']}")
    return lines


def event_text(event: dict) -> str:
    role = f" ({event['role']})" if event.get("role") else ""
    if event.get("kind") == "fire":
        key = f" key {event['key']!r}" if event.get("key") else " no key"
        applied = "applied" if event.get("applied") else "not applied (key seen before)"
        return f"t{event['thread']} stage {event['stage']} fired{role}:{key}, {applied}"
    return f"t{event['thread']} stage {event['stage']} executed{role}"


def _step_of(op: str | None) -> int | str | None:
    """The step an event's operation id belongs to: s3 and s3.1 are step 3; drain ops the drain."""
    if not op:
        return None
    if op.startswith(DRAIN):
        return DRAIN
    head = op[1:].split(".", 1)[0]
    return int(head) if op.startswith("s") and head.isdigit() else None


def story(cell: dict, variants: dict[str, list[dict]] | None = None) -> list[StepStory]:
    """The violated cell's repro, step by step (its first `MAX_STEPS`), then the drain when the
    clause failed there or the sink shows drain operations. Each step's lines are cut to
    `MAX_LINE` characters and counted past their limits."""
    steps = (cell.get("trace") or [])[:MAX_STEPS]
    outcomes = cell.get("outcomes") or []
    observed = cell.get("observed") or {}
    stores = observed.get("stores") or []
    events: dict[int | str | None, list[dict]] = {}
    for event in observed.get("events") or []:
        events.setdefault(_step_of(event.get("op")), []).append(event)
    at = cell.get("violated_at")
    told = []
    for i, step in enumerate(steps):
        results = [outcome_text(o) for o in (outcomes[i] if i < len(outcomes) and outcomes[i] else [])]
        variant, call = _variant(step, variants or {})
        store = []
        if i < len(stores):
            store = store_changes(stores[i - 1] if i > 0 else None, stores[i]) or ["no change"]
        told.append(
            StepStory(
                i,
                _short(step_text(step), MAX_LINE),
                _short(variant, MAX_LINE),
                _short(call, MAX_LINE),
                _capped(results, MAX_OUTCOMES, "answers"),
                any(r.startswith("crashed") for r in results),
                _capped(store, MAX_STORE_LINES, "changes in the store"),
                _events(events.get(i, [])),
                at == i,
            )
        )
    if at == DRAIN or events.get(DRAIN):
        told.append(
            StepStory(
                DRAIN,
                "the liveness drain: recover every dead thread, start every new one",
                "",
                "",
                (),
                False,
                (),
                _events(events.get(DRAIN, [])),
                at == DRAIN,
            )
        )
    return told


def _events(events: list[dict]) -> tuple[str, ...]:
    lines = [event_text(e) for e in events[:MAX_EVENTS]]
    return _capped(lines, MAX_EVENTS, "sink events", more=len(events) - len(lines))


def _capped(lines: list[str], limit: int, what: str, more: int = 0) -> tuple[str, ...]:
    """The first `limit` lines, each cut to `MAX_LINE` characters, and a line counting the rest."""
    more += max(0, len(lines) - limit)
    shown = [_short(line, MAX_LINE) for line in lines[:limit]]
    return tuple(shown + ([f"... {more} more {what}"] if more else []))


def _variant(step: dict, variants: dict[str, list[dict]]) -> tuple[str, str]:
    """("operation: name", the framework call) of the variant a step names, or its operation's
    only variant's call."""
    action = step.get("action", "")
    declared = variants.get(action) or []
    name = step.get("variant")
    for variant in declared:
        if variant.get("name") == name or (name is None and len(declared) == 1):
            return (f"{action}: {variant['name']}" if name else "", variant.get("call", ""))
    return (f"{action}: {name}" if name else "", "")


# -- the diagram -------------------------------------------------------------------------------

LANE_X = {"client": 90, "framework": 330, "store": 570, "sink": 810}
WIDTH = 920
ROW = 20  # pixels per message
TOP = 46
CHARS = 44  # characters of a label between two neighbouring lanes
TOOLTIP = 1000  # characters of the violation's tooltip (the reason is whole in the panel)


def diagram(told: list[StepStory], clause: str, reason: str, key: str) -> Markup:
    """The sequence diagram of `told` as an inline SVG element. `key` (unique on the page, a
    cell's anchor) prefixes the ids the SVG defines: ids are the page's, not the SVG's, and an
    arrow pointing at another diagram's marker draws no head once that diagram is hidden."""
    marker = f"{key}-head"
    body: list[Markup] = []
    y = TOP
    for step in told:
        y += 6
        body.append(_band(y, step))
        y += ROW
        if step.index != DRAIN:
            label = step.text + (f" [{step.variant.split(': ', 1)[-1]}]" if step.variant else "")
            body.append(_arrow(marker, "client", "framework", y, label, step.call or label))
            y += ROW
        for line in step.sink:
            body.append(_arrow(marker, "framework", "sink", y, line, line))
            y += ROW
        for line in step.store:
            body.append(_arrow(marker, "framework", "store", y, line, line, dashed=True))
            y += ROW
        if step.crashed:
            body.append(_cross(y, "SIGKILL: " + step.text.split("crash at ", 1)[-1]))
            y += ROW
        for line in step.outcomes:
            body.append(_arrow(marker, "framework", "client", y, line, line, dashed=True))
            y += ROW
        if step.violated:
            body.append(_violation(y, clause, reason))
            y += 2 * ROW
    height = y + 20
    heads = join(
        html(
            '<text x="{}" y="22" text-anchor="middle" class="lane-name">{}</text>'
            '<line x1="{}" y1="30" x2="{}" y2="{}" class="lane"/>',
            x,
            name,
            x,
            x,
            height - 6,
        )
        for name, x in LANE_X.items()
    )
    return html(
        '<svg xmlns="http://www.w3.org/2000/svg" class="sequence" width="{}" height="{}" '
        'viewBox="0 0 {} {}" role="img" aria-label="sequence diagram of the repro of {}">'
        '<defs><marker id="{}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>'
        "{}{}</svg>",
        WIDTH,
        height,
        WIDTH,
        height,
        clause,
        marker,
        heads,
        join(body),
    )


def _short(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _arrow(
    marker: str, source: str, target: str, y: int, label: str, title: str, dashed: bool = False
) -> Markup:
    x1, x2 = LANE_X[source], LANE_X[target]
    room = CHARS * abs(LANES.index(target) - LANES.index(source))  # wider across more lanes
    end = x2 + (-4 if x2 > x1 else 4)  # the arrowhead's tip just short of the lane
    return html(
        '<g><title>{}</title><line x1="{}" y1="{}" x2="{}" y2="{}" class="{}" marker-end="url(#{})"/>'
        '<text x="{}" y="{}" text-anchor="middle" class="label">{}</text></g>',
        title,
        x1,
        y,
        end,
        y,
        "message dashed" if dashed else "message",
        marker,
        (x1 + x2) / 2,
        y - 4,
        _short(label, room),
    )


def _band(y: int, step: StepStory) -> Markup:
    name = "drain" if step.index == DRAIN else f"step {step.index}"
    return html(
        '<text x="6" y="{}" class="step-name">{}</text><line x1="50" y1="{}" x2="{}" y2="{}" class="band"/>',
        y + 4,
        name,
        y,
        WIDTH - 6,
        y,
    )


def _cross(y: int, label: str) -> Markup:
    x = LANE_X["framework"]
    return html(
        '<g class="crash"><title>{}</title><path d="M{},{} L{},{} M{},{} L{},{}"/>'
        '<text x="{}" y="{}" class="label">{}</text></g>',
        label,
        x - 7,
        y - 11,
        x + 7,
        y + 3,
        x + 7,
        y - 11,
        x - 7,
        y + 3,
        x + 14,
        y,
        _short(label, CHARS),
    )


def _violation(y: int, clause: str, reason: str) -> Markup:
    text = _short(f"✗ {clause} violated: {reason}", TOOLTIP)
    return html(
        '<g class="violation"><title>{}</title><rect x="50" y="{}" width="{}" height="{}" rx="3"/>'
        '<text x="60" y="{}" class="label">{}</text></g>',
        text,
        y - 12,
        WIDTH - 56,
        ROW + 10,
        y + 6,
        _short(text, 120),
    )
