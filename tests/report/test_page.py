"""The HTML report (`pymc_resume/report/page.py`, `sequence.py`) read as text: self-contained,
the matrix as the JSON says, changed cells marked, every verdict told by glyph and pattern as
well as colour, a violated cell's repro as a step table and a four-lane sequence diagram, and
a stranger's text escaped. The browser test (`test_browser.py`) renders it for real."""

import json
import re
from pathlib import Path

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
