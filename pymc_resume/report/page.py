"""The HTML conformance report: one self-contained page (no network, no script, no font files).

The page is a matrix, configurations by contract id. Each cell shows its verdict by colour,
pattern and glyph together (so it reads in greyscale and for colour-blind readers) and links to
its panel: the verdict's reason, the variants and framework calls that decided it, the evidence
counts, the notes, and for a violated cell its repro as a step table and a sequence diagram
(`sequence.py`). Rows of one framework and configuration (two versions, a run and its baseline)
sit together, and a cell whose verdict differs from the row above it is marked worse, better or
changed (`changes.py`). A panel is shown when its cell is clicked (CSS `:target`): no script.
The page is a function of its documents alone (no clock), so the same profiles give the same
bytes.
"""

from __future__ import annotations

from html import escape

from pymc_resume.model.contract import (
    CLAUSE_IDS,
    HOLDS,
    NOT_APPLICABLE,
    SKIPPED,
    UNCONFIRMED,
    VERDICTS,
    VIOLATED,
    clause,
)
from pymc_resume.report.changes import BETTER, CHANGED, WORSE, change
from pymc_resume.report.profiles import Document, Row, grouped, rows_of
from pymc_resume.report.sequence import diagram, story

# verdict -> (glyph, what the legend says)
GLYPHS = {
    HOLDS: ("✓", "no scenario or fuzzed example failed it"),
    VIOLATED: ("✗", "failed, with a repro that reproduces"),
    UNCONFIRMED: ("?", "failed once, no replay showed it again"),
    NOT_APPLICABLE: ("–", "the framework cannot express it"),
    SKIPPED: ("○", "not checked (with why)"),
}
MARKS = {WORSE: ("▼", "worse than the row above"), BETTER: ("▲", "better"), CHANGED: ("Δ", "changed")}

STYLE = """
body { font-family: system-ui, "DejaVu Sans", sans-serif; margin: 1.2em; color: #111; background: #fff; }
h1 { font-size: 1.4em; margin: 0 0 .3em; }
h2 { font-size: 1.15em; margin: .2em 0 .5em; }
h3 { font-size: 1em; margin: 1em 0 .3em; }
.sub { color: #444; margin: 0 0 .8em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #999; padding: 3px 6px; font-size: 13px; text-align: left; vertical-align: top; }
.matrix th.id { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: 600; white-space: nowrap; }
.matrix td.cell { padding: 0; min-width: 6.4em; }
.matrix td.cell a { display: block; padding: 5px 6px; color: #111; text-decoration: none;
  white-space: nowrap; }
.matrix tr.group-start > * { border-top: 3px solid #333; }
.glyph { font-weight: 700; display: inline-block; width: 1.1em; }
.v-holds { background: #cdeccd; }
.v-violated { background: #f2a7a7
  repeating-linear-gradient(45deg, rgba(0,0,0,.22) 0 2px, transparent 2px 7px); }
.v-unconfirmed { background: #f7d797 radial-gradient(rgba(0,0,0,.35) 1px, transparent 1.6px) 0 0 / 6px 6px; }
.v-not-applicable { background: #e2e2e2; }
.v-skipped { background: #fff repeating-linear-gradient(0deg, rgba(0,0,0,.16) 0 1px, transparent 1px 5px); }
td.changed { outline: 3px solid #111; outline-offset: -3px; }
td.changed-worse { outline-style: double; outline-width: 5px; outline-offset: -5px; }
.mark { font-weight: 700; margin-left: .3em; }
.legend { display: flex; flex-wrap: wrap; gap: .5em 1.2em; margin: .6em 0 1em; font-size: 13px; }
.legend span.swatch { display: inline-block; padding: 2px 8px; border: 1px solid #999; margin-right: .3em; }
.panel { display: none; border: 2px solid #333; padding: .6em 1em 1em; margin: 1em 0; max-width: 70em; }
.panel:target { display: block; }
.hint { color: #444; font-size: 13px; }
.reason { white-space: pre-wrap; }
code { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
svg.sequence { border: 1px solid #bbb; background: #fcfcfc; margin-top: .4em; }
svg .lane { stroke: #888; stroke-width: 1; stroke-dasharray: 4 3; }
svg .lane-name { font: 600 13px "DejaVu Sans", sans-serif; }
svg .message { stroke: #222; stroke-width: 1.3; }
svg .message.dashed { stroke-dasharray: 5 3; }
svg .arrowhead { fill: #222; }
svg .label { font: 11px "DejaVu Sans", sans-serif; fill: #111; }
svg .step-name { font: 600 11px "DejaVu Sans", sans-serif; fill: #333; }
svg .band { stroke: #ccc; }
svg .crash path { stroke: #000; stroke-width: 3; }
svg .violation rect { fill: #f2a7a7; stroke: #000; stroke-width: 1.5; stroke-dasharray: 6 2; }
"""


