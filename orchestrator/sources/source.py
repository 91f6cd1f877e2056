"""Where the tools of a level come from: the protocol every source meets (built-ins, tool folders
with their agents, MCP servers and isolated processes, and sources given to the runtime)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from langchain_core.tools import BaseTool

logger = logging.getLogger(__name__)

DUPLICATE = "two tools are called %s at one level (from %s and %s): only the first is offered"


class ToolSource(Protocol):
    """A supplier of tools for one level of the tree.

    The runtime opens every source (concurrently) before it builds the graph,
    asks each for its tools, and closes them when the process ends. A source
    that cannot open says so in the log and offers no tools; it never stops
    the others.
    """

    name: str

    async def open(self) -> None:
        """Get ready: load, connect, start; called once."""
        ...

    def tools(self) -> Sequence[BaseTool]:
        """The tools it offers now (after `open`)."""
        ...

    async def close(self) -> None:
        """Release what `open` took; called once, even after a failed open."""
        ...


@runtime_checkable
class LoadsNow(Protocol):
    """A source that can also be loaded synchronously (for `Orchestrator.create`, tests, scripts)."""

    def load(self) -> object:
        """What `open` does, on this thread."""
        ...


def unique_tools(tools: Iterable[BaseTool]) -> list[BaseTool]:
    """`tools` without the later ones of a name already taken (the model calls tools by name)."""
    kept: dict[str, BaseTool] = {}
    for tool in tools:
        first = kept.setdefault(tool.name, tool)
        if first is not tool:
            logger.warning(DUPLICATE, tool.name, _origin(first), _origin(tool))
    return list(kept.values())


def _origin(tool: BaseTool) -> str:
    metadata = tool.metadata or {}
    return f"folder {metadata['tool']}" if "tool" in metadata else "the built-in tools"
