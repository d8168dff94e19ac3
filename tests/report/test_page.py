"""The HTML report (`pymc_resume/report/page.py`, `sequence.py`) read as text: self-contained,
the matrix as the JSON says, changed cells marked, every verdict told by glyph and pattern as
well as colour, a violated cell's repro as a step table and a four-lane sequence diagram, and
a stranger's text escaped. The browser test (`test_browser.py`) renders it for real."""

import json
import re
from pathlib import Path

import attrs

from pymc_resume.model.contract import CLAUSE_IDS, VERDICTS
from pymc_resume.report.page import GLYPHS, cell_id, render
from pymc_resume.report.profiles import document_of, read_document
from pymc_resume.report.sequence import LANES, story

PROFILES = Path(__file__).parent / "profiles"
FILES = ("reference.json", "reference-no-claim.json", "langgraph-sqlite-sync.json")


def page() -> str:
    return render([read_document(PROFILES / name) for name in FILES])


def test_the_page_loads_nothing_from_anywhere():
    html = page()
    for needle in ("<script", "<link", " src=", "@import", "@font-face", "<iframe", "<img", "<object"):
        assert needle not in html, needle
    assert not re.search(r"url\((?!#)", html), "a url() that is not a reference inside the page"


def test_the_matrix_has_a_row_per_profile_and_each_cell_says_its_verdict():
    html = page()
    for name in FILES:
        profile = json.loads((PROFILES / name).read_text())["profiles"][0]
        row = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*<code>{re.escape(name)}</code>.*?</tr>", html, re.S).group(
            0
        )
        verdicts = re.findall(r'data-id="([\w-]+)" data-verdict="([\w-]+)"', row)
        assert verdicts == [(cid, profile["clauses"][cid]["verdict"]) for cid in CLAUSE_IDS]


def test_every_verdict_has_a_glyph_and_a_pattern_or_tone_besides_its_colour():
    html = page()
    assert set(GLYPHS) == set(VERDICTS)
    glyphs = [glyph for glyph, _ in GLYPHS.values()]
    assert len(set(glyphs)) == len(glyphs)
    for verdict in VERDICTS:
        assert f"swatch v-{verdict}" in html  # in the legend
    # the violated, unconfirmed and skipped cells are patterned (hatched, dotted, ruled)
    for verdict in ("violated", "unconfirmed", "skipped"):
        style = re.search(rf"\.v-{verdict} {{([^}}]*)}}", html).group(1)
        assert "gradient" in style, verdict


def test_a_cell_that_differs_from_the_row_above_is_marked_with_how():
    html = page()
    marked = re.findall(r'<td class="cell v-(\w[\w-]*) changed changed-(\w+)" data-id="([\w-]+)"', html)
    assert marked == [("violated", "worse", "consume-once-consumption")]
    panel = html.split(f'id="{cell_id(1, "consume-once-consumption")}"', 1)[1].split("</section>", 1)[0]
    assert "worse: holds in reference sqlite (0.1.0)" in panel


def test_a_violated_cell_has_its_repro_as_a_step_table_and_a_sequence_diagram():
    profile = json.loads((PROFILES / "reference-no-claim.json").read_text())["profiles"][0]
    cell = profile["clauses"]["consume-once-consumption"]
    told = story(cell, profile["variants"])
    assert len(told) == len(cell["trace"]) and told[cell["violated_at"]].violated
    assert told[1].crashed and told[1].store == ("no change",)  # the fault: no claim recorded
    assert told[2].sink == ("t0 stage 2 executed (delivery)",)  # the second delivery ran it again
    html = page()
    panel = html.split(f'id="{cell_id(1, "consume-once-consumption")}"', 1)[1].split("</section>", 1)[0]
    assert panel.count("<tr") == len(cell["trace"]) + 1  # a row per step under the header
    svg = re.search(r"<svg .*?</svg>", panel, re.S).group(0)
    assert re.findall(r'class="lane-name">(\w+)<', svg) == list(LANES)
    assert "consume-once-consumption violated" in svg and 'class="crash"' in svg


