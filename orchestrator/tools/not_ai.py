"""`NotAI`: the marker a tool author puts on a parameter the model must never set."""

from __future__ import annotations

from typing import Final

__all__ = ["NotAI"]


class _NotAI:
    """The type of the `NotAI` marker (one instance; compared by identity)."""

    def __repr__(self) -> str:
        return "NotAI"


NotAI: Final = _NotAI()
"""Marks a parameter a model must never set: `api_key: Annotated[str, NotAI]`.

Its value comes from the folder's `tool_config.yaml` (`parameters: {api_key:
{value: ...}}`) or, failing that, from the parameter's default.
"""
