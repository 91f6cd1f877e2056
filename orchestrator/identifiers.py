"""What can name a user or a session: the one rule every `--user`, `--session`, API user and
token claim follows (standard library only: the command line checks it before anything loads)."""

from __future__ import annotations

MAX_ID_CHARS = 200
RULE = f"1 to {MAX_ID_CHARS} printable characters, not only spaces"


def can_name(value: str) -> bool:
    """Whether `value` can name a user or session: not blank, printable, not too long."""
    return bool(value.strip()) and value.isprintable() and len(value) <= MAX_ID_CHARS
