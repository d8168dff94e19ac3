"""What a host template imports once for an adapter (`bridge/hosting/template.py`).

An adapter class may declare `preload`, a function the template calls once before it forks
hosts: the framework's imports that start no thread and no runtime (a fork copies only the
thread that forks). `preloading(*modules)` is such a function for a list of module names. Leave
out a module that starts a thread at import: the template counts its threads after the
preload, and a preload that left more than one is dropped (each host then imports the
framework itself, which is correct, only slower).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def preloading(*modules: str) -> Callable[[], None]:
    """A `preload` that imports `modules` (each of which starts no thread when imported)."""

    def preload() -> None:
        for module in modules:
            importlib.import_module(module)

    preload.__doc__ = f"Import {', '.join(modules)} once, in the host template."
    return staticmethod(preload)  # type: ignore[return-value]
