"""The layers, checked on the source: which package may import which, and where a framework
library may be imported at all. (A plain ast walk rather than import-linter: no extra install,
and it also sees `importlib.import_module("literal")`.)

- `model` (the reference semantics) never imports the bridge, the checking engines or the CLI;
- `checking` (check, explore_check, matrix) never imports the bridge or the CLI;
- `explore` (the generic explorer) imports nothing of the project but its own modules and the
  two foundations every layer shares, `errors` and `files`;
- framework libraries are imported only by the framework adapters (`bridge/adapters/`)
  and by the consume-once gate (`gate/`); Ray, the explorer's optional engine, only by
  `explore/ray_engine.py`.
"""

from __future__ import annotations

import ast
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
ENGINE_HOMES = {"ray": ("explore/ray_engine.py",)}
FOUNDATIONS = ("pymc_resume.errors", "pymc_resume.files")
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


def test_every_module_keeps_to_its_layer():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += layer_violations(path.relative_to(PACKAGE).as_posix(), path.read_text(encoding="utf-8"))
    assert not found, "\n".join(found)


def test_the_check_sees_a_framework_imported_out_of_place():
    assert layer_violations("bridge/session.py", "import langgraph.graph\n")
    assert layer_violations("model/semantics.py", "from crewai import Flow\n")
    assert layer_violations("cli/fuzz.py", "importlib.import_module('pydantic_graph')\n")
    assert layer_violations("model/semantics.py", "from pymc_resume.bridge import session\n")
    assert layer_violations("explore/search.py", "from pymc_resume.model import semantics\n")
    assert layer_violations("checking/matrix.py", "from pymc_resume.cli.tables import table\n")
    assert layer_violations("explore/search.py", "import ray\n")
    assert not layer_violations("explore/ray_engine.py", "import ray\n")
    assert not layer_violations("bridge/adapters/langgraph.py", "from langgraph.graph import StateGraph\n")
    assert not layer_violations("gate/_gate.py", "import langgraph\n")
    assert not layer_violations("explore/search.py", "from pymc_resume.errors import BadInput\n")
