"""The layers, checked on the source: which package may import which, and where a framework
library may be imported at all. (A plain ast walk rather than import-linter: no extra install,
and it also sees `importlib.import_module("literal")`.)

- `model` (the reference semantics) never imports the bridge, the checking engines or the CLI;
- `checking` (check, explore_check, matrix) never imports the bridge or the CLI;
- `report` (profile JSON read back: the HTML report, comparisons) imports only the model and
  the foundations: it reads JSON, it runs nothing;
- `explore` (the generic explorer) imports nothing of the project but its own modules and the
  two foundations every layer shares, `errors` and `files`;
- framework libraries are imported only by the framework adapters (`bridge/adapters/`)
  and by the consume-once gate (`gate/`); Ray, the explorer's optional engine, only by
  `explore/engines/ray_engine.py`;
- inside the bridge, each subpackage (and `bridge/profile.py`) imports only what the "May
  import:" line of its docstring names, besides its own modules and the foundations: an import
  of anything else of the project (a subpackage above it, the CLI) is an arrow running back up;
- inside the explorer the same holds for each subpackage; its top-level modules are the surface
  every subpackage may build on (the model protocol, results, limits) and `search.py`, the
  driver, which nothing below imports; no two of its files import each other, round any circle.
"""

from __future__ import annotations

import ast
import re
from fnmatch import fnmatch
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pymc_resume"

FRAMEWORKS = (
    "langgraph",
    "langchain",
    "langchain_core",
    "langsmith",
    "crewai",
    "pydantic_graph",
    "pydantic_ai",
    "agent_framework",
    "llama_index",
    "workflows",
)
FRAMEWORK_HOMES = ("bridge/adapters/*", "gate/*")
# Ray is no framework under test but an optional engine of the explorer: one module has it.
ENGINE_HOMES = {"ray": ("explore/engines/ray_engine.py",)}
FOUNDATIONS = ("pymc_resume.errors", "pymc_resume.files")
# The bridge's parts whose docstrings say what they may import: its subpackages and the profile.
BRIDGE = PACKAGE / "bridge"
BRIDGE_PARTS = sorted(
    [path.name for path in BRIDGE.iterdir() if (path / "__init__.py").is_file()] + ["profile.py"]
)
# The explorer's subpackages, and its top-level modules that no subpackage builds on.
EXPLORE = PACKAGE / "explore"
EXPLORE_PARTS = sorted(path.name for path in EXPLORE.iterdir() if (path / "__init__.py").is_file())
EXPLORE_DRIVERS = ("pymc_resume.explore.search",)
FORBIDDEN = {  # folder -> project modules it must not import
    "model/": (
        "pymc_resume.bridge",
        "pymc_resume.cli",
        "pymc_resume.checking",
        "pymc_resume.gate",
        "pymc_resume.runtime",
    ),
    # The checking engines compute; the CLI renders (text lives in cli/).
    "checking/": ("pymc_resume.bridge", "pymc_resume.cli", "pymc_resume.gate"),
    # The report reads profile JSON: it runs nothing, so it needs none of what makes profiles.
    "report/": (
        "pymc_resume.bridge",
        "pymc_resume.cli",
        "pymc_resume.checking",
        "pymc_resume.explore",
        "pymc_resume.gate",
        "pymc_resume.runtime",
    ),
}


