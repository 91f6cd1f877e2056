"""The usage hook: each finished call's billing goes to the run's meter and the request log."""

from __future__ import annotations

from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.tools.request_log import safely
from orchestrator.tools.results import Billing, ToolResult
from orchestrator.usage.records import UsageRecord
from orchestrator.usage.tokens import TokenCount


class ToolUsageMiddleware:
    """Counts each call that ran, with its `billing`, on the context's `UsageMeter`.

    Inside the background handover: a background call counts when it ends. A
    billed call is also kept in the request log, under its request id.
    """

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        result = await handler(request)
        context = request.context
        if context.usage is not None:
            context.usage.count_tool(
                request.name, result.billing, cap_usd=request.policy.max_cost_usd
            )
        if result.billing is not None and context.observer is not None:
            await safely(context.observer.used(_record(request, result.billing)))
        return result


def _record(request: CallRequest, billing: Billing) -> UsageRecord:
    record = request.record
    return UsageRecord(
        request_id=record.request_id,
        parent_request_id=record.parent_request_id,
        session_id=record.session_id,
        user_id=record.user_id,
        turn_id=request.context.usage.turn_id if request.context.usage is not None else None,
        kind="tool",
        name=request.name,
        tokens=TokenCount(),
        cost_usd=billing.total_cost_usd,
        credits=billing.credits,
    )
