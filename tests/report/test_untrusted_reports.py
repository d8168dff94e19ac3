"""Profile JSON from strangers, as `report`, `diff` and `profile --baseline` read it: a baseline
kept in a repository, a profile attached to a bug report.

Three kinds of generated documents, each built from a real profile (`profiles/
reference-no-claim.json`: one configuration with a violated cell and its repro's whole story):

- broken ones (a value of the wrong type, out of range or too long where the schema wants
  another; a required key removed; bytes that are no JSON, no UTF-8, nested too deep, numbers
  JSON has not): every command refuses them in one line, exit 2, before any work (`--baseline`
  before profiling), nothing written, no traceback;
- hostile but valid ones (markup and terminal escapes in every string): `report` writes a page
  in which no value became markup, `diff` prints them escaped;
- any value anywhere (a random path of the document replaced by a random JSON value): every
  command ends with its result or a one-line refusal, never an internal error.

Then, in real processes with a deadline, the inputs that used to hang or exhaust a reader: a
FIFO, a device, a file larger than the limit, profiles too large together. The cases run
in-process through click's runner (`test_bad_input.run_refused`), a few milliseconds each.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_bad_input import CONTROL, QUICK, THOROUGH, _fresh, invoke_within_deadline, run_refused

from pymc_resume.report.profiles import MAX_TOTAL_BYTES, MAX_TOTAL_VALUES

PROFILES = Path(__file__).parent / "profiles"
FIXTURE = PROFILES / "reference-no-claim.json"
VALID = json.loads(FIXTURE.read_text())
OTHER = PROFILES / "reference.json"  # the same configuration, holding: what a diff compares with
CELL = ("profiles", 0, "clauses", "consume-once-consumption")  # the violated cell
PROFILE = ("profiles", 0)
MARKUP = "\"'><script>alert(1)</script><img src=x onerror=alert(2)><svg onload=alert(3)>&amp;\x1b[2J\u202e"

# -- 1. broken documents ----------------------------------------------------------------------

# Special numbers and text that json.dumps cannot write: put in as text after dumping.
HUGE_DIGITS, NAN, INFINITY, OVERFLOW = "@huge@", "@nan@", "@inf@", "@overflow@"
RAW = {HUGE_DIGITS: "9" * 5000, NAN: "NaN", INFINITY: "-Infinity", OVERFLOW: "1e999"}
LONE_SURROGATE = "v\ud800"
TOO_LONG = "x" * 60_000

WRONG = {  # what a value of each kind must not be
    "text": [3, True, [], {}, LONE_SURROGATE, TOO_LONG, HUGE_DIGITS],
    "name": [3, False, ["a"], {"a": 1}, LONE_SURROGATE, "n" * 600, NAN],
    "count": ["3", -1, 1.5, True, [], {}, 10**16, HUGE_DIGITS, NAN, INFINITY, OVERFLOW],
    "integer": ["3", 1.5, False, [1], {}, 10**16, HUGE_DIGITS, INFINITY],
    "seed": ["3", 1.5, False, [1], {}, 10**41, HUGE_DIGITS, INFINITY],
    "seconds": ["3", -1, True, [], {}, 10**10, NAN, INFINITY, OVERFLOW],
    "boolean": ["true", 1, 0, [], {}],
    "verdict": ["fine", "HOLDS", 3, [], {}],
    "list": ["x", 3, {}, True],
    "object": ["x", 3, [], True],
    "step": ["x", -1, 1.5, True, [], 10**6],
}
# Where the fixture has a value of a kind; "?" marks a kind that may be null.
TYPED = {
    ("profiles",): "list",
    PROFILE: "object",
    (*PROFILE, "adapter"): "name",
    (*PROFILE, "version"): "name",
    (*PROFILE, "config"): "name",
    (*PROFILE, "adapter_options"): "object?",
    (*PROFILE, "adapter_options", "fault"): "scalar",
    (*PROFILE, "operations"): "object",
    (*PROFILE, "operations", "start"): "text",
    (*PROFILE, "variants"): "object",
    (*PROFILE, "variants", "start"): "list",
    (*PROFILE, "variants", "start", 0, "name"): "name",
    (*PROFILE, "variants", "start", 0, "call"): "text",
    (*PROFILE, "clauses"): "object",
    (*PROFILE, "notes"): "list",
    (*PROFILE, "notes", 0): "text",
    (*PROFILE, "effects"): "object?",
    (*PROFILE, "effects", "fires"): "count",
    (*PROFILE, "effects", "hidden_refire_examples", 0): "text",
    (*PROFILE, "effects", "key"): "text?",
    (*PROFILE, "scenarios"): "count",
    (*PROFILE, "examples"): "count",
    (*PROFILE, "seconds"): "seconds",
    (*PROFILE, "finished"): "boolean",
    (*PROFILE, "error"): "text?",
    (*PROFILE, "clauses", "liveness"): "object",
    (*PROFILE, "clauses", "liveness", "verdict"): "verdict",
    (*PROFILE, "clauses", "liveness", "notes"): "list",
    (*CELL, "verdict"): "verdict",
    (*CELL, "reason"): "text?",
    (*CELL, "repro"): "text?",
    (*CELL, "variants"): "list",
    (*CELL, "trace"): "list?",
    (*CELL, "trace", 0): "object",
    (*CELL, "trace", 0, "action"): "name",
    (*CELL, "trace", 0, "thread"): "count",
    (*CELL, "trace", 0, "crash"): "object?",
    (*CELL, "trace", 0, "crash", "stage"): "integer",
    (*CELL, "trace", 0, "crash", "when"): "name",
    (*CELL, "repro_steps"): "count?",
    (*CELL, "replays"): "object?",
    (*CELL, "replays", "of"): "count",
    (*CELL, "replays", "reproduced"): "count",
    (*CELL, "first_failure", "seconds"): "seconds",
    (*CELL, "first_failure", "examples"): "count",
    (*CELL, "outcomes"): "list?",
    (*CELL, "outcomes", 0, 0): "object",
    (*CELL, "outcomes", 0, 0, "status"): "name",
    (*CELL, "violated_at"): "step?",
    (*CELL, "observed"): "object?",
    (*CELL, "observed", "stores"): "list",
    (*CELL, "observed", "stores", 0, 0, "checkpoints"): "count",
    (*CELL, "observed", "stores", 0, 0, "stage"): "integer?",
    (*CELL, "observed", "stores", 0, 0, "run"): "name",
    (*CELL, "observed", "stores", 0, 0, "inputs"): "object?",
    (*CELL, "observed", "events"): "list",
    (*CELL, "observed", "events", 0, "thread"): "count",
    (*CELL, "observed", "events", 0, "stage"): "integer",
    (*CELL, "observed", "events", 0, "applied"): "boolean",
    ("bounds",): "object?",
    ("seed",): "seed?",
    ("examples",): "count?",
    ("skipped",): "list?",
}
REQUIRED = [  # keys without which a document is not a profile document
    ("profiles",),
    (*PROFILE, "adapter"),
    (*PROFILE, "version"),
    (*PROFILE, "config"),
    (*PROFILE, "clauses"),
    (*PROFILE, "clauses", "liveness"),
    (*PROFILE, "variants", "start", 0, "name"),
    (*CELL, "verdict"),
    (*CELL, "trace", 0, "action"),
    (*CELL, "replays", "of"),
    (*CELL, "first_failure", "seconds"),
    (*CELL, "observed", "stores", 0, 0, "checkpoints"),
    (*CELL, "observed", "events", 0, "thread"),
]
WHOLE_FILES = [  # bytes that are no profile document at all
    b"",
    b"not json",
    b"\xff\xfe{}",
    "\ufeff{}".encode(),
    FIXTURE.read_bytes()[:5000],
    b"[]",
    b"42",
    b'"profiles"',
    b'{"profiles": {}}',
    b'{"profiles": [' + b"[" * 100_000,
    b'{"profiles": [], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"profiles": [NaN]}',
    b'{"profiles": [], "seed": ' + b"9" * 5000 + b"}",
    b'{"profiles": [], "pad": [' + b"0," * (MAX_TOTAL_VALUES + 1) + b"0]}",
]


def at(document: dict, path: tuple) -> tuple[object, object]:
    """(the container of the value at `path`, its key)."""
    for key in path[:-1]:
        document = document[key]
    return document, path[-1]


def dumped(document: dict) -> bytes:
    text = json.dumps(document)
    for mark, raw in RAW.items():
        text = text.replace(json.dumps(mark), raw)
    return text.encode()


@st.composite
def broken_documents(draw) -> bytes:
    """A profile document with one thing wrong (see the module docstring)."""
    document = copy.deepcopy(VALID)
    mistake = draw(st.sampled_from(["type", "type", "missing", "unknown id", "too many", "whole file"]))
    if mistake == "whole file":
        return draw(st.sampled_from(WHOLE_FILES))
    if mistake == "missing":
        container, key = at(document, draw(st.sampled_from(REQUIRED)))
        del container[key]
    elif mistake == "unknown id":
        clauses = document["profiles"][0]["clauses"]
        clauses[draw(st.sampled_from(["liveness2", "", "<b>id</b>"]))] = clauses["liveness"]
    elif mistake == "too many":
        container, key = at(document, draw(st.sampled_from([(*PROFILE, "notes"), (*CELL, "trace")])))
        container[key] = container[key] * 12_000
    else:
        path, kind = draw(st.sampled_from([(p, k) for p, k in TYPED.items() if k != "scalar"]))
        wrong = [v for v in WRONG[kind.rstrip("?")] if not (kind.endswith("?") and v is None)]
        container, key = at(document, path)
        container[key] = draw(st.sampled_from(wrong + ([] if kind.endswith("?") else [None])))
    return dumped(document)


COMMANDS = {  # the commands that read a profile, with the document as "p.json"
    "report": ["report", "p.json", str(OTHER), "-o", "r.html"],
    "diff": ["diff", str(OTHER), "p.json"],
    "diff as baseline": ["diff", "p.json", str(OTHER), "--json", "d.json"],
    "baseline": ["profile", "reference", "--examples", "0", "--baseline", "p.json", "--json", "run.json"],
}


@QUICK
@given(data=broken_documents(), command=st.sampled_from(sorted(COMMANDS)))
def test_broken_profiles_are_refused_in_one_line_before_any_work(tmp_path, data, command):
    folder = _fresh(tmp_path)
    (folder / "p.json").write_bytes(data)
    line = run_refused(COMMANDS[command], folder)
    assert "p.json" in line, line  # the refusal names the file
    assert not set(line) & CONTROL and len(line) < 2200, line[-300:]


def test_every_typed_position_the_cases_use_is_where_the_fixture_says():
    """The generator's map of the fixture is right: each path exists and holds its kind."""
    kinds = {
        "list": list,
        "object": dict,
        "name": str,
        "text": str,
        "count": int,
        "integer": int,
        "seed": int,
        "seconds": (int, float),
        "boolean": bool,
        "verdict": str,
        "step": int,
        "scalar": (str, int),
    }
    for path, kind in TYPED.items():
        container, key = at(VALID, path)
        value = container[key]
        assert isinstance(value, kinds[kind.rstrip("?")]) or (kind.endswith("?") and value is None), path
    for path in REQUIRED:
        container, key = at(VALID, path)
        assert key in container, path