def imported_modules(source: str) -> set[str]:
    """Absolute module names a module's source imports (statements, and import_module calls
    with a literal name)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_violations(relative: str, source: str) -> list[str]:
    """What the module at `relative` (a path inside the package) imports against the rules."""
    found = []
    imports = imported_modules(source)
    for name in sorted(imports):
        top = name.split(".")[0]
        if top in FRAMEWORKS and not any(fnmatch(relative, home) for home in FRAMEWORK_HOMES):
            found.append(f"{relative} imports the framework library {name}")
        if top in ENGINE_HOMES and relative not in ENGINE_HOMES[top]:
            found.append(f"{relative} imports {name}, which only {', '.join(ENGINE_HOMES[top])} may")
        for folder, forbidden in FORBIDDEN.items():
            if relative.startswith(folder) and any(_within(name, f) for f in forbidden):
                found.append(f"{relative} imports {name}, outside its layer")
        if (
            relative.startswith("explore/")
            and _within(name, "pymc_resume")
            and not (_within(name, "pymc_resume.explore") or any(_within(name, f) for f in FOUNDATIONS))
        ):
            found.append(f"{relative} imports {name}: the explorer knows nothing of the project")
    return found


def may_import(docstring: str) -> set[str]:
    """The modules a docstring's "May import:" paragraph names in backticks, as absolute names
    (`bridge.x` is `pymc_resume.bridge.x`; a name without a dot is a subpackage of the project)."""
    paragraph = docstring.split("May import:", 1)[1].split("\n\n", 1)[0]
    names = set()
    for name in re.findall(r"`([\w.]+)`", paragraph):
        if name.startswith(("bridge.", "explore.")):
            name = "pymc_resume." + name
        names.add(name)
    return names


def bridge_part(relative: str) -> str | None:
    """The bridge part (a subpackage's folder name, or "profile.py") a module belongs to."""
    parts = relative.split("/")
    if parts[0] != "bridge" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in BRIDGE_PARTS else None


def part_docstring(part: str) -> str:
    path = BRIDGE / part if part.endswith(".py") else BRIDGE / part / "__init__.py"
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def bridge_violations(relative: str, source: str) -> list[str]:
    """What a module of the bridge imports beyond what its part's docstring allows."""
    part = bridge_part(relative)
    if part is None:
        return []
    own = "pymc_resume.bridge." + part.removesuffix(".py")
    allowed = may_import(part_docstring(part)) | {own, "pymc_resume", *FOUNDATIONS}
    found = []
    for name in sorted(imported_modules(source)):
        if not _within(name, "pymc_resume") or any(
            name == a or (a != "pymc_resume" and _within(name, a)) for a in allowed
        ):
            continue
        if (
            name.startswith("pymc_resume.")
            and name.count(".") == 1
            and name.rsplit(".", 1)[1] == "__version__"
        ):
            continue
        found.append(f"{relative} imports {name}, which the docstring of bridge/{part} does not allow")
    return found


def explore_violations(relative: str, source: str) -> list[str]:
    """What a module of the explorer imports beyond what its subpackage's docstring allows;
    for a top-level module, any subpackage or the driver (an arrow running back up)."""
    parts = relative.split("/")
    if parts[0] != "explore" or len(parts) < 2:
        return []
    found = []
    names = [n for n in sorted(imported_modules(source)) if _within(n, "pymc_resume.explore")]
    if len(parts) == 2:  # a top-level module: the surface, or the driver
        if parts[1] in ("__init__.py", "search.py"):
            return []
        for name in names:
            below = name.split(".")[2] if name.count(".") >= 2 else ""
            if below in EXPLORE_PARTS or _within(name, EXPLORE_DRIVERS[0]):
                found.append(f"{relative} imports {name}: the explorer's surface builds on no subpackage")
        return found
    part = parts[1]
    allowed = may_import(_docstring_of(part)) | {f"pymc_resume.explore.{part}"}
    for name in names:
        if name == "pymc_resume.explore" or any(_within(name, a) for a in allowed):
            continue
        found.append(f"{relative} imports {name}, which the docstring of explore/{part} does not allow")
    return found


def import_circles(package: Path) -> list[list[str]]:
    """Circles among the modules of `package` (imports inside `if TYPE_CHECKING:` excepted:
    they never run), each as the modules round it."""
    root = package.parent
    modules = {}
    for path in package.rglob("*.py"):
        dotted = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        modules[dotted] = path
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
        graph[name] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, ast.ImportFrom | ast.Import):
                continue
            targets = (
                [f"{node.module}.{a.name}" for a in node.names] + [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
            )
            found = next((t for t in targets if t in modules), None)
            if found and found != name and not name.startswith(found + "."):
                graph[name].add(found)
    circles, state = [], {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for nxt in sorted(graph[name]):
            if state.get(nxt) == "open":
                circles.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return circles


def test_every_module_keeps_to_its_layer():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative, source = path.relative_to(PACKAGE).as_posix(), path.read_text(encoding="utf-8")
        found += layer_violations(relative, source) + bridge_violations(relative, source)
        found += explore_violations(relative, source)
    assert not found, "\n".join(found)


def _docstring_of(part: str) -> str:
    return ast.get_docstring(ast.parse((EXPLORE / part / "__init__.py").read_text(encoding="utf-8"))) or ""


def test_the_explorer_is_cut_by_concept_with_no_circle():
    top = sorted(p.name for p in EXPLORE.glob("*.py"))
    assert len(top) <= 8, f"modules at explore/'s top level: {top}"
    for part in EXPLORE_PARTS:
        assert "May import:" in _docstring_of(part), f"explore/{part}'s docstring has no 'May import:'"
    assert not import_circles(EXPLORE), import_circles(EXPLORE)


def test_the_check_sees_an_arrow_running_back_up_the_explorer():
    up = [
        ("explore/store/codec.py", "pymc_resume.explore.level import partition"),
        ("explore/level/partition.py", "pymc_resume.explore.engines import workers"),
        ("explore/properties/liveness.py", "pymc_resume.explore.search import explore"),
        ("explore/validate.py", "pymc_resume.explore.store.codec import Codec"),
    ]
    allowed = [
        ("explore/level/partition.py", "pymc_resume.explore.store import persisted"),
        ("explore/engines/workers.py", "pymc_resume.explore.level.exchange import X"),
        ("explore/search.py", "pymc_resume.explore.engines.workers import X"),
    ]
    for relative, line in up:
        assert explore_violations(relative, f"from {line}\n"), (relative, line)
    for relative, line in allowed:
        assert not explore_violations(relative, f"from {line}\n"), (relative, line)


def test_the_circle_check_sees_a_circle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("from pkg.a import thing\n")
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import a\n"
    (package / "c.py").write_text(typing_only)
    assert import_circles(package) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_every_part_of_the_bridge_says_what_it_may_import():
    parts = [p.name for p in BRIDGE.iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert sorted(parts + ["profile.py"]) == BRIDGE_PARTS, "a bridge folder without an __init__.py"
    modules = sorted(p.name for p in BRIDGE.glob("*.py"))
    assert modules == ["__init__.py", "profile.py"], f"modules directly in bridge/: {modules}"
    for part in BRIDGE_PARTS:
        assert "May import:" in part_docstring(part), f"bridge/{part}'s docstring has no 'May import:' line"
        assert may_import(part_docstring(part)) or part == "hosting", (
            f"bridge/{part} names nothing it may import"
        )


def test_the_check_sees_an_arrow_running_back_up_the_bridge():
    # A planted import from a lower part of the bridge into a higher one.
    assert bridge_violations("bridge/judging/session.py", "from pymc_resume.bridge.fuzzing import fuzz\n")
    assert bridge_violations("bridge/adapter/protocol.py", "from pymc_resume.bridge.kit import process\n")
    assert bridge_violations("bridge/kit/process.py", "import pymc_resume.bridge.judging.session\n")
    assert bridge_violations("bridge/hosting/registry.py", "from pymc_resume.bridge.adapter import OK\n")
    assert bridge_violations(
        "bridge/repro/replay.py", "from pymc_resume.bridge.fuzzing.fuzz import run_fuzz\n"
    )
    assert bridge_violations("bridge/fuzzing/fuzz.py", "from pymc_resume.bridge import profile\n")
    assert bridge_violations("bridge/race/race.py", "from pymc_resume.cli.tables import table\n")
    assert bridge_violations("bridge/adapters/crewai.py", "from pymc_resume.bridge.judging import session\n")
    # What the docstrings allow, and a part's own modules.
    assert not bridge_violations(
        "bridge/judging/session.py", "from pymc_resume.bridge.hosting.host import X\n"
    )
    assert not bridge_violations("bridge/fuzzing/fuzz.py", "from pymc_resume.bridge.repro.replay import X\n")
    assert not bridge_violations("bridge/kit/warm.py", "from pymc_resume.bridge.kit.process import X\n")
    assert not bridge_violations("bridge/profile.py", "from pymc_resume.bridge.fuzzing.fuzz import X\n")
    assert not bridge_violations("bridge/adapters/reference.py", "from pymc_resume import __version__\n")


def test_the_check_sees_a_framework_imported_out_of_place():
    assert layer_violations("bridge/judging/session.py", "import langgraph.graph\n")
    assert layer_violations("model/semantics.py", "from crewai import Flow\n")
    assert layer_violations("cli/fuzz.py", "importlib.import_module('pydantic_graph')\n")
    assert layer_violations("model/semantics.py", "from pymc_resume.bridge import session\n")
    assert layer_violations("explore/search.py", "from pymc_resume.model import semantics\n")
    assert layer_violations("checking/matrix.py", "from pymc_resume.cli.tables import table\n")
    assert layer_violations("report/page.py", "from pymc_resume.bridge.profile import Profile\n")
    assert not layer_violations("report/page.py", "from pymc_resume.model.contract import CLAUSE_IDS\n")
    assert layer_violations("explore/search.py", "import ray\n")
    assert not layer_violations("explore/engines/ray_engine.py", "import ray\n")
    assert not layer_violations("bridge/adapters/langgraph.py", "from langgraph.graph import StateGraph\n")
    assert not layer_violations("gate/_gate.py", "import langgraph\n")
    assert not layer_violations("explore/search.py", "from pymc_resume.errors import BadInput\n")
