"""The report in a real browser: Debian's headless Chromium (installed by `.ci/run`) opens the
page from a file, offline, over the DevTools protocol (`chromium.py`): it shows the matrix as
the JSON says, loads nothing but the page itself, and a real click on a violated cell opens that
cell's panel with its step table and its sequence diagram. The screenshot it takes is kept where
`PYMC_RESUME_SCREENSHOTS` points (a folder; docs/report.png was made so), else in the test's own
temporary folder.

One browser, one page: a few seconds, most of it Chromium starting.
"""

import json
import os
import shutil
import struct
from pathlib import Path

import pytest
from chromium import Browser

from pymc_resume.model.contract import CLAUSE_IDS
from pymc_resume.report.page import render
from pymc_resume.report.profiles import read_document

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


@pytest.fixture
def chromium() -> str:
    binary = shutil.which("chromium")
    if binary is None:
        pytest.skip("Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")
    return binary


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", png[16:24])


def test_the_report_opens_offline_with_the_matrix_and_a_clicked_violated_cells_sequence_diagram(
    tmp_path, chromium
):
    page_file = tmp_path / "report.html"
    page_file.write_text(render([read_document(PROFILES / name) for name in FILES]), encoding="utf-8")
    with Browser(chromium, tmp_path / "chromium") as browser:
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
        requests = page.requests()
    assert requests == [page_file.as_uri()], "the page loaded something besides itself"
    assert png_size(png) == (round(WIDTH * 0.75), round(HEIGHT * 0.75))
    keep = Path(os.environ.get("PYMC_RESUME_SCREENSHOTS") or tmp_path)
    (keep / "report.png").write_bytes(png)
