"""The HTML conformance report: one self-contained page (no network, no script, no font files).

The page is a matrix, configurations by contract id. Each cell shows its verdict by colour,
pattern and glyph together (so it reads in greyscale and for colour-blind readers) and links to
its panel: the verdict's reason, the variants and framework calls that decided it, the evidence
counts, the notes, and for a violated cell its repro as a step table and a sequence diagram
(`sequence.py`). Rows of one framework and configuration (two versions, a run and its baseline)
sit together, and a cell that differs from the row above it is marked worse, better or changed
(`changes.py`). A panel is shown when its cell is clicked (CSS `:target`): no script. Under the
matrix, what stands behind each document's verdicts: its bounds, seed, budget and the
pymc-resume that ran it.

Every value is written through `markup.html` (escaped, numbers too), and the page's
Content-Security-Policy forbids any script and any load, so a crafted profile can neither run
script nor make the page fetch anything. The page has a viewport and a narrow layout (the wide
tables and the diagrams scroll or shrink within it). It is a function of its documents alone
(no clock), so the same profiles give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator

from pymc_resume import __version__
from pymc_resume.errors import BadInput
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
from pymc_resume.report.changes import BETTER, CHANGED, WORSE, cell_change
from pymc_resume.report.markup import Markup, html, join
from pymc_resume.report.profiles import Document, Row, grouped, rows_of
from pymc_resume.report.sequence import MAX_STEPS, diagram, story

# verdict -> (glyph, what the legend says)
GLYPHS = {
    HOLDS: ("✓", "no scenario or fuzzed example failed it"),
    VIOLATED: ("✗", "failed, with a repro that reproduces"),
    UNCONFIRMED: ("?", "failed once, no replay showed it again"),
    NOT_APPLICABLE: ("–", "the framework cannot express it"),
    SKIPPED: ("○", "not checked (with why)"),
}
MARKS = {WORSE: ("▼", "worse than the row above"), BETTER: ("▲", "better"), CHANGED: ("Δ", "changed")}
# No script, no load of any kind (images, fonts, frames, fetches); the page's own style only.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
NOT_RECORDED = "not recorded"
# Characters of one page, at most: 8 MiB of real profiles (175 configurations, 1,050 diagrams)
# make 11 million. A crafted profile whose parts each draw a lot is refused, not written.
MAX_PAGE = 24 * 2**20
TOOLTIP = 300  # characters of a reason in a cell's tooltip (it is whole in the cell's panel)

STYLE = """
body { font-family: system-ui, "DejaVu Sans", sans-serif; margin: 1.2em; color: #111; background: #fff; }
h1 { font-size: 1.4em; margin: 0 0 .3em; }
h2 { font-size: 1.15em; margin: .2em 0 .5em; }
h3 { font-size: 1em; margin: 1em 0 .3em; }
.sub { color: #444; margin: 0 0 .8em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #999; padding: 3px 6px; font-size: 13px; text-align: left; vertical-align: top; }
.matrix th.id { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: 600; white-space: nowrap; }
.matrix td.cell { padding: 0; min-width: 6em; }
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
.panel { display: none; border: 2px solid #333; padding: .6em 1em 1em; margin: 1em 0; max-width: 70em;
  overflow-wrap: anywhere; }
.scroll { overflow-x: auto; max-width: 100%; padding: 0 2px 2px 0; }
.panel:target { display: block; }
.hint { color: #444; font-size: 13px; }
.reason { white-space: pre-wrap; }
code { font-family: "DejaVu Sans Mono", monospace; font-size: 12px; }
svg.sequence { border: 1px solid #bbb; background: #fcfcfc; margin-top: .4em; max-width: 100%; height: auto; }
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
.runs td { max-width: 40em; overflow-wrap: anywhere; }
@media (max-width: 40em) {
  body { margin: .5em; }
  h1 { font-size: 1.2em; }
  th, td { font-size: 12px; padding: 2px 4px; }
  .matrix td.cell { min-width: 0; }
  .matrix td.cell a { padding: 4px; }
  .panel { padding: .4em .5em .6em; }
}
"""


def render(documents: list[Document], title: str = "Resume contract: conformance report") -> str:
    """The whole page for the rows of `documents`, in order, grouped by configuration. Raises
    BadInput, before the page is whole, when it would have more than `MAX_PAGE` characters."""
    parts, size = [], 0
    for part in _parts(documents, title):
        size += len(part) + 1
        if size > MAX_PAGE:
            raise BadInput(
                f"the report of {', '.join(d.source for d in documents)} would have more than "
                f"{MAX_PAGE:,} characters: report fewer profiles at once"
            )
        parts.append(part)
    return "\n".join(parts) + "\n"


def _parts(documents: list[Document], title: str) -> Iterator[Markup]:
    """The page's parts, one at a time (a panel at most)."""
    groups = grouped(rows_of(documents))
    numbered = [(n, row) for n, row in enumerate(row for group in groups for row in group)]
    previous = _previous_rows(groups)
    parts = [
        Markup("<!doctype html>"),
        html(
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="{}">'
            '<meta name="referrer" content="no-referrer">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            POLICY,
        ),
        html("<title>{}</title>", title),
        html("<style>{}</style></head><body>", Markup(STYLE)),
        html("<h1>{}</h1>", title),
        html('<p class="sub">{}</p>', _subtitle(documents, numbered)),
        _legend(),
        _matrix(groups, previous),
        Markup(
            '<p class="hint">Click a cell for its verdict, reason, variants, evidence and (when violated) '
            "its repro as a step table and a sequence diagram; click a configuration for its operations.</p>"
        ),
        _runs(documents),
        _skipped(documents),
        Markup('<div id="panels">'),
    ]
    yield from (part for part in parts if part)
    for n, row in numbered:
        yield _row_panel(n, row)
    for n, row in numbered:
        calls = {
            (op, v["name"]): v["call"] for op, declared in row.data["variants"].items() for v in declared
        }
        for cid in CLAUSE_IDS:
            yield _cell_panel(n, row, cid, previous.get(n), calls)
    yield html('</div><p class="hint">Written by pymc-resume {}.</p></body></html>', __version__)


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


def _subtitle(documents: list[Document], numbered: list) -> Markup:
    counts = {verdict: 0 for verdict in VERDICTS}
    for _, row in numbered:
        for cid in CLAUSE_IDS:
            counts[row.verdict(cid)] += 1
    sources = join((html("<code>{}</code>", d.source) for d in documents), ", ")
    tally = ", ".join(f"{count} {verdict}" for verdict, count in counts.items() if count)
    return html("{} configuration(s) from {}: {}.", len(numbered), sources, tally)


def _legend() -> Markup:
    items = [
        html(
            '<span><span class="swatch v-{}"><span class="glyph">{}</span>{}</span>{}</span>',
            verdict,
            glyph,
            verdict,
            text,
        )
        for verdict, (glyph, text) in GLYPHS.items()
    ]
    items += [
        html('<span><span class="mark">{}</span> {}</span>', mark, text) for mark, text in MARKS.values()
    ]
    return html('<div class="legend" id="legend">{}</div>', join(items))


def _matrix(groups: list[list[Row]], previous: dict[int, Row]) -> Markup:
    head = join(html('<th class="id" title="{}">{}</th>', clause(cid).summary, cid) for cid in CLAUSE_IDS)
    lines = [
        html(
            '<div class="scroll"><table class="matrix" id="matrix"><thead><tr><th>framework</th>'
            "<th>version</th><th>config</th><th>from</th>{}</tr></thead><tbody>",
            head,
        )
    ]
    n = 0
    for group in groups:
        for i, row in enumerate(group):
            cells = join(_cell(n, row, cid, previous.get(n)) for cid in CLAUSE_IDS)
            options = ", ".join(f"{k}={v}" for k, v in sorted(row.options.items()) if v not in (None, False))
            config = html("{}<br><small>{}</small>", row.config, options) if options else row.config
            lines.append(
                html(
                    '<tr{} data-row="{}"><th><a href="#{}">{}</a></th><td>{}</td><td>{}</td>'
                    "<td><code>{}</code></td>{}</tr>",
                    Markup(' class="group-start"') if i == 0 else "",
                    n,
                    row_id(n),
                    row.adapter,
                    row.version,
                    config,
                    row.source,
                    cells,
                )
            )
            n += 1
    lines.append(Markup("</tbody></table></div>"))
    return join(lines, "\n")


def _change(above: Row | None, row: Row, cid: str) -> tuple[str, str] | None:
    """How the cell differs from the one above it (`changes.cell_change`), or None."""
    return None if above is None else cell_change(above.cell(cid), row.cell(cid))


def _cell(n: int, row: Row, cid: str, above: Row | None) -> Markup:
    verdict = row.verdict(cid)
    glyph, _ = GLYPHS[verdict]
    seen = _change(above, row, cid)
    kind = seen[0] if seen else None
    classes = f"cell v-{verdict}" + (f" changed changed-{kind}" if kind else "")
    mark = html('<span class="mark" title="{}">{}</span>', MARKS[kind][1], MARKS[kind][0]) if kind else ""
    return html(
        '<td class="{}" data-id="{}" data-verdict="{}"{}><a href="#{}" title="{}">'
        '<span class="glyph">{}</span>{}{}</a></td>',
        classes,
        cid,
        verdict,
        html(' data-change="{}"', kind) if kind else "",
        cell_id(n, cid),
        _short(row.cell(cid).get("reason") or "", TOOLTIP),
        glyph,
        verdict,
        mark,
    )


def _runs(documents: list[Document]) -> Markup:
    """What stands behind each document's verdicts: the bounds, seed and budget of its run and
    the pymc-resume that ran it."""
    rows = join(
        html(
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            d.source,
            d.tool_version or NOT_RECORDED,
            _bounds_text(d.bounds),
            NOT_RECORDED if d.seed is None else d.seed,
            _budget_text(d),
        )
        for d in documents
    )
    return html(
        '<h3>The runs</h3><div class="scroll"><table class="runs" id="runs"><thead><tr><th>file</th>'
        "<th>pymc-resume</th><th>bounds</th><th>seed</th><th>budget</th></tr></thead><tbody>{}</tbody>"
        '</table></div><p class="hint">holds means that no targeted scenario and no fuzzed example '
        "within these bounds and this budget failed the id: a bounded search, not a proof.</p>",
        rows,
    )


def _bounds_text(bounds: dict | None) -> str:
    if not bounds:
        return NOT_RECORDED
    rest = "; ".join(
        f"{key} {', '.join(map(str, value)) if isinstance(value, list) else value}"
        for key, value in bounds.items()
        if key != "name"
    )
    return f"{bounds.get('name', '(unnamed)')}: {rest}" if rest else str(bounds.get("name"))


def _budget_text(document: Document) -> str:
    budget = document.budget or {}
    examples = budget.get("examples", document.examples)
    parts = [f"{NOT_RECORDED if examples is None else examples} fuzzed examples per configuration"]
    if not budget:
        return parts[0] + " (the rest of the budget not recorded)"
    if "steps" in budget:
        parts.append(f"at most {budget['steps']} steps each")
    if "max_seconds" in budget:
        limit = budget["max_seconds"]
        parts.append("no time limit" if limit is None else f"at most {limit}s in all")
    if "shrink" in budget:
        limit = budget.get("shrink_seconds")
        shrunk = "shrunk" + ("" if limit is None else f" (at most {limit}s a pass)")
        parts.append(shrunk if budget["shrink"] else "not shrunk")
    return ", ".join(parts)


def _skipped(documents: list[Document]) -> Markup:
    entries = [(d.source, e) for d in documents for e in d.skipped]
    if not entries:
        return Markup("")
    items = join(
        html(
            "<li>{} {}: {}{} <small>{}</small></li>",
            e["adapter"],
            e.get("config") or "",
            e.get("reason") or "",
            html(" (<code>{}</code>)", e["install"]) if e.get("install") else "",
            source,
        )
        for source, e in entries
    )
    return html('<h3>Not profiled</h3><ul class="skipped">{}</ul>', items)


def _row_panel(n: int, row: Row) -> Markup:
    data = row.data
    facts = [
        html(
            "{} targeted scenarios, {} fuzzed examples, {}s; from <code>{}</code>",
            data["scenarios"],
            data["examples"],
            data["seconds"],
            row.source,
        )
    ]
    if data.get("error"):
        facts.append(html("<strong>the adapter failed (verdicts incomplete)</strong>: {}", data["error"]))
    if data.get("stopped"):
        facts.append(html("stopped early: {}", data["stopped"]))
    if data["finished"] is False:
        facts.append(Markup("<strong>unfinished</strong>: written while the run was still going"))
    notes = join(html("<li>{}</li>", note) for note in data["notes"])
    return html(
        '<section class="panel" id="{}"><h2>{}</h2>{}'
        "<h3>Operations and their variants (the framework calls the adapter performs them with)</h3>"
        '<div class="scroll"><table class="variants"><tr><th>operation</th><th>variant</th>'
        "<th>framework call</th><th>docs</th></tr>{}</table></div>{}</section>",
        row_id(n),
        row.name,
        join(html("<p>{}</p>", fact) for fact in facts),
        _operation_rows(data),
        html("<h3>Notes</h3><ul>{}</ul>", notes) if notes else "",
    )


def _operation_rows(data: dict) -> Markup:
    rows = []
    for operation, call in data["operations"].items():
        declared = data["variants"].get(operation) or []
        if not declared:
            rows.append(html("<tr><td>{}</td><td></td><td>{}</td><td></td></tr>", operation, call))
        for variant in declared:
            intents = f" ({', '.join(variant['intents'])})" if variant.get("intents") else ""
            rows.append(
                html(
                    "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                    operation,
                    variant["name"] + intents,
                    variant["call"],
                    _docs(variant["docs"]),
                )
            )
    return join(rows)


def _docs(docs: str) -> Markup:
    if docs.startswith(("https://", "http://")):
        return html('<a href="{}">{}</a>', docs.split()[0], docs)
    return html("{}", docs)


def _cell_panel(n: int, row: Row, cid: str, above: Row | None, calls: dict[tuple[str, str], str]) -> Markup:
    """A cell's panel; `calls` is its row's framework call of each (operation, variant)."""
    cell = row.cell(cid)
    verdict = cell["verdict"]
    glyph, _ = GLYPHS[verdict]
    parts = [
        html('<section class="panel cell-panel" id="{}" data-verdict="{}">', cell_id(n, cid), verdict),
        html(
            '<h2><span class="v-{}" style="padding:0 .4em"><span class="glyph">{}</span>{}</span> '
            '{} · <a href="#{}">{}</a></h2>',
            verdict,
            glyph,
            verdict,
            cid,
            row_id(n),
            row.name,
        ),
        html("<p><em>{}</em></p>", clause(cid).summary),
        html('<p class="reason">{}</p>', cell.get("reason") or ""),
    ]
    seen = _change(above, row, cid)
    if above is not None and seen is not None:
        kind, detail = seen
        parts.append(
            html(
                '<p><span class="mark">{}</span> {}: {} in {} (<code>{}</code>){}</p>',
                MARKS[kind][0],
                kind,
                above.verdict(cid),
                above.name,
                above.source,
                f"; {detail}" if detail else "",
            )
        )
    parts += [_variants_used(n, cell, calls), _evidence(row, cid, cell)]
    notes = join(html("<li>{}</li>", note) for note in cell["notes"])
    if notes:
        parts.append(html("<h3>Notes</h3><ul>{}</ul>", notes))
    if verdict in (VIOLATED, UNCONFIRMED) and cell.get("trace"):
        parts.append(_repro(n, row, cid, cell))
    parts.append(Markup("</section>"))
    return join(parts, "\n")


def _variants_used(n: int, cell: dict, calls: dict[tuple[str, str], str]) -> Markup:
    """The variants (operation: name) that decided the cell, with their framework calls (cut:
    each is whole in the configuration's operations)."""
    named = cell["variants"]
    if not named:
        if cell["verdict"] not in (HOLDS, VIOLATED, UNCONFIRMED):
            return Markup("")
        return html(
            "<h3>Variants that decided it</h3><p>none named: the operations this id judges have one "
            'framework call each (see <a href="#{}">the operations</a> of the configuration).</p>',
            row_id(n),
        )
    items = []
    for entry in dict.fromkeys(named):
        operation, _, name = entry.partition(": ")
        call = _short(calls.get((operation, name), ""), TOOLTIP)
        items.append(html("<li><strong>{}</strong>: <code>{}</code></li>", entry, call))
    return html("<h3>Variants that decided it</h3><ul>{}</ul>", join(items))


def _evidence(row: Row, cid: str, cell: dict) -> Markup:
    data = row.data
    facts = [html("{} targeted scenarios and {} fuzzed examples ran", data["scenarios"], data["examples"])]
    replays = cell.get("replays")
    if replays:
        facts.append(html("the repro reproduced in {} of {} replays", replays["reproduced"], replays["of"]))
    if cell.get("repro_steps") is not None:
        facts.append(html("repro of {} steps", cell["repro_steps"]))
    first = cell.get("first_failure")
    if first:
        when = (
            f"after {first['examples']} fuzzed examples" if first["examples"] else "in the targeted scenarios"
        )
        facts.append(html("first seen {}, {}s into the run", when, first["seconds"]))
    effects = data.get("effects")
    if cid == "effect-exactly-once" and effects:
        facts.append(
            html(
                "the sink: {} fires, {} applications, {} re-fires hidden by a key ({})",
                effects.get("fires"),
                effects.get("applications"),
                effects.get("hidden_refires"),
                effects.get("key"),
            )
        )
    return html("<h3>Evidence</h3><ul>{}</ul>", join(html("<li>{}</li>", fact) for fact in facts))


def _repro(n: int, row: Row, cid: str, cell: dict) -> Markup:
    told = story(cell, row.data["variants"])
    lines = [Markup("<h3>Repro</h3>")]
    if len(cell["trace"]) > MAX_STEPS:
        lines.append(html("<p>Its first {} of {} steps:</p>", MAX_STEPS, len(cell["trace"])))
    if cell.get("repro"):
        lines.append(
            html(
                "<p><code>{}</code>: replay it with <code>pymc-resume replay {}</code>{}</p>",
                cell["repro"],
                cell["repro"],
                html("; as a test: <code>{}</code>", cell["pytest"]) if cell.get("pytest") else "",
            )
        )
    table = [
        Markup(
            '<div class="scroll"><table class="steps"><tr><th>#</th><th>step</th>'
            "<th>variant and framework call</th><th>outcome</th><th>store after it</th><th>sink</th></tr>"
        )
    ]
    for step in told:
        table.append(
            html(
                "<tr{}><td>{}</td><td>{}{}</td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                Markup(' class="violated-step"') if step.violated else "",
                step.index,
                step.text,
                html("<br><strong>✗ {} seen failing here</strong>", cid) if step.violated else "",
                step.variant,
                html("<br><code>{}</code>", step.call) if step.call else "",
                _lines(step.outcomes),
                _lines(step.store),
                _lines(step.sink),
            )
        )
    table.append(Markup("</table></div>"))
    lines += table
    lines.append(
        Markup(
            '<h3>Sequence diagram</h3><p class="hint">Solid arrows: calls and what node code did (the '
            "sink's log); dashed: what the store showed changed after the step, and the answer to the "
            "client; ✕: a SIGKILL. Hover a label for its whole text.</p>"
        )
    )
    lines.append(diagram(told, cid, " ".join((cell.get("reason") or "").split()), cell_id(n, cid)))
    return join(lines, "\n")


def _short(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _lines(lines: tuple[str, ...]) -> Markup:
    return join(lines, "<br>")
