"""The report in a real browser: Debian's headless Chromium (installed by `.ci/run`) opens the
page from a file, offline, over the DevTools protocol (`chromium.py`): it shows the matrix as
the JSON says, loads nothing but the page itself, and a real click on a violated cell opens that
cell's panel with its step table and its sequence diagram. The screenshot it takes is kept where
`PYMC_RESUME_SCREENSHOTS` points (a folder; docs/report.png was made so), else in the test's own
temporary folder. A page of profiles with markup in every string runs no script, shows no image
and requests nothing; a diagram further down the page draws its arrowheads (each diagram has its
own marker); on a phone's screen the page is laid out at the screen's width.

One browser for the module, a page per test: a few seconds, most of it Chromium starting.
"""

import json
import os
import shutil
import struct
from pathlib import Path

import pytest
from chromium import Browser
from test_untrusted_reports import HOSTILE

from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.report.page import render
from pymc_resume.report.profiles import document_of, read_document

PROFILES = Path(__file__).parent / "profiles"
FILES = ("reference.json", "reference-no-claim.json", "langgraph-sqlite-sync.json")
WIDTH, HEIGHT = 1180, 1900  # CSS pixels: the matrix and one panel with its diagram
VIOLATED_CELL = "#matrix tr[data-row='1'] td[data-id='consume-once-consumption']"

STATE = """(() => {
  const shown = [...document.querySelectorAll('.panel')].filter(p => getComputedStyle(p).display !== 'none');
  const panel = shown[0];
  const svg = panel && panel.querySelector('svg.sequence');
  return {
    hash: location.hash,
    shown: shown.map(p => p.id),
    height: panel ? panel.getBoundingClientRect().height : 0,
    steps: panel ? panel.querySelectorAll('table.steps tr').length - 1 : 0,
    lanes: svg ? [...svg.querySelectorAll('.lane-name')].map(t => t.textContent) : [],
    diagram: svg ? svg.getBoundingClientRect().height : 0,
    violation: svg ? svg.querySelector('.violation').textContent : '',
  };
})()"""

MATRIX = """[...document.querySelectorAll('#matrix tbody tr')].map(tr => ({
  source: tr.querySelector('code').textContent,
  verdicts: [...tr.querySelectorAll('td.cell')].map(td => [td.dataset.id, td.dataset.verdict]),
  changed: [...tr.querySelectorAll('td.changed')].map(td => td.dataset.id),
}))"""


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    binary = shutil.which("chromium")
    if binary is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")
    with Browser(binary, tmp_path_factory.mktemp("chromium")) as browser:
        yield browser


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", png[16:24])


def report_file(folder: Path, documents) -> Path:
    page_file = folder / "report.html"
    page_file.write_text(render(documents), encoding="utf-8")
    return page_file


def test_the_report_opens_offline_with_the_matrix_and_a_clicked_violated_cells_sequence_diagram(
    tmp_path, browser
):
    page_file = report_file(tmp_path, [read_document(PROFILES / name) for name in FILES])
    page = browser.page(WIDTH, HEIGHT)
    page.open(page_file.as_uri())

    rows = page.evaluate(MATRIX)
    for row, name in zip(rows, FILES, strict=True):
        profile = json.loads((PROFILES / name).read_text())["profiles"][0]
        assert row["source"] == name
        assert row["verdicts"] == [[cid, profile["clauses"][cid]["verdict"]] for cid in CLAUSE_IDS]
    assert [row["changed"] for row in rows] == [[], ["consume-once-consumption"], []]
    assert page.evaluate(STATE)["shown"] == []  # no panel before a click

    box = page.evaluate(
        f'(() => {{ const r = document.querySelector("{VIOLATED_CELL}")'
        ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
    )
    page.click(*box)
    state = page.evaluate(STATE)
    assert state["hash"] == "#cell-1-consume-once-consumption"
    assert state["shown"] == ["cell-1-consume-once-consumption"] and state["height"] > 300
    assert state["steps"] == 3 and state["lanes"] == ["client", "framework", "store", "sink"]
    assert state["diagram"] > 200 and "consume-once-consumption violated" in state["violation"]

    png = page.screenshot(WIDTH, HEIGHT, scale=0.75)
    assert page.requests() == [page_file.as_uri()], "the page loaded something besides itself"
    assert png_size(png) == (round(WIDTH * 0.75), round(HEIGHT * 0.75))
    keep = Path(os.environ.get("PYMC_RESUME_SCREENSHOTS") or tmp_path)
    (keep / "report.png").write_bytes(png)