def render(documents: list[Document], title: str = "Resume contract: conformance report") -> str:
    """The whole page for the rows of `documents`, in order, grouped by configuration."""
    groups = grouped(rows_of(documents))
    numbered = [(n, row) for n, row in enumerate(row for group in groups for row in group)]
    previous = _previous_rows(groups)
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="sub">{_subtitle(documents, numbered)}</p>',
        _legend(),
        _matrix(groups, previous),
        '<p class="hint">Click a cell for its verdict, reason, variants, evidence and (when violated) '
        "its repro as a step table and a sequence diagram; click a configuration for its operations.</p>",
        _skipped(documents),
        '<div id="panels">',
        *(_row_panel(n, row, documents) for n, row in numbered),
        *(_cell_panel(n, row, cid, previous.get(n)) for n, row in numbered for cid in CLAUSE_IDS),
        "</div></body></html>",
    ]
    return "\n".join(part for part in parts if part) + "\n"


def cell_id(row_number: int, clause_id: str) -> str:
    """The anchor of a cell's panel."""
    return f"cell-{row_number}-{clause_id}"


def row_id(row_number: int) -> str:
    return f"row-{row_number}"


def _previous_rows(groups: list[list[Row]]) -> dict[int, Row]:
    """Row number -> the row above it in its group (the same configuration), for the marks."""
    previous, n = {}, 0
    for group in groups:
        for i in range(len(group)):
            if i > 0:
                previous[n] = group[i - 1]
            n += 1
    return previous


def _subtitle(documents: list[Document], numbered: list) -> str:
    counts = {verdict: 0 for verdict in VERDICTS}
    for _, row in numbered:
        for cid in CLAUSE_IDS:
            counts[row.verdict(cid)] += 1
    sources = ", ".join(f"<code>{escape(d.source)}</code>" for d in documents)
    tally = ", ".join(f"{count} {verdict}" for verdict, count in counts.items() if count)
    return f"{len(numbered)} configuration(s) from {sources}: {tally}."


def _legend() -> str:
    items = [
        f'<span><span class="swatch v-{verdict}"><span class="glyph">{glyph}</span>{verdict}</span>'
        f"{escape(text)}</span>"
        for verdict, (glyph, text) in GLYPHS.items()
    ]
    items += [
        f'<span><span class="mark">{mark}</span> {escape(text)}</span>' for mark, text in MARKS.values()
    ]
    return f'<div class="legend" id="legend">{"".join(items)}</div>'


def _matrix(groups: list[list[Row]], previous: dict[int, Row]) -> str:
    head = "".join(f'<th class="id" title="{escape(clause(cid).summary)}">{cid}</th>' for cid in CLAUSE_IDS)
    lines = [
        '<table class="matrix" id="matrix"><thead><tr><th>framework</th><th>version</th>'
        f"<th>config</th><th>from</th>{head}</tr></thead><tbody>"
    ]
    n = 0
    for group in groups:
        for i, row in enumerate(group):
            start = ' class="group-start"' if i == 0 else ""
            cells = "".join(_cell(n, row, cid, previous.get(n)) for cid in CLAUSE_IDS)
            options = ", ".join(f"{k}={v}" for k, v in sorted(row.options.items()) if v not in (None, False))
            config = escape(row.config) + (f"<br><small>{escape(options)}</small>" if options else "")
            lines.append(
                f'<tr{start} data-row="{n}"><th><a href="#{row_id(n)}">{escape(row.adapter)}</a></th>'
                f"<td>{escape(row.version)}</td><td>{config}</td><td><code>{escape(row.source)}</code></td>{cells}</tr>"
            )
            n += 1
    lines.append("</tbody></table>")
    return "\n".join(lines)


