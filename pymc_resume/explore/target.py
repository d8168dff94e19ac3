"""Finding a user's model from a command-line TARGET: `module:factory` or `path/to/file.py:factory`.

The factory is a callable returning the model (a class is one). A file is loaded as a module
under a name derived from its absolute path, the same in every process, and registered in
`sys.modules`: a recovered run loads it again under the same name, and classes defined in it
can be found by name (the plain codec records a state's class by module and name). Its folder
goes first on `sys.path`, so that the file can import its neighbours. Every failure is a
`BadInput` naming the target and what is wrong.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pymc_resume.errors import BadInput

FORM = "expected module:factory or path/to/file.py:factory"


FILE_MODULE_PREFIX = "pymc_resume_model_"  # the modules files are loaded as


def _module_name(path: Path) -> str:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    return f"{FILE_MODULE_PREFIX}{path.stem}_{digest}"


def load_file(path: str) -> ModuleType:
    """The model file at `path` loaded as `explore path:factory` loads it (same module name),
    as another process must before it can unpickle a model or state defined there."""
    return _load_file(Path(path), path)


def is_file_module(name: str) -> bool:
    """Whether module `name` is a model file loaded by path (not importable by name elsewhere
    unless loaded the same way)."""
    return name.startswith(FILE_MODULE_PREFIX)


def _load_file(path: Path, target: str) -> ModuleType:
    path = path.resolve()
    if not path.is_file():
        raise BadInput(f"{target}: no such file {path}")
    name = _module_name(path)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # not a file Python can load (no .py suffix)
        raise BadInput(f"{target}: {path.name} is not a Python file ({FORM})")
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        raise BadInput(f"{target}: loading {path.name} raised {_error(error)}") from None
    return module


def _load_module(name: str, target: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        raise BadInput(f"{target}: no module named {error.name!r} ({FORM})") from None
    except Exception as error:
        raise BadInput(f"{target}: importing {name} raised {_error(error)}") from None


def _error(error: BaseException) -> str:
    where = ""
    if isinstance(error, SyntaxError) and error.lineno:
        where = f" at line {error.lineno}"
    return f"{type(error).__name__}{where}: {error}"


def is_file_target(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def load_factory(target: str):
    """The factory TARGET names."""
    where, colon, name = target.rpartition(":")
    if not colon or not where or not name.isidentifier():
        raise BadInput(f"{target}: {FORM}")
    module = _load_file(Path(where), target) if is_file_target(where) else _load_module(where, target)
    factory = getattr(module, name, None)
    if factory is None:
        raise BadInput(f"{target}: {where} has no {name!r}")
    if not callable(factory):
        raise BadInput(
            f"{target}: {name} must be a callable returning the model, got {type(factory).__name__}"
        )
    return factory


def load_model(target: str):
    """The model TARGET's factory returns."""
    factory = load_factory(target)
    try:
        return factory()
    except Exception as error:
        raise BadInput(f"{target}: calling {factory.__name__}() raised {_error(error)}") from None


def absolute(target: str) -> str:
    """TARGET with a file's path made absolute (what a checkpoint records, for --recover)."""
    where, _, name = target.rpartition(":")
    if is_file_target(where):
        return f"{Path(where).resolve()}:{name}"
    return target
