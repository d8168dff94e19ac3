"""Files in and out: results written so that an interrupted run never leaves a half-written
file, and input read so that a hostile file can neither block nor exhaust memory."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path


class UnreadableFile(ValueError):
    """A file the tool will not read: not a regular file, too large, or not readable. The
    message names the file and says why (`reason`), in one line."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.reason = reason


def read_bounded(path: str | Path, limit: int | None, what: str, *, head: int | None = None) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes (None: no size limit); with
    `head`, only its first `head` bytes (at most), whatever its size.

    Opened without blocking and checked on the open descriptor, so a FIFO, a device such as
    /dev/urandom, or a file swapped in after a check is refused before anything is read; at
    most `limit` + 1 bytes are ever read, whatever the file claims its size is."""
    if head is not None:
        limit = None
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or error
        raise UnreadableFile(path, f"cannot read {what}: {reason}") from None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(path, f"{what} is not a regular file")
        if limit is not None and info.st_size > limit:
            raise UnreadableFile(path, f"{what} has {info.st_size:,} bytes, more than the {limit:,} allowed")
        if head is not None:
            return os.read(handle, head)
        chunks, total = [], 0
        while limit is None or total <= limit:
            chunk = os.read(handle, 1 << 20 if limit is None else min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if limit is not None and total > limit:
            raise UnreadableFile(path, f"{what} grew past the {limit:,} bytes allowed while it was read")
        return b"".join(chunks)
    except OSError as error:
        raise UnreadableFile(path, f"cannot read {what}: {error.strerror or error}") from None
    finally:
        os.close(handle)


def write_atomically(path: str | Path, text: str | bytes, durable: bool = True) -> None:
    """Write to a temporary file beside `path`, flush it to disk (unless not `durable`: a
    cache), then rename it over `path`. The temporary file goes on every way out, an
    interrupt included; its name starts with a dot, so readers of the folder can skip it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(text.encode() if isinstance(text, str) else text)
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_json(path: str | Path, data: object) -> None:
    write_atomically(path, json.dumps(data, indent=2) + "\n")