def _cell(n: int, row: Row, cid: str, above: Row | None) -> str:
    verdict = row.verdict(cid)
    glyph, _ = GLYPHS[verdict]
    kind = change(above.verdict(cid), verdict) if above is not None else None
    classes = f"cell v-{verdict}" + (f" changed changed-{kind}" if kind else "")
    mark = f'<span class="mark" title="{MARKS[kind][1]}">{MARKS[kind][0]}</span>' if kind else ""
    reason = row.cell(cid).get("reason") or ""
    changed = f' data-change="{kind}"' if kind else ""
    return (
        f'<td class="{classes}" data-id="{cid}" data-verdict="{verdict}"{changed}>'
        f'<a href="#{cell_id(n, cid)}" title="{escape(reason)}">'
        f'<span class="glyph">{glyph}</span>{verdict}{mark}</a></td>'
    )


def _skipped(documents: list[Document]) -> str:
    entries = [(d.source, e) for d in documents for e in d.skipped]
    if not entries:
        return ""
    items = "".join(
        f"<li>{escape(e['adapter'])} {escape(e.get('config') or '')}: {escape(e.get('reason') or '')}"
        f"{_install(e)} <small>{escape(source)}</small></li>"
        for source, e in entries
    )
    return f'<h3>Not profiled</h3><ul class="skipped">{items}</ul>'


def _install(entry: dict) -> str:
    return f" (<code>{escape(entry['install'])}</code>)" if entry.get("install") else ""


def _row_panel(n: int, row: Row, documents: list[Document]) -> str:
    data = row.data
    facts = [
        f"{data.get('scenarios', 0)} targeted scenarios, {data.get('examples', 0)} fuzzed examples, "
        f"{data.get('seconds', 0)}s; from <code>{escape(row.source)}</code>"
    ]
    if data.get("error"):
        facts.append(f"<strong>the adapter failed (verdicts incomplete)</strong>: {escape(data['error'])}")
    if data.get("stopped"):
        facts.append(f"stopped early: {escape(data['stopped'])}")
    if data.get("finished") is False:
        facts.append("<strong>unfinished</strong>: written while the run was still going")
    rows = []
    variants = data.get("variants") or {}
    for operation, call in (data.get("operations") or {}).items():
        declared = variants.get(operation) or []
        if not declared:
            rows.append(f"<tr><td>{escape(operation)}</td><td></td><td>{escape(call)}</td><td></td></tr>")
        for variant in declared:
            intents = f" ({', '.join(variant['intents'])})" if variant.get("intents") else ""
            rows.append(
                f"<tr><td>{escape(operation)}</td><td>{escape(variant['name'] + intents)}</td>"
                f"<td><code>{escape(variant.get('call', ''))}</code></td>"
                f"<td>{_docs(variant.get('docs', ''))}</td></tr>"
            )
    notes = "".join(f"<li>{escape(note)}</li>" for note in data.get("notes") or [])
    return (
        f'<section class="panel" id="{row_id(n)}"><h2>{escape(row.name)}</h2>'
        + "".join(f"<p>{fact}</p>" for fact in facts)
        + "<h3>Operations and their variants (the framework calls the adapter performs them with)</h3>"
        + '<table class="variants"><tr><th>operation</th><th>variant</th>'
        + "<th>framework call</th><th>docs</th></tr>"
        + "".join(rows)
        + "</table>"
        + (f"<h3>Notes</h3><ul>{notes}</ul>" if notes else "")
        + "</section>"
    )


def _docs(docs: str) -> str:
    if docs.startswith(("https://", "http://")):
        link = docs.split()[0]
        return f'<a href="{escape(link)}">{escape(docs)}</a>'
    return escape(docs)


def _cell_panel(n: int, row: Row, cid: str, above: Row | None) -> str:
    cell = row.cell(cid)
    verdict = cell["verdict"]
    glyph, _ = GLYPHS[verdict]
    parts = [
        f'<section class="panel cell-panel" id="{cell_id(n, cid)}" data-verdict="{verdict}">',
        f'<h2><span class="v-{verdict}" style="padding:0 .4em">'
        f'<span class="glyph">{glyph}</span>{verdict}</span> '
        f'{escape(cid)} · <a href="#{row_id(n)}">{escape(row.name)}</a></h2>',
        f"<p><em>{escape(clause(cid).summary)}</em></p>",
        f'<p class="reason">{escape(cell.get("reason") or "")}</p>',
    ]
    kind = change(above.verdict(cid), verdict) if above is not None else None
    if above is not None and kind is not None:
        parts.append(
            f'<p><span class="mark">{MARKS[kind][0]}</span> {kind}: {escape(above.verdict(cid))} in '
            f"{escape(above.name)} (<code>{escape(above.source)}</code>)</p>"
        )
    parts += [_variants_used(n, row, cell), _evidence(row, cid, cell)]
    notes = "".join(f"<li>{escape(note)}</li>" for note in cell.get("notes") or [])
    if notes:
        parts.append(f"<h3>Notes</h3><ul>{notes}</ul>")
    if verdict in (VIOLATED, UNCONFIRMED) and cell.get("trace"):
        parts.append(_repro(row, cid, cell))
    parts.append("</section>")
    return "\n".join(parts)