def test_the_same_profiles_give_the_same_page():
    assert page() == page()


def test_text_from_a_profile_is_escaped():
    data = json.loads((PROFILES / "reference.json").read_text())
    data["profiles"][0]["clauses"]["liveness"]["reason"] = '<script>alert("x")</script>'
    data["profiles"][0]["config"] = "<b>bold</b>"
    html = render([document_of(data, "strange.json")])
    assert "<script>" not in html and "&lt;script&gt;" in html and "<b>bold" not in html


def numbers_as_markup(value, key=""):
    """`value` with every number of the fields the page writes as counts (scenarios, examples,
    seconds, replays, repro steps, first failure, the sink's counts) replaced by markup."""
    counted = {"scenarios", "examples", "seconds", "reproduced", "of", "repro_steps", "fires", "applications"}
    if isinstance(value, dict):
        return {k: numbers_as_markup(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers_as_markup(v, key) for v in value]
    if (
        key in counted | {"hidden_refires"}
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    ):
        return "<img src=x onerror=alert(1)>"
    return value


def test_every_value_is_escaped_where_it_is_written_numbers_too():
    """The schema refuses a count that is text; the page escapes it anyway, at the one place
    that writes (`markup.html`), so a document that skipped the schema cannot inject either."""
    checked = read_document(PROFILES / "reference-no-claim.json")
    rows = tuple(attrs.evolve(row, data=numbers_as_markup(row.data)) for row in checked.rows)
    document = attrs.evolve(checked, rows=rows, seed="<script>x</script>", examples="<b>")
    html = render([document])
    assert "<img" not in html and "<script" not in html and "<b>" not in html
    assert html.count("&lt;img src=x onerror=alert(1)&gt;") >= 10


def test_the_page_forbids_script_and_any_load_and_has_a_viewport():
    head = page().split("<title>", 1)[0]
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', head).group(1)
    assert policy.replace("&#x27;", "'").split("; ")[:2] == [
        "default-src 'none'",
        "style-src 'unsafe-inline'",
    ]
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in head
    assert "@media (max-width: 40em)" in page()


def test_each_diagram_defines_its_own_marker_and_points_at_it():
    html = page()
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids)), "an id defined twice"
    svgs = re.findall(r"<svg .*?</svg>", html, re.S)
    assert len(svgs) == 7  # one violated cell of reference-no-claim, six of langgraph
    for svg in svgs:
        [marker] = re.findall(r'<marker id="([^"]+)"', svg)
        assert set(re.findall(r'marker-end="url\(#([^)]+)\)"', svg)) == {marker}


def test_the_runs_table_says_the_bounds_seed_budget_and_version_behind_each_document():
    data = json.loads((PROFILES / "reference.json").read_text())
    data |= {
        "pymc_resume_version": "9.9.9",
        "seed": 7,
        "budget": {"examples": 25, "steps": 12, "max_seconds": None, "shrink_seconds": 30.0, "shrink": True},
    }
    old = read_document(PROFILES / "reference-no-claim.json")
    html = render([old, document_of(data, "new.json")])
    runs = re.search(r'<table class="runs".*?</table>', html, re.S).group(0)
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr><td>.*?</tr>", runs)]
    bounds = (
        "small: nodes step, effect-then-interrupt, gated; values 2; processes 2; resumes 2; crashes 1; "
        "forks 1; invalid_updates 1"
    )
    assert rows == [
        [
            "<code>reference-no-claim.json</code>",
            "not recorded",
            bounds,
            "0",
            "0 fuzzed examples per configuration (the rest of the budget not recorded)",
        ],
        [
            "<code>new.json</code>",
            "9.9.9",
            bounds,
            "7",
            "25 fuzzed examples per configuration, at most 12 steps each, no time limit, "
            "shrunk (at most 30.0s a pass)",
        ],
    ]
    assert "Written by pymc-resume " in html
