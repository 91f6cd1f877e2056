"""The installation key: tool approvals signed with it are this user's; any others are not.

An `approvals.json` is just a file in a data directory, which may come from
anywhere (a copied home, a downloaded project, `ORCHESTRATOR_HOME` pointing at
someone else's directory). Each decision in it carries an HMAC made with a
random key that only this user's data directory holds, created on first use
with mode 0600; a decision without a valid one counts as never made.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import tempfile
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.paths import user_data_dir

KEY_FILE = "approvals.key"
KEY_BYTES = 32
START_AGAIN = "delete it (every tool folder is asked about again)"


def sign(key: bytes, message: bytes) -> str:
    """The HMAC-SHA256 of `message`, in hex."""
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def verify(key: bytes, message: bytes, mac: str) -> bool:
    """True when `mac` is `message`'s HMAC under `key` (compared in constant time)."""
    return hmac.compare_digest(sign(key, message), mac)


def installation_key(directory: Path | None = None) -> bytes:
    """This user's key, from `directory` (the user's data directory); made on first use."""
    path = (directory or user_data_dir()) / KEY_FILE
    try:
        return _read(path)
    except FileNotFoundError:
        _create(path)
        return _read(path)


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        _check(path, info)
        text = file.read(4 * KEY_BYTES).strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise ConfigError(f"{path} is not an approval key; {START_AGAIN}")
    return key


def _check(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        raise ConfigError(f"{path} is not a file of yours; {START_AGAIN}")
    if info.st_mode & 0o077:
        raise ConfigError(f"{path} may be read or written by others: `chmod 600 {path}`")


def _create(path: Path) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # mkstemp makes the file 0600; linking it into place is atomic and never
        # replaces a key another process made meanwhile (that one wins).
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".approvals-key-")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as file:
                file.write(secrets.token_hex(KEY_BYTES) + "\n")
                file.flush()
                os.fsync(file.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(temporary, path)
        finally:
            os.unlink(temporary)
    except OSError as error:
        raise ConfigError(
            f"Cannot create the approval key {path}: {error.strerror or error}"
        ) from None
