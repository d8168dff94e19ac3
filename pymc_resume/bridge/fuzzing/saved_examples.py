"""Where a fuzz run keeps the failing examples Hypothesis saves, so that the next run tries them
first.

Hypothesis's own `DirectoryBasedExampleDatabase` writes each example to a temporary file in the
system's temp directory and then renames it into place: a run ended by SIGTERM or Ctrl-C between
the two leaves that file in /tmp, and our runs must leave nothing behind. `SavedExamples` keeps
Hypothesis's layout (a folder per key, a file per example, each named by the first 16 hex digits
of its SHA-384), so a folder an earlier version wrote is still read, and writes each example
beside itself (`files.write_atomically`), removing the temporary file on every way out.
"""

from __future__ import annotations

from collections.abc import Iterator
from hashlib import sha384
from pathlib import Path

from hypothesis.database import ExampleDatabase

from pymc_resume.files import write_atomically


def _name(data: bytes) -> str:
    return sha384(data).hexdigest()[:16]


class SavedExamples(ExampleDatabase):
    """Hypothesis's saved examples in one folder, written without a temp file outside it."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"SavedExamples({str(self.path)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SavedExamples) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def fetch(self, key: bytes) -> Iterator[bytes]:
        try:
            files = sorted(self._folder(key).iterdir())
        except OSError:
            return
        for file in files:
            if file.name.startswith("."):  # a write under way, or one an interrupt cut short
                continue
            try:
                yield file.read_bytes()
            except OSError:
                continue

    def save(self, key: bytes, value: bytes) -> None:
        target = self._folder(key) / _name(value)
        if target.exists():
            return
        try:
            # Not fsynced: a saved example only speeds up the next run, and the repro it came
            # from is written durably by the run itself.
            write_atomically(target, value, durable=False)
        except OSError:
            pass  # as Hypothesis does: a folder that cannot be written fails no run

    def delete(self, key: bytes, value: bytes) -> None:
        try:
            (self._folder(key) / _name(value)).unlink()
        except OSError:
            pass

    def _folder(self, key: bytes) -> Path:
        return self.path / _name(key)
