"""Text and JSON as PostgreSQL can store them.

PostgreSQL's `text` and `jsonb` cannot hold the NUL character (U+0000), which a
user, a model or a tool may send; one such value would fail the write, and with
it the turn, every time the history is saved again. Stored copies drop it: what
the model saw is kept in the checkpoint, which stores messages as bytes.
"""

from __future__ import annotations

import math
from typing import cast, overload

NUL = "\x00"


def storable_text(value: str) -> str:
    """`value` without NUL characters."""
    return value.replace(NUL, "") if NUL in value else value


@overload
def storable_json(value: dict[str, object]) -> dict[str, object]: ...
@overload
def storable_json(value: list[object] | tuple[object, ...]) -> list[object]: ...
@overload
def storable_json(value: object) -> object: ...
def storable_json(value: object) -> object:
    """A JSON-like value with NUL removed from every string and key, and inf or nan as text.

    A mapping comes back a dict, a list or tuple a list.
    """
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        items = cast(dict[object, object], value).items()  # isinstance cannot know its types
        return {storable_json(k): storable_json(v) for k, v in items}
    if isinstance(value, list | tuple):
        return [storable_json(v) for v in cast(list[object] | tuple[object, ...], value)]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no inf or nan; jsonb refuses them
    return value
