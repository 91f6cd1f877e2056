"""The centre of the pipeline: one run of the tool itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import cache
from typing import Protocol, cast, runtime_checkable

from langchain_core.runnables import RunnableConfig

from orchestrator.dispatch.attempt import attempt, langchain_work, sanitised
from orchestrator.dispatch.middleware import CallRequest
from orchestrator.errors import ToolError
from orchestrator.sources.adapter import ActionTool, action_request, tool_request
from orchestrator.tools.base import ToolRequest
from orchestrator.tools.context import running_in
from orchestrator.tools.results import ToolResult


@runtime_checkable
class CallsItself(Protocol):
    """A tool the pipeline calls as it is, past LangChain's invoke (an MCP server's, say)."""

    async def call_tool(self, arguments: dict[str, object]) -> ToolResult:
        """Run one call with `arguments` (validated, fixed values merged)."""
        ...


@runtime_checkable
class RunsRequests(Protocol):
    """A tool the pipeline hands its `ToolRequest`, ids and all (a folder's process, say)."""

    action: str

    async def run_request(self, request: ToolRequest) -> ToolResult:
        """Run one call (its parameters validated, fixed values merged)."""
        ...


async def run_tool(request: CallRequest) -> ToolResult:
    """Run the tool once; whatever it raises is a failure result, its secrets redacted.

    A folder tool's action gets the parameters validated by the pipeline, a
    tool that `CallsItself` its arguments; any other LangChain tool is invoked
    as LangChain does. Meanwhile the current
    run context is the call's own (its `request_id` is this call's): a nested
    agent's graph runs with it, so its calls take this one as their parent.
    """
    tool = request.tool
    assert tool is not None  # validation answered calls of unknown tools
    with running_in(request.context.below(request.record.request_id)):
        try:
            result = await attempt(_work(request), name=request.name)
        except ToolError as error:
            result = ToolResult.from_error(error)
    # Stamped here, when it was made: what keeps a long result (`large_results`) or reuses it
    # (`result_cache`) keeps the time with it.
    stamped = sanitised(result, tool).stamped(datetime.now(UTC))
    return stamped.model_copy(update=request.ids)


def _work(request: CallRequest) -> Callable[[], Awaitable[object]]:
    tool = request.tool
    if isinstance(tool, ActionTool):
        call = action_request(tool, request.arguments, ids=request.ids)
        if request.parsed is not None:
            call.with_parsed(request.parsed)
        return lambda: tool.run_action(call)
    assert tool is not None
    runs_requests, calls_itself = _may_implement(type(tool))
    if runs_requests and isinstance(getattr(tool, "action", None), str):
        runner = cast(RunsRequests, tool)  # its class's method, its own `action`: all it asks
        request_of = tool_request(runner.action, request.arguments, ids=request.ids)
        return lambda: runner.run_request(request_of)
    if calls_itself:
        caller = cast(CallsItself, tool)  # a protocol of one method, which its class has
        return lambda: caller.call_tool(request.arguments)
    return langchain_work(tool, request.arguments, _with_ids(request), name=request.name)


@cache
def _may_implement(kind: type[object]) -> tuple[bool, bool]:
    """Whether tools of class `kind` have `RunsRequests`'s and `CallsItself`'s method; once a class.

    `isinstance` against a runtime protocol walks the protocol's members and the
    class's bases at each check: some 100 us for a LangChain tool (a pydantic model),
    which a folder's process paid at each call. So the methods are looked for once a
    class (a tool's methods are its class's: pydantic sets no others), and the data
    member `RunsRequests` has too on the tool itself.
    """
    return callable(getattr(kind, "run_request", None)), callable(getattr(kind, "call_tool", None))


def _with_ids(request: CallRequest) -> RunnableConfig | None:
    """The run's config, its metadata holding the call's request ids (LangSmith shows them)."""
    config = request.config
    if config is None:
        return None
    ids = {key: value for key, value in request.ids.items() if value is not None}
    return {**config, "metadata": {**config.get("metadata", {}), **ids}}
