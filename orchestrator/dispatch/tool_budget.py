"""The budget hook: a call that would pass the turn's or the session's budget does not start."""

from __future__ import annotations

from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.errors import BudgetExceededError
from orchestrator.tools.results import ToolResult


class ToolBudgetMiddleware:
    """Refuses a call once a budget stops the turn, or when the tool's cap would pass one.

    Before the person is asked about a call: a call that will not run needs
    no decision. The cap (`max_cost_usd`) of a call counts as spent while it
    runs, so that calls running side by side cannot pass a budget together.
    """

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        meter = request.context.usage
        if meter is None:
            return await handler(request)
        cap = request.policy.max_cost_usd
        stop = meter.before_tool(cap)
        if stop is not None:
            return request.failed(BudgetExceededError(stop.message))
        try:
            return await handler(request)
        finally:
            meter.release(cap)
