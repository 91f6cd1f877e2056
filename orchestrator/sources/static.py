"""A source of tools that are there from the start: the built-ins, or tools given in code."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool


class StaticSource:
    """Offers a fixed list of LangChain tools; opening and closing it do nothing."""

    def __init__(self, name: str, tools: Sequence[BaseTool]) -> None:
        self.name = name
        self._tools = list(tools)

    async def open(self) -> None:
        """Nothing to get ready."""

    def tools(self) -> Sequence[BaseTool]:
        """The tools it was given."""
        return self._tools

    async def close(self) -> None:
        """Nothing to release."""
