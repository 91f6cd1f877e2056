"""The tool side of the middleware chain (see `orchestrator.chain`): a call, its result.

Modelled on LangChain v1's `AgentMiddleware.awrap_tool_call(request, handler)`:
each middleware gets the call and the rest of the pipeline, and may change the
request, answer in its place, or look at the result on the way out. Handlers
answer with a `ToolResult`; a failure is a failure result, not an exception.
Only a cancellation and LangGraph's `GraphBubbleUp` (an interrupt, a `Command`)
travel as exceptions, and no middleware catches the latter.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Protocol

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel

from orchestrator.chain import Handler as ChainHandler
from orchestrator.dispatch.policy import ExecutionPolicy
from orchestrator.errors import ToolError
from orchestrator.events import ToolPhase, emit_tool
from orchestrator.tools.context import RunContext
from orchestrator.tools.request_log import CallRecord
from orchestrator.tools.results import ToolResult


@dataclass(frozen=True)
class CallRequest:
    """One tool call on its way through the pipeline.

    `tool` is None for a name no tool answers to, or for a tool that cannot be had
    now (`unavailable` says why: a folder that failed its import at its first
    call, see `sources.deferred`). `arguments` starts as the
    model's and may be changed by middleware (fixed parameters added, say);
    `parsed` is the validated parameter model once validation has run.
    `index` and `total` place the call among the calls of its model turn.
    """

    call: ToolCall
    tool: BaseTool | None
    context: RunContext
    record: CallRecord
    policy: ExecutionPolicy
    arguments: dict[str, object]
    parsed: BaseModel | None = None
    index: int = 1
    total: int = 1
    available: tuple[str, ...] = ()  # the names of the tools at the call's level
    config: RunnableConfig | None = None  # the graph run's, for LangChain tools' callbacks
    unavailable: ToolError | None = None  # why `tool` is None, when a tool of the name exists

    @property
    def name(self) -> str:
        """The name the model called."""
        return self.call["name"]

    @property
    def ids(self) -> dict[str, str | None]:
        """The call's place in the request tree."""
        return {
            "request_id": self.record.request_id,
            "parent_request_id": self.record.parent_request_id,
        }

    def emit(self, phase: ToolPhase, *, status: str | None = None) -> None:
        """Report the call's progress on the graph's stream (nothing outside a graph run)."""
        emit_tool(
            phase,
            tool=self.name,
            index=self.index,
            total=self.total,
            request_id=self.record.request_id,
            parent_request_id=self.record.parent_request_id,
            status=status,
        )

    def failed(self, error: ToolError) -> ToolResult:
        """The failure result of this call for `error`."""
        return ToolResult.from_error(error).model_copy(update=self.ids)

    def override(self, **changes: object) -> CallRequest:
        """A copy with `changes` (the request itself never changes)."""
        return replace(self, **changes)


# The rest of the pipeline, from one middleware's place in it.
Handler = ChainHandler[CallRequest, ToolResult]


class ToolMiddleware(Protocol):
    """One concern of running a tool call (logging, scope, validation, timeouts, ...)."""

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        """Run `request` through `handler` (the rest of the pipeline), or answer in its place."""
        ...


def visible_arguments(request: CallRequest) -> dict[str, object]:
    """The call's arguments without those its configuration fixes (which may be secrets)."""
    scope = getattr(request.tool, "scope", None)
    hidden: Collection[str] = scope.hidden if scope is not None else frozenset()
    return {key: value for key, value in request.arguments.items() if key not in hidden}
