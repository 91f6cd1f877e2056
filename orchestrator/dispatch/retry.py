"""Timeout and retry: each attempt bounded in time, recoverable failures tried again."""

from __future__ import annotations

from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.dispatch.policy import run_with_policy
from orchestrator.events import ToolPhase
from orchestrator.tools.results import ToolResult


class TimeoutRetryMiddleware:
    """Runs the call under its policy's timeout, with backoff between retries (see `policy`)."""

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        request.emit(ToolPhase.EXECUTING)  # once, however many attempts it takes
        return await run_with_policy(
            lambda: handler(request), name=request.name, policy=request.policy
        )
