"""The approval hook: a call may need a decision before it runs (human in the loop)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from orchestrator.tools.pipeline.base import Handler, ToolCallRequest
from orchestrator.tools.results import ToolResult


class Gate(Protocol):
    """Decides whether a call may run: as it is, changed, or not at all.

    Returns the request to run (the same one, or one with edited arguments)
    or the result to answer with instead (a refusal). A gate that must ask a
    person calls LangGraph's `interrupt()`, which this pipeline lets through.
    """

    async def review(self, request: ToolCallRequest) -> ToolCallRequest | ToolResult: ...


class ApprovalMiddleware:
    """Puts each call to the gates in order; the first refusal answers the call."""

    def __init__(self, gates: Sequence[Gate] = ()) -> None:
        self.gates = list(gates)

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> ToolResult:
        for gate in self.gates:
            decision = await gate.review(request)
            if isinstance(decision, ToolResult):
                return decision
            request = decision
        return await handler(request)
