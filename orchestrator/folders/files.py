"""Reading a tool folder's files without being stalled or flooded by what they turn out to be.

A "file" in a folder may be a FIFO (opening it waits for a writer forever), a
device (`/dev/zero` never ends), or grow while it is read. Files are opened
without blocking, checked to be regular files, and read up to a limit.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.errors import FileTooLargeError, RefusedFileError

CHUNK = 1 << 16


@contextmanager
def open_regular(path: Path, *, follow_links: bool = True) -> Iterator[int]:
    """A descriptor open for reading on `path`, which must be a regular file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_links:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RefusedFileError(f"{path.name} is {kind(mode)}, not a regular file")
        yield fd
    finally:
        os.close(fd)


def chunks(fd: int, *, limit: int, name: str) -> Iterator[bytes]:
    """The content of `fd` in pieces; more than `limit` bytes is refused."""
    total = 0
    while chunk := os.read(fd, CHUNK):
        total += len(chunk)
        if total > limit:
            raise FileTooLargeError(f"{name} is larger than {limit:,} bytes")
        yield chunk


def read_regular(path: Path, *, limit: int) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them."""
    with open_regular(path) as fd:
        return b"".join(chunks(fd, limit=limit, name=path.name))


def kind(mode: int) -> str:
    """What a file mode describes, in words ("a FIFO", "a device", ...)."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a link"
    return "a regular file" if stat.S_ISREG(mode) else "a special file"
