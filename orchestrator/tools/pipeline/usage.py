"""The usage hook: each finished call's billing goes to the run's meter."""

from __future__ import annotations

from orchestrator.tools.pipeline.base import Handler, ToolCallRequest
from orchestrator.tools.results import ToolResult


class UsageMiddleware:
    """Counts each call that ran, with its `billing`, on the context's `UsageMeter`.

    Inside the background handover: a background call counts when it ends.
    """

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> ToolResult:
        result = await handler(request)
        meter = request.context.usage
        if meter is not None:
            meter.add_tool(request.name, result.billing)
        return result