# -- 2. hostile but valid documents -----------------------------------------------------------

FREE_KEYS = {"operations", "variants", "adapter_options", "bounds"}  # maps whose keys are names


def with_markup(value, key: str = "", limit: int = 400):
    """`value` with markup and escapes in every string and every free key (names of operations,
    options), kept where the schema wants a word from a list (verdicts, "drain", stage keys)."""
    if isinstance(value, dict):
        free = key in FREE_KEYS
        return {(MARKUP + k if free else k): with_markup(v, k, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [with_markup(v, key, limit) for v in value]
    if isinstance(value, str) and key not in ("verdict", "violated_at"):
        return (MARKUP + value)[:limit]
    return value


HOSTILE = with_markup(VALID)
ALLOWED_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "div", "span", "table"),
    *("thead", "tbody", "tr", "th", "td", "a", "code", "br", "small", "strong", "em", "ul", "li"),
    *("section", "svg", "defs", "marker", "path", "text", "line", "g", "rect"),
}


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def assert_inert(page: str) -> None:
    """No value of a profile became markup: only the page's own elements, no event handler, no
    link that runs script, no load of any kind, and the policy that forbids them first."""
    parser = Tags()
    parser.feed(page)
    for tag, attrs in parser.tags:
        assert tag in ALLOWED_TAGS, (tag, attrs)
        for name, value in attrs:
            assert not name.startswith("on") and name not in ("src", "srcdoc", "formaction"), (tag, name)
            assert not (value or "").strip().lower().startswith(("javascript:", "data:")), (tag, name, value)
    first = [dict(attrs) for tag, attrs in parser.tags[:4]]  # <html>, <head>, <meta charset>, then:
    assert first[3]["http-equiv"] == "Content-Security-Policy", first
    assert first[3]["content"].startswith("default-src 'none'; style-src 'unsafe-inline'"), first
    assert "<script" not in page and "\x1b" not in page and "\u202e" not in page