ACTIVE = """[...document.querySelectorAll('*')].filter(e =>
  ['SCRIPT', 'IMG', 'IFRAME', 'OBJECT', 'EMBED', 'LINK', 'VIDEO', 'AUDIO', 'SOURCE', 'IMAGE', 'FOREIGNOBJECT']
    .includes(e.tagName.toUpperCase()) || [...e.attributes].some(a => a.name.startsWith('on'))
).map(e => e.outerHTML.slice(0, 200))"""


def test_markup_in_every_string_of_a_profile_runs_no_script_shows_no_image_and_requests_nothing(
    tmp_path, browser
):
    page_file = report_file(tmp_path, [document_of(HOSTILE, "hostile.json")])
    page = browser.page(WIDTH, HEIGHT)
    violated = "cell-0-consume-once-consumption"  # its panel, with the repro's table and diagram
    page.open(f"{page_file.as_uri()}#{violated}")
    assert page.evaluate(STATE)["shown"] == [violated]
    assert page.evaluate(ACTIVE) == []
    assert page.evaluate("document.body.textContent").count("<script>alert(1)</script>") > 20  # as text
    assert page.dialogs() == []
    assert page.requests() == [page_file.as_uri()]


TIP = """(() => {
  const line = document.querySelector('.panel:target svg.sequence line.message');
  const box = line.getBoundingClientRect();
  return [box.right + scrollX, box.top + box.height / 2 + scrollY];
})()"""


def test_a_diagram_further_down_the_page_draws_its_arrowheads(tmp_path, browser):
    """Every diagram's arrows point at its own marker: one defined by a hidden diagram higher up
    the page would draw no head. The arrow's tip looks different with its marker than without."""
    page_file = report_file(tmp_path, [read_document(PROFILES / name) for name in FILES])
    page = browser.page(WIDTH, HEIGHT)
    later = "cell-2-fork-intent"  # langgraph's: the seventh diagram of the page
    page.open(f"{page_file.as_uri()}#{later}")
    assert page.evaluate(STATE)["shown"] == [later]
    x, y = page.evaluate(TIP)
    around_the_tip = {"width": 60, "height": 80, "x": x - 45, "y": y - 40}  # roomy: a few pixels off is fine
    with_head = page.screenshot(**around_the_tip)
    page.evaluate(
        "document.querySelector('.panel:target svg.sequence line.message').removeAttribute('marker-end');"
        "new Promise(drawn => requestAnimationFrame(() => requestAnimationFrame(drawn)))"
    )
    assert page.screenshot(**around_the_tip) != with_head, "the arrow has no head"


NARROW = """(() => {
  const matrix = document.querySelector('#matrix').parentElement;
  const svg = document.querySelector('.panel:target svg.sequence');
  return {
    layout: innerWidth,
    page: document.documentElement.scrollWidth,
    matrix: [matrix.clientWidth, matrix.scrollWidth],
    diagram: svg.getBoundingClientRect().width,
  };
})()"""


def test_on_a_phone_the_page_is_laid_out_at_the_screens_width(tmp_path, browser):
    page_file = report_file(tmp_path, [read_document(PROFILES / name) for name in FILES])
    page = browser.page(390, 844, mobile=True)
    page.open(f"{page_file.as_uri()}#cell-1-consume-once-consumption")
    narrow = page.evaluate(NARROW)
    assert narrow["layout"] == 390, narrow  # the viewport, not a desktop's 980 pixels zoomed out
    assert narrow["page"] <= 390, narrow  # nothing sticks out sideways ...
    assert narrow["matrix"][1] > narrow["matrix"][0], narrow  # ... the matrix scrolls in its box
    assert narrow["diagram"] <= 390 - 16, narrow  # and the diagram shrinks to fit
