"""Tools offered before their folder is imported: the folder is imported at the first call.

A start that finds an approved folder's manifest (see `manifest`) offers its
tools as `DeferredTool`s: the name, description and JSON schema the model saw
at the start that loaded it, and the same metadata, so the model, `bind_tools`
and the pipeline's policy read them as they would the real ones. The
dispatch pipeline resolves a deferred tool to the real one before anything
else runs (see `dispatch.dispatcher`): scope, validation, the person's
approval, retries and the request log all see the real tool, as when the folder
was imported at the start. The folder's import happens once, at the first call
that needs it (concurrent calls wait for the same one), on the thread of the
call that needs it: the event loop that runs the session's calls, as the
import at a start runs on the loop that opens the sources.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from langchain_core.tools import BaseTool
from langchain_core.tools.base import ArgsSchema
from pydantic import JsonValue, SkipValidation

from orchestrator.errors import FolderUnavailableError, ToolError
from orchestrator.sources.manifest import ToolEntry

T = TypeVar("T")

GONE = "{name}: its folder {folder} no longer gives this tool (restart to see what it offers)"


class LoadOnce(Generic[T]):
    """`load` run at the first need of its result, once; what it gave, or failed with, kept.

    Concurrent needs wait for the one load (a lock: they may come from two
    threads). Only a `ToolError` is a kept failure; anything else is raised
    as it is, and the next need tries again.
    """

    def __init__(self, load: Callable[[], T]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._result: T | None = None
        self._error: ToolError | None = None

    @property
    def done(self) -> bool:
        """Whether the load ran (and succeeded or failed)."""
        return self._result is not None or self._error is not None

    def get(self) -> T:
        """The load's result: loaded now if it was not yet; its ToolError if it failed."""
        with self._lock:
            if not self.done:
                try:
                    self._result = self._load()
                except ToolError as error:
                    self._error = error
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


class DeferredTool(BaseTool):
    """A folder's tool as its manifest records it; `resolve` gives the real one.

    Called straight through LangChain (`ainvoke`, outside the pipeline), it
    resolves and hands the call to the real tool.
    """

    call_schema: dict[str, JsonValue]
    folder_name: str
    real_tools: SkipValidation[Callable[[], Sequence[BaseTool]]]

    @property
    def tool_call_schema(self) -> ArgsSchema:
        return self.call_schema

    async def resolve(self) -> BaseTool:
        """The real tool: its folder imported now if it was not yet (FolderUnavailableError if
        that fails, or if the folder no longer gives a tool of this name)."""
        for tool in self.real_tools():
            if tool.name == self.name:
                return tool
        raise FolderUnavailableError(GONE.format(name=self.name, folder=self.folder_name))

    async def _arun(self, **arguments: object) -> object:
        return await (await self.resolve()).ainvoke(arguments)

    def _run(self, **arguments: object) -> object:
        # LangChain's `invoke` outside any event loop (a script, a notebook cell).
        return asyncio.run(self._arun(**arguments))


def deferred_tools(
    entries: Sequence[ToolEntry],
    *,
    folder_name: str,
    real_tools: Callable[[], Sequence[BaseTool]],
) -> list[BaseTool]:
    """The tools `entries` describe, each resolving through `real_tools` (the folder's import)."""
    return [
        DeferredTool(
            name=entry.name,
            description=entry.description,
            args_schema=entry.schema,
            call_schema=entry.schema,
            metadata=entry.metadata,
            folder_name=folder_name,
            real_tools=real_tools,
        )
        for entry in entries
    ]
