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
approvals (see `signing` and `signed_entries`): an entry written by anyone
else, or copied from another installation, is ignored, never unmarshalled, and
the source compiled as if there were none. Whoever can read that key can
already write your approvals.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType

from orchestrator.folders.signed_entries import MAC_BYTES as MAC_BYTES  # re-exported
from orchestrator.folders.signed_entries import SignedEntries

CACHE_DIR = "approved-code"
FORMAT = b"orchestrator-approved-code/1"


class CodeCache:
    """Code objects by the hash of their source; `hits` and `misses` count this process's lookups."""

    def __init__(self, directory: Path | None = None) -> None:
        self._entries = SignedEntries(CACHE_DIR, home=directory)
        self.hits = 0
        self.misses = 0

    def code(self, source: bytes, filename: str) -> CodeType:
        """`source` compiled as `filename`: from a signed entry when there is one, else compiled now."""
        entry = self._name(source, filename)
        code = _loaded(self._entries.read(entry))
        if code is not None:
            self.hits += 1
            return code
        self.misses += 1
        code = compile(source, filename, "exec", dont_inherit=True)
        self._entries.write(entry, marshal.dumps(code))
        return code

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


def _loaded(body: bytes | None) -> CodeType | None:
    """The code of a signed entry's body (unmarshalled only once its signature held)."""
    if body is None:
        return None
    try:
        code = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, CodeType) else None
