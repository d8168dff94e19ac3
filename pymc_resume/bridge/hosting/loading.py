"""Adapters named, and loaded only where adapter code may run.

The command's own process never imports an adapter's module: the module is user code (or a
framework's, which may start threads, hang or end the process at import), and the command must
outlive whatever it does. So a command holds an `AdapterRef`, the adapter's name and where its
class is (`module:Class` or `path/to/file.py:Class`), and an `AdapterBuilder`, the ref with the
constructor's options; both are plain data, pickled as such. `AdapterRef.load()`, which imports
the module, runs only in a host (`host.py`), a template (`template.py`) or a child that reads
what the command needs to know (`child.py`), each under a deadline.

`load_checked` is what a host runs before it builds the adapter: the class, checked against the
adapter protocol, with the options bound against its constructor. Its failures are exceptions
whose class names say what is wrong (`AdapterNotFound`, `NotAnAdapter`, `UnknownOptions`); the
host passes the class name and message back, and the registry turns them into one line.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

import attrs

# Methods every adapter class has (an operation its framework cannot express, declared in
# `unsupported`, may be missing). Attributes such as `name` and `version` may be set by the
# constructor, so they are checked on the built adapter.
REQUIRED_METHODS = ("options", "open", "close", "start", "recover", "observe")
OPERATION_METHODS = {
    "resume": "resume",
    "resume-together": "resume_together",
    "fork": "fork",
    "update": "update",
}


class AdapterNotFound(Exception):
    """The module cannot be imported, or has no such class."""


class NotAnAdapter(Exception):
    """What the spec names is not a class of the adapter protocol."""


class UnknownOptions(Exception):
    """The constructor does not take the options given."""


@attrs.frozen
class AdapterRef:
    """An adapter as the command knows it: `spec`, the name it was given by (a built-in name,
    an entry point's, `module:Class`, `path/to/file.py:Class`), and `target`, where its class
    is (`module:Class` or `path/to/file.py:Class`)."""

    spec: str
    target: str

    @classmethod
    def of_class(cls, adapter_class: type, spec: str | None = None) -> AdapterRef:
        """The ref of a class already imported (a test's, or the plugin user's own)."""
        target = f"{adapter_class.__module__}:{adapter_class.__qualname__}"
        return cls(spec or target, target)

    @property
    def module_name(self) -> str:
        return self.target.rpartition(":")[0]

    @property
    def class_name(self) -> str:
        return self.target.rpartition(":")[2]

    def load(self) -> type:
        """Import the module and return what `target` names (in a host, a template or a
        child only; see the module docstring). Raises AdapterNotFound."""
        module = import_target_module(self.module_name, self.spec)
        found: object = module
        for part in self.class_name.split("."):
            found = getattr(found, part, None)
            if found is None:
                raise AdapterNotFound(f"{self.module_name!r} has no {self.class_name!r}")
        return found  # type: ignore[return-value]


@attrs.frozen
class AdapterBuilder:
    """Builds a fresh adapter of one configuration when called: in a host, never in the command.
    `info` is what the adapter declares, read when the registry's `factory` built one up front;
    `template` and `stats`, when there are, are where its hosts are forked from and what counts
    them (`template.py`, `stats.py`). Pickled (to a template), it is only its ref and options."""

    spec: str
    ref: AdapterRef
    kwargs: dict
    info: object = None  # host.AdapterInfo, once probed
    template: object = attrs.field(default=None, eq=False, repr=False)
    stats: object = attrs.field(default=None, eq=False, repr=False)

    def __call__(self):
        return load_checked(self.ref, self.kwargs)(**self.kwargs)

    def __reduce__(self):
        return (AdapterBuilder, (self.spec, self.ref, self.kwargs))


def load_checked(ref: AdapterRef, kwargs: dict) -> type:
    """The adapter class `ref` names, checked against the protocol, with `kwargs` bound against
    its constructor (in a host). Raises AdapterNotFound, NotAnAdapter or UnknownOptions."""
    adapter_class = ref.load()
    check_adapter_class(adapter_class)
    if kwargs:
        try:
            inspect.signature(adapter_class).bind(**kwargs)
        except TypeError:
            raise UnknownOptions(f"does not take option(s) {', '.join(sorted(kwargs))}") from None
        except ValueError:  # no signature to read (a builtin)
            raise UnknownOptions("declares no options") from None
    return adapter_class


def check_adapter_class(adapter: object) -> None:
    """Refuse what cannot be an adapter class: not a class, or a class without a method of the
    adapter protocol (`bridge.adapter.Adapter`). Raises NotAnAdapter."""
    if not inspect.isclass(adapter):
        raise NotAnAdapter(f"is not a class (got {type(adapter).__name__})")
    unsupported = getattr(adapter, "unsupported", None)
    declared = set(unsupported) if isinstance(unsupported, dict) else set()
    wanted = [
        *REQUIRED_METHODS,
        *(method for operation, method in OPERATION_METHODS.items() if operation not in declared),
    ]
    missing = [method for method in wanted if not callable(getattr(adapter, method, None))]
    if missing:
        raise NotAnAdapter(
            f"does not implement the adapter protocol: missing {', '.join(missing)} "
            "(see pymc_resume.bridge.adapter.Adapter)"
        )


def import_target_module(module_name: str, spec: str):
    """The module a target names (a dotted name, or a .py file path). Raises AdapterNotFound
    when it cannot be found or imported (an import that fails with anything else, SystemExit
    included, propagates: the host reports it as the build's failure)."""
    if module_name.endswith(".py") or "/" in module_name:
        return _import_file(Path(module_name))
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise AdapterNotFound(f"{module_name!r} is not a module name")
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise AdapterNotFound(f"cannot import {module_name!r}: {error}") from None


def _import_file(path: Path):
    if not path.is_file():
        raise AdapterNotFound(f"no file {str(path)!r}")
    name = "pymc_resume_user_adapter_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise AdapterNotFound(f"{str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # before running it, as an import does (dataclasses need it)
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
