"""Tool sources for the levels below the top: `AtLevel(path, source)` in `sources=`.

The runtime hands them to the folder source, which opens them before it loads the
folders, offers their tools to the agent at `path` beside its folders' tools, and
closes them with its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from langchain_core.tools import BaseTool

from orchestrator.errors import DeveloperError
from orchestrator.sources.source import LoadsNow, ToolSource

logger = logging.getLogger(__name__)

NOWHERE = "tool source %s is for %s, and no agent folder loaded there: its tools are not offered"


@dataclass(frozen=True)
class AtLevel:
    """`source`, for the agent at `path`: its folder names from the top, as `("assistant",)`."""

    path: tuple[str, ...]
    source: ToolSource

    def __post_init__(self) -> None:
        if not self.path:
            raise DeveloperError("AtLevel needs an agent's path: a source for the top is given as it is")


class LevelSources:
    """The sources given for levels below the top; one that fails to open offers nothing."""

    def __init__(self, given: Iterable[AtLevel] = ()) -> None:
        self.given = list(given)

    async def open(self) -> None:
        """Open them all, concurrently (as the runtime opens the top's)."""
        opened = await asyncio.gather(*(g.source.open() for g in self.given), return_exceptions=True)
        for at, outcome in zip(list(self.given), opened, strict=True):
            if isinstance(outcome, Exception):
                logger.warning("tool source %s did not open: %s", at.source.name, outcome)
                self.given.remove(at)
            elif isinstance(outcome, BaseException):  # Ctrl-C, a cancellation: not the source's
                raise outcome

    def load(self) -> None:
        """Load those that can be loaded on this thread (see `LoadsNow`)."""
        for at in self.given:
            if isinstance(at.source, LoadsNow):
                at.source.load()

    def tools(self, path: tuple[str, ...]) -> Sequence[BaseTool]:
        """The tools given for the agent at `path`."""
        return [tool for at in self.given if at.path == path for tool in at.source.tools()]

    def say_unused(self, loaded: set[tuple[str, ...]]) -> None:
        """Log each source whose level is not among the `loaded` agents' paths."""
        for at in self.given:
            if at.path not in loaded:
                logger.warning(NOWHERE, at.source.name, "/".join(at.path) or "the top")

    async def close(self) -> None:
        """Close them all (what a source fails to close is logged)."""
        for at in self.given:
            try:
                await at.source.close()
            except Exception as error:
                logger.warning("closing tool source %s failed: %s", at.source.name, error)
