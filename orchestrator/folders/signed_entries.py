"""Files kept between starts in a private directory of the user's, each signed with the installation key.

What the approved code's cache (`code_cache`) and the folders' tool manifests
(`sources.manifest`) keep: an entry is found by a name the caller derives from
what cannot be forged (the hash of approved bytes), and read back only when
this installation's key signed its name and body together. An entry written by
anyone else, copied from another installation, or cut short is not there. The
directory is 0700 and each entry 0600, in the user's data directory (read each
time: tests and tools may move it); without a key or a writable directory
nothing is kept, and every start does the work again.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import ConfigError
from orchestrator.folders.signing import installation_key, sign, verify
from orchestrator.paths import user_data_dir

MAC_BYTES = 64  # hex of an HMAC-SHA256


class SignedEntries:
    """The signed entries of one directory (`name`) in the user's data directory."""

    def __init__(self, name: str, *, home: Path | None = None) -> None:
        self.name = name
        self._home = home
        # The installation key of each data directory used (None: no key, nothing kept there).
        self._keys: dict[Path, bytes | None] = {}

    def directory(self) -> Path:
        """Where the entries are now."""
        return (self._home or user_data_dir()) / self.name

    def names(self) -> set[str]:
        """The names of the entries there now (signed or not: `read` says)."""
        directory, key = self._place()
        try:
            return set(os.listdir(directory)) if key is not None else set()
        except OSError:
            return set()

    def read(self, entry: str) -> bytes | None:
        """The body of `entry`, if it is there and this installation signed it."""
        directory, key = self._place()
        if key is None:
            return None
        path = directory / entry
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as file:
            data = file.read()
        mac, body = data[:MAC_BYTES], data[MAC_BYTES:]
        # Checked before the caller parses it: its format is not meant for bytes anyone else wrote.
        if not verify(key, entry.encode() + body, mac.decode("ascii", "replace")):
            return None
        return body

    def write(self, entry: str, body: bytes) -> None:
        """Keep `body` as `entry` (best effort: without it the next start does the work again)."""
        directory, key = self._place()
        if key is None:
            return
        # The MAC covers the entry's name too: a body moved under another name is not valid there.
        mac = sign(key, entry.encode() + body).encode("ascii")
        # Written in place (a rename more per entry is most of its cost): a reader meanwhile, or
        # two writers at once, leave bytes whose signature fails, which count as no entry.
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(directory / entry, flags, 0o600)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(mac + body)
        except OSError:  # a full disk, say: what is left there fails its signature
            return

    def _place(self) -> tuple[Path, bytes | None]:
        """Where the entries are now, and the key of that data directory (None: nothing kept)."""
        home = self._home or user_data_dir()
        if home not in self._keys:
            try:
                key: bytes | None = installation_key(home)
                (home / self.name).mkdir(mode=0o700, parents=True, exist_ok=True)
                os.chmod(home / self.name, 0o700)  # others must not plant entries in it
            except (ConfigError, OSError):  # no key, no private directory: nothing kept
                key = None
            self._keys[home] = key
        return home / self.name, self._keys[home]
