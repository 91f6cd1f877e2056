"""A span per tool call, by OpenTelemetry's GenAI conventions (only when tracing is on).

Outermost in the pipeline: it covers scope, approval, the call's retries and
whatever the call runs below it (a nested agent's model and tool calls are its
descendants). The approval gate and the retry loop add what they decided.

The session and the user are on the turn's span, an ancestor of every call's:
not repeated on each call's span (an attribute costs an exported span about 9 us).
"""

from __future__ import annotations

from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.tools.results import ToolResult
from orchestrator.tracing.spans import mark_failed, set_content, span


class ToolTracingMiddleware:
    """Opens `execute_tool <name>` around each call; records its request ids and outcome."""

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        record = request.record
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": request.name,
            "gen_ai.tool.call.id": request.call.get("id"),
            "orchestrator.request_id": record.request_id,
            "orchestrator.parent_request_id": record.parent_request_id,
        }
        with span(f"execute_tool {request.name}", attributes) as opened:
            set_content(opened, "gen_ai.tool.call.arguments", lambda: request.call["args"])
            result = await handler(request)
            if opened is not None:
                opened.set_attribute("orchestrator.status", result.status)
                if result.error_code:
                    opened.set_attribute("error.type", result.error_code)
                if result.status == "failure":
                    mark_failed(
                        opened,
                        code=result.error_code or "tool_failed",
                        message=lambda: result.message,
                    )
                set_content(
                    opened, "gen_ai.tool.call.result", lambda: result.message or result.data
                )
        return result
