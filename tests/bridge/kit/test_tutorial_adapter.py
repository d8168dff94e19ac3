"""docs/adapters.md's tutorial: its executor (examples/tutorial_executor.py) and adapter
(examples/tutorial_adapter.py) pass `pymc-resume profile` with every id holding; the page's
code is the adapter's; the page covers what an adapter author must know; an adapter class that
misses a protocol method is refused in one line before any step runs."""

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

from pymc_resume.model.contract import CLAUSE_IDS

ROOT = Path(__file__).resolve().parents[3]
EXECUTOR = ROOT / "examples" / "tutorial_executor.py"
ADAPTER = ROOT / "examples" / "tutorial_adapter.py"
KINDS_ADAPTER = ROOT / "examples" / "kinds_adapter.py"
DOCS = ROOT / "docs" / "adapters.md"
SPEC = f"{ADAPTER}:TutorialAdapter"


def cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "pymc_resume", *args], capture_output=True, text=True, cwd=cwd
    )


def test_the_tutorial_adapter_holds_every_id(tmp_path):
    run = cli(
        "profile",
        SPEC,
        "--bounds",
        "small",
        "--examples",
        "2",
        "--seed",
        "1",
        "--json",
        "p.json",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    [profile] = json.loads((tmp_path / "p.json").read_text())["profiles"]
    verdicts = {cid: cell["verdict"] for cid, cell in profile["clauses"].items()}
    assert verdicts == dict.fromkeys(CLAUSE_IDS, "holds"), verdicts


def code_lines(path: Path) -> int:
    """Lines holding code: blank lines, comments and docstrings aside."""
    text = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines = set()
    skip = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in skip:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def test_the_executor_is_at_most_a_hundred_lines_of_code():
    assert code_lines(EXECUTOR) <= 100


def _code(line: str) -> str:
    return line.split("  # ")[0].strip()


def test_the_pages_python_is_the_adapters():
    """Every line of the page's Python blocks is a line of an example adapter (the tutorial's,
    or the one for built-in node kinds), comments aside."""
    adapter = {_code(line) for path in (ADAPTER, KINDS_ADAPTER) for line in path.read_text().splitlines()}
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 4
    missing = [
        line for block in blocks for line in map(_code, block.splitlines()) if line and line not in adapter
    ]
    assert not missing, missing


def test_the_page_covers_what_an_author_must_know():
    page = DOCS.read_text()
    for heading in (
        "### When the framework does not run your node code stage by stage",  # its own state and checkpoints
        "### Where crash points and race windows go",
        "**Load and claim in one call.**",
        "**Steps that differ from the model's.**",
        "**A fork's observed history begins with the parent's.**",
        '### What "dead" means',
        "### Warm clients",
        "## Frameworks with built-in node kinds",
        "### How the observation and the effect keys decide verdicts",
        "### Schemas with size bounds",
        "**Joining `profile --all`.**",
    ):
        assert heading in page, heading


def test_an_adapter_missing_a_protocol_method_is_one_line_exit_2_before_any_step(tmp_path):
    (tmp_path / "half.py").write_text(
        "from pymc_resume.bridge.adapters.reference import ReferenceAdapter\n\n"
        "class Half(ReferenceAdapter):\n"
        "    fork = observe = None\n\n"
        "    def start(self, *args):\n"
        "        raise AssertionError('no step may run')\n"
    )
    (tmp_path / "nohooks.py").write_text(
        "from pymc_resume.bridge.kit import ChildProcessAdapter\n\n"
        "class NoHooks(ChildProcessAdapter):\n"
        "    def client_start(self, thread):\n"
        "        raise AssertionError('no step may run')\n\n"
        "    fork = update = observe = client_start\n"
    )
    expected = {
        "half.py:Half": (
            r"adapter 'half.py:Half' does not implement the adapter protocol: missing observe, fork \("
        ),
        "nohooks.py:NoHooks": (
            r"NoHooks \(a ChildProcessAdapter\) does not define client_recover, client_resume:"
        ),
    }
    for spec, message in expected.items():
        for command in ("profile", "fuzz"):
            run = cli(command, spec, "--examples", "1", cwd=tmp_path)
            assert run.returncode == 2
            assert run.stderr.count("\n") == 1, run.stderr
            assert re.search(message, run.stderr), run.stderr
            assert "no step may run" not in run.stderr
