"""Text and JSON as PostgreSQL can store them.

PostgreSQL's `text` and `jsonb` cannot hold the NUL character (U+0000), which a
user, a model or a tool may send; one such value would fail the write, and with
it the turn, every time the history is saved again. Stored copies drop it: what
the model saw is kept in the checkpoint, which stores messages as bytes.
"""

from __future__ import annotations

import math
from typing import TypeVar

T = TypeVar("T")

NUL = "\x00"


def storable_text(value: str) -> str:
    """`value` without NUL characters."""
    return value.replace(NUL, "") if NUL in value else value


def storable_json(value: T) -> T:
    """A JSON-like value with NUL removed from every string and key, and inf or nan as text."""
    if isinstance(value, str):
        return storable_text(value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {storable_json(k): storable_json(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list | tuple):
        return [storable_json(v) for v in value]  # type: ignore[return-value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # type: ignore[return-value]  # JSON has no inf or nan; jsonb refuses them
    return value