def test_markup_in_every_string_of_a_profile_stays_text(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(HOSTILE))
    assert run_cli(["report", "p.json", "-o", "r.html"], tmp_path).exit_code == 0
    page = (tmp_path / "r.html").read_text()
    assert_inert(page)
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") > 50  # the markup is there, as text
    assert "\\x1b[2J" in page and "\\u202e" in page  # escapes shown, not obeyed


def test_markup_in_every_field_numbers_included_is_refused_in_one_line(tmp_path):
    def everywhere(value, key=""):
        if isinstance(value, dict):
            return {k: everywhere(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [everywhere(v, key) for v in value]
        return MARKUP

    (tmp_path / "p.json").write_text(json.dumps(everywhere(VALID)))
    line = run_refused(["report", "p.json", "-o", "r.html"], tmp_path)
    assert "p.json" in line


@QUICK
@given(command=st.sampled_from(["diff", "diff as baseline"]), rows=st.integers(1, 3))
def test_a_diff_of_hostile_profiles_prints_them_escaped(tmp_path, command, rows):
    folder = _fresh(tmp_path)
    hostile = copy.deepcopy(HOSTILE)
    hostile["profiles"] = [
        {**hostile["profiles"][0], "config": f"{MARKUP}{i}", "adapter": "reference"} for i in range(rows)
    ]
    other = copy.deepcopy(hostile)
    for profile in other["profiles"]:
        profile["clauses"]["liveness"]["verdict"] = "violated"
    (folder / "p.json").write_text(json.dumps(hostile))
    (folder / "o.json").write_text(json.dumps(other))
    args = ["diff", "o.json", "p.json"] if command == "diff" else ["diff", "p.json", "o.json"]
    result = run_cli(args, folder)
    assert result.exit_code == (0 if command == "diff" else 1), result.output
    assert not set(result.stdout) & CONTROL and "\\x1b[2J" in result.stdout
    assert max(map(len, result.stdout.splitlines())) < 2200


# -- 3. any value anywhere --------------------------------------------------------------------


def paths(value, prefix=()) -> list[tuple]:
    """Every path of a JSON document, containers included."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value[:3]):  # the first few entries of a list stand for all
            found += paths(inner, (*prefix, i))
    return found


ALL_PATHS = paths(VALID)
JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
        st.sampled_from([MARKUP, LONE_SURROGATE, "drain", "holds", "violated", "-1", "3", "", TOO_LONG]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def mutated_documents(draw) -> bytes:
    document = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(ALL_PATHS))
        try:
            container, key = at(document, path)
            if draw(st.booleans()) or not isinstance(container, dict):
                container[key] = draw(JSON_VALUES)
            else:
                del container[key]
        except (KeyError, IndexError, TypeError):
            pass  # an earlier change removed or replaced the path
    return dumped(document)


class Result:
    def __init__(self, exit_code: int, stdout: str, stderr: str) -> None:
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr
        self.output = stdout + stderr


def run_cli(args: list[str], folder: Path) -> Result:
    """Run the CLI on `args` in `folder` within the deadline; assert it ended as a command
    should: its result, or a one-line error (exit 2), never a traceback or an internal error."""
    result = invoke_within_deadline(args, folder)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output[-600:]
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("pymc-resume: error: "), result.stderr
    return Result(result.exit_code, result.stdout, result.stderr)


@QUICK
@given(data=mutated_documents())
def test_any_value_anywhere_gives_a_page_or_one_line(tmp_path, data):
    folder = _fresh(tmp_path)
    (folder / "p.json").write_bytes(data)
    report = run_cli(["report", "p.json", "-o", "r.html"], folder)
    assert report.exit_code in (0, 2), report.output
    if report.exit_code == 0:
        assert_inert((folder / "r.html").read_text())
    diff = run_cli(["diff", str(OTHER), "p.json"], folder)
    assert diff.exit_code in (0, 1, 2), diff.output
    if report.exit_code == 2:  # what report refuses, diff refuses too
        assert diff.exit_code == 2


# -- 4. the gate fails closed -----------------------------------------------------------------


def test_a_baseline_that_shares_no_configuration_with_the_run_is_refused_before_it(tmp_path):
    line = run_refused(
        [
            "profile",
            "reference",
            "--examples",
            "0",
            "--baseline",
            str(PROFILES / "langgraph-sqlite-sync.json"),
        ],
        tmp_path,
    )
    assert "has no configuration this run profiles" in line and "langgraph sqlite/sync" in line


def test_a_baseline_with_two_profiles_of_one_configuration_is_refused_before_the_run(tmp_path):
    twice = copy.deepcopy(VALID)
    twice["profiles"] *= 2
    (tmp_path / "b.json").write_text(json.dumps(twice))
    line = run_refused(["profile", "reference", "--examples", "0", "--baseline", "b.json"], tmp_path)
    assert "two profiles of reference sqlite" in line


# -- 5. files that block or are too large, in real processes ----------------------------------

DEADLINE = 30.0


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        stdin=subprocess.DEVNULL,
    )


def assert_refused(run: subprocess.CompletedProcess, says: str) -> None:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, (run.returncode, run.stdout[-400:], run.stderr[-400:])
    assert len(lines) == 1 and lines[0].startswith("pymc-resume: error: ") and says in lines[0], run.stderr
    assert run.stdout == ""


@pytest.mark.parametrize("command", ["report", "diff", "baseline"])
def test_a_fifo_a_device_and_a_giant_are_refused_at_once(tmp_path, command):
    os.mkfifo(tmp_path / "fifo.json")
    with open(tmp_path / "giant.json", "wb") as giant:  # sparse: nothing to read, all to refuse
        giant.truncate(MAX_TOTAL_BYTES + 1)
    for name, says in [
        ("fifo.json", "not a regular file"),
        ("/dev/zero", "not a regular file"),
        ("giant.json", f"more than the {MAX_TOTAL_BYTES:,} allowed"),
    ]:
        args = {
            "report": ["report", name, "-o", "r.html"],
            "diff": ["diff", str(OTHER), name],
            "baseline": ["profile", "reference", "--examples", "0", "--baseline", name],
        }[command]
        assert_refused(cli(*args, cwd=tmp_path), says)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.json", "giant.json"]


def test_profiles_too_large_together_are_refused_before_any_is_parsed(tmp_path):
    padded = {**VALID, "padding": "x" * (MAX_TOTAL_BYTES // 2)}  # an unknown key: tolerated
    (tmp_path / "big.json").write_text(json.dumps(padded))
    alone = cli("report", "big.json", "-o", "one.html", cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    assert "x" * 100 not in (tmp_path / "one.html").read_text()  # unknown keys are never shown
    together = cli("report", "big.json", "big.json", "-o", "two.html", cwd=tmp_path)
    assert_refused(together, f"more than {MAX_TOTAL_BYTES:,} bytes together")
    assert not (tmp_path / "two.html").exists()


# -- the slow set: the same generators, many more cases ---------------------------------------


@pytest.mark.slow
@THOROUGH
@given(data=st.data())
def test_many_more_profiles_from_strangers(tmp_path, data):
    folder = _fresh(tmp_path)
    if data.draw(st.booleans()):
        (folder / "p.json").write_bytes(data.draw(broken_documents()))
        run_refused(COMMANDS[data.draw(st.sampled_from(sorted(COMMANDS)))], folder)
    else:
        (folder / "p.json").write_bytes(data.draw(mutated_documents()))
        report = run_cli(["report", "p.json", "-o", "r.html"], folder)
        assert report.exit_code in (0, 2)
        if report.exit_code == 0:
            assert_inert((folder / "r.html").read_text())


# -- 6. what one value can make the page draw -------------------------------------------------


def test_a_long_text_is_drawn_whole_once_however_often_the_document_points_at_it(tmp_path):
    """A framework call of 20,000 characters named by every step of 1,000-step repros in every
    cell, and a reason of 20,000 quotes: each whole once on the page (the operations table, the
    cell's panel), cut wherever it repeats (the steps, the diagrams, the tooltips)."""
    call, reason = "C" * 20_000, '"' * 20_000
    cell = {"verdict": "violated", "reason": reason, "trace": [{"action": "a", "variant": "n"}] * 1000}
    profile = {
        "adapter": "x",
        "version": "1",
        "config": "c",
        "operations": {"a": "the call"},
        "variants": {"a": [{"name": "n", "call": call}]},
        "clauses": {cid: {**cell, "variants": ["a: n"] * 200} for cid in VALID["profiles"][0]["clauses"]},
    }
    (tmp_path / "p.json").write_text(json.dumps({"profiles": [profile]}))
    assert run_cli(["report", "p.json", "-o", "r.html"], tmp_path).exit_code == 0
    page = (tmp_path / "r.html").read_text()
    assert page.count(call) == 1 and page.count("&quot;" * 20_000) == 9  # the panels: whole
    cut = [len(run) for run in re.findall("C+", page) if len(run) < len(call)]  # elsewhere: cut
    assert max(cut) < 300 and sum(cut) < 50 * len(call), (max(cut), sum(cut))
    assert len(page) < 5 * 2**20, len(page)


def test_a_page_past_its_limit_is_refused_in_one_line_and_not_written(tmp_path, monkeypatch):
    from pymc_resume.report import page

    monkeypatch.setattr(page, "MAX_PAGE", 30_000)  # the page of these two has 45,085
    line = run_refused(["report", str(FIXTURE), str(OTHER), "-o", "r.html"], tmp_path)
    assert "would have more than 30,000 characters: report fewer profiles at once" in line


def test_a_file_name_with_escapes_is_printed_escaped(tmp_path):
    name = "b\x1b[2J\u202e.json"
    (tmp_path / name).write_text(FIXTURE.read_text())
    result = run_cli(["diff", name, str(OTHER)], tmp_path)
    assert result.exit_code == 0 and not set(result.output) & CONTROL and "\\x1b[2J" in result.output
