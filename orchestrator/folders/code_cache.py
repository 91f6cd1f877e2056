"""Compiled approved code, kept between starts: keyed by the source's own bytes, signed.

A start hashes every byte of every tool folder, whatever this cache holds (that
is how a change is noticed, and nothing here changes it); what a second start
is spared is compiling those bytes again. An entry is found by the SHA-256 of
the very source bytes that were hashed and are about to run (with the file name
the code reports and this Python's bytecode version and optimisation level),
never by a file's name, size or times, which a program can set. So a file
changed on disk, with its times restored or not, has other bytes, another key,
and no entry: its folder is asked about again, and once approved it is compiled
anew.

Entries live in the user's data directory (`approved-code/`, mode 0700, each
file 0600), and each is signed with the installation key that signs the
approvals (see `signing`): an entry written by anyone else, or copied from
another installation, is ignored, never unmarshalled, and the source compiled
as if there were none. Whoever can read that key can already write your
approvals.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
import tempfile
from pathlib import Path
from types import CodeType

from orchestrator.errors import ConfigError
from orchestrator.folders.signing import installation_key, sign, verify
from orchestrator.paths import user_data_dir

CACHE_DIR = "approved-code"
FORMAT = b"orchestrator-approved-code/1"
MAC_BYTES = 64  # hex of an HMAC-SHA256


class CodeCache:
    """Code objects by the hash of their source; `hits` and `misses` count this process's lookups."""

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory
        # The installation key of each data directory used (None: no key, no cache there).
        self._keys: dict[Path, bytes | None] = {}
        self.hits = 0
        self.misses = 0

    def code(self, source: bytes, filename: str) -> CodeType:
        """`source` compiled as `filename`: from a signed entry when there is one, else compiled now."""
        home = self._directory or user_data_dir()  # read each time: tests and tools may move it
        key = self._key(home)
        entry = home / CACHE_DIR / self._name(source, filename)
        code = _read(entry, key) if key is not None else None
        if code is not None:
            self.hits += 1
            return code
        self.misses += 1
        code = compile(source, filename, "exec", dont_inherit=True)
        if key is not None:
            _write(entry, key, code)
        return code

    def _key(self, home: Path) -> bytes | None:
        if home not in self._keys:
            try:
                key: bytes | None = installation_key(home)
                (home / CACHE_DIR).mkdir(mode=0o700, parents=True, exist_ok=True)
                os.chmod(home / CACHE_DIR, 0o700)  # others must not plant entries in it
            except (ConfigError, OSError):  # no key, no private directory: compile every time
                key = None
            self._keys[home] = key
        return self._keys[home]

    def _name(self, source: bytes, filename: str) -> str:
        return hashlib.sha256(self._identity(source, filename)).hexdigest()

    @staticmethod
    def _identity(source: bytes, filename: str) -> bytes:
        # Everything the code object depends on: the bytes, the name it reports, this Python.
        parts = [
            FORMAT,
            importlib.util.MAGIC_NUMBER,
            str(sys.flags.optimize).encode(),
            os.fsencode(filename),
            hashlib.sha256(source).digest(),
        ]
        return b"\0".join(parts)


def _read(entry: Path, key: bytes) -> CodeType | None:
    """The entry's code, if it is there and this installation signed it."""
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        data = file.read()
    mac, body = data[:MAC_BYTES], data[MAC_BYTES:]
    # Checked before unmarshalling: marshal is not meant for bytes anyone else wrote.
    if not verify(key, entry.name.encode() + body, mac.decode("ascii", "replace")):
        return None
    try:
        code = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None


def _write(entry: Path, key: bytes, code: CodeType) -> None:
    """Keep `code` (best effort: without it the next start compiles again)."""
    body = marshal.dumps(code)
    # The MAC covers the entry's name too, and the name is the hash of what was compiled.
    mac = sign(key, entry.name.encode() + body).encode("ascii")
    try:
        fd, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".entry-")  # 0600
    except OSError:
        return  # not kept: the next start compiles it again
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(mac + body)
        os.replace(temporary, entry)  # whole or not at all, for a reader meanwhile
    except OSError:
        Path(temporary).unlink(missing_ok=True)