def _variants_used(n: int, row: Row, cell: dict) -> str:
    """The variants (operation: name) that decided the cell, with their framework calls."""
    named = cell.get("variants") or []
    declared = row.data.get("variants") or {}
    if not named:
        return (
            "<h3>Variants that decided it</h3><p>none named: the operations this id judges have one "
            f'framework call each (see <a href="#{row_id(n)}">the operations</a> of the configuration).</p>'
            if cell["verdict"] in (HOLDS, VIOLATED, UNCONFIRMED)
            else ""
        )
    items = []
    for entry in named:
        operation, _, name = entry.partition(": ")
        call = next((v.get("call", "") for v in declared.get(operation, []) if v.get("name") == name), "")
        items.append(f"<li><strong>{escape(entry)}</strong>: <code>{escape(call)}</code></li>")
    return f"<h3>Variants that decided it</h3><ul>{''.join(items)}</ul>"


def _evidence(row: Row, cid: str, cell: dict) -> str:
    data = row.data
    facts = [
        f"{data.get('scenarios', 0)} targeted scenarios and {data.get('examples', 0)} fuzzed examples ran"
    ]
    replays = cell.get("replays")
    if replays:
        facts.append(f"the repro reproduced in {replays['reproduced']} of {replays['of']} replays")
    if cell.get("repro_steps") is not None:
        facts.append(f"repro of {cell['repro_steps']} steps")
    first = cell.get("first_failure")
    if first:
        when = (
            f"after {first['examples']} fuzzed examples" if first["examples"] else "in the targeted scenarios"
        )
        facts.append(f"first seen {when}, {first['seconds']}s into the run")
    effects = data.get("effects")
    if cid == "effect-exactly-once" and effects:
        facts.append(
            f"the sink: {effects.get('fires')} fires, {effects.get('applications')} applications, "
            f"{effects.get('hidden_refires')} re-fires hidden by a key ({escape(str(effects.get('key')))})"
        )
    return "<h3>Evidence</h3><ul>" + "".join(f"<li>{fact}</li>" for fact in facts) + "</ul>"


def _repro(row: Row, cid: str, cell: dict) -> str:
    told = story(cell, row.data.get("variants") or {})
    lines = ["<h3>Repro</h3>"]
    if cell.get("repro"):
        lines.append(
            f"<p><code>{escape(cell['repro'])}</code>: replay it with "
            f"<code>pymc-resume replay {escape(cell['repro'])}</code>"
            + (f"; as a test: <code>{escape(cell['pytest'])}</code>" if cell.get("pytest") else "")
            + "</p>"
        )
    table = [
        '<table class="steps"><tr><th>#</th><th>step</th><th>variant and framework call</th>'
        "<th>outcome</th><th>store after it</th><th>sink</th></tr>"
    ]
    for step in told:
        mark = ' class="violated-step"' if step.violated else ""
        variant = escape(step.variant) + (f"<br><code>{escape(step.call)}</code>" if step.call else "")
        table.append(
            f"<tr{mark}><td>{step.index}</td><td>{escape(step.text)}"
            + (f"<br><strong>✗ {escape(cid)} seen failing here</strong>" if step.violated else "")
            + f"</td><td>{variant}</td><td>{_lines(step.outcomes)}</td>"
            f"<td>{_lines(step.store)}</td><td>{_lines(step.sink)}</td></tr>"
        )
    table.append("</table>")
    lines += table
    lines.append(
        '<h3>Sequence diagram</h3><p class="hint">Solid arrows: calls and what node code did (the '
        "sink's log); dashed: what the store showed changed after the step, and the answer to the "
        "client; ✕: a SIGKILL. Hover a label for its whole text.</p>"
    )
    lines.append(diagram(told, cid, " ".join((cell.get("reason") or "").split())))
    return "\n".join(lines)


def _lines(lines: tuple[str, ...]) -> str:
    return "<br>".join(escape(line) for line in lines)
