"""Dispatch: every tool call, at every level, runs through one pipeline of middleware.

    tracing (when on) -> request log -> large results (kept by handle) -> AI scope ->
    validation -> budget -> approval (the person's decision) -> result cache -> background
    handover -> usage -> timeout and retry -> the tool

Inline calls, background calls, nested agents' calls and calls recovery runs
again after a crash all pass here; a new policy is a new middleware.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from orchestrator.chain import compose
from orchestrator.dispatch.ask_approval import ApprovalMiddleware, Gate, SensitiveCallGate
from orchestrator.dispatch.background import BackgroundMiddleware
from orchestrator.dispatch.large_results import LargeResultMiddleware
from orchestrator.dispatch.log import RequestLogMiddleware
from orchestrator.dispatch.middleware import CallRequest, ToolMiddleware
from orchestrator.dispatch.policy import ExecutionPolicy
from orchestrator.dispatch.replay import request_id
from orchestrator.dispatch.result_cache import ResultCacheMiddleware
from orchestrator.dispatch.retry import TimeoutRetryMiddleware
from orchestrator.dispatch.run import run_tool
from orchestrator.dispatch.scope_check import ScopeMiddleware
from orchestrator.dispatch.tool_budget import ToolBudgetMiddleware
from orchestrator.dispatch.tool_tracing import ToolTracingMiddleware
from orchestrator.dispatch.tool_usage import ToolUsageMiddleware
from orchestrator.dispatch.validate import ValidationMiddleware
from orchestrator.errors import FolderUnavailableError
from orchestrator.folders.sensitivity import SensitivityRules
from orchestrator.levels import Limits
from orchestrator.settings import Settings
from orchestrator.sources.deferred import DeferredTool
from orchestrator.store.large_results import KeepLimits
from orchestrator.tools.context import RunContext
from orchestrator.tools.request_log import CallRecord
from orchestrator.tools.results import ToolResult
from orchestrator.tracing.provider import enabled as tracing_enabled


def default_middleware(
    settings: Settings | None = None,
    *,
    gates: Sequence[Gate] | None = None,
    result_cache: bool = True,
    keeping: KeepLimits | None = None,
) -> list[ToolMiddleware]:
    """The pipeline every call runs through, outermost first.

    Calls that need the person's decision pause before they run (see
    `folders.sensitivity`): those whose names match `settings`'
    ORCHESTRATOR_SENSITIVE_PATTERNS (without `settings`, the default patterns).
    `gates` replace that approval gate (where no person can be asked, say).
    A result too long for the model is kept by handle, within `keeping` (default:
    `settings`', see `store.large_results`).
    With tracing on (an OTLP endpoint set), a span around each call comes first.
    The result cache is left out with `result_cache` False or `settings` saying
    so (ORCHESTRATOR_RESULT_CACHE=false).
    Yours go around these: `Orchestrator.create(settings, middleware=[Mine()])`.
    """
    rules = SensitivityRules.of(settings.sensitive_words if settings is not None else None)
    # Only with an OTLP endpoint set: without, nothing of OpenTelemetry loads.
    traced: list[ToolMiddleware] = [ToolTracingMiddleware()] if tracing_enabled() else []
    cached = result_cache and (settings is None or settings.result_cache)
    if keeping is None:
        keeping = KeepLimits.of(settings) if settings is not None else KeepLimits()
    return [
        *traced,
        RequestLogMiddleware(),
        LargeResultMiddleware(keeping),
        ScopeMiddleware(),
        ValidationMiddleware(),
        ToolBudgetMiddleware(),
        ApprovalMiddleware([SensitiveCallGate(rules)] if gates is None else gates),
        *([ResultCacheMiddleware()] if cached else []),
        BackgroundMiddleware(),
        ToolUsageMiddleware(),
        TimeoutRetryMiddleware(),
    ]


class Dispatcher:
    """Runs tool calls against the tools of one level, under that level's limits."""

    def __init__(
        self,
        tools: Sequence[BaseTool],
        *,
        limits: Limits,
        middleware: Sequence[ToolMiddleware] | None = None,
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self._names = tuple(sorted(self.tools))
        self.limits = limits
        self.middleware = list(default_middleware() if middleware is None else middleware)
        self._handler = compose((layer.awrap_tool_call for layer in self.middleware), run_tool)

    def request(
        self,
        call: ToolCall,
        context: RunContext,
        *,
        index: int = 1,
        total: int = 1,
        config: RunnableConfig | None = None,
        record: CallRecord | None = None,
    ) -> CallRequest:
        """The pipeline's request for `call` in `context`.

        `record` is the call as the request log already holds it (recovery).
        """
        tool = self.tools.get(call["name"])
        policy = ExecutionPolicy.of(tool, limits=self.limits)
        if record is None:
            record = self._record(call, tool, policy, context=context, config=config)
        return CallRequest(
            call=call,
            tool=tool,
            context=context,
            record=record,
            policy=policy,
            arguments=dict(call["args"]),
            index=index,
            total=total,
            available=self._names,
            config=config,
        )

    def _record(
        self,
        call: ToolCall,
        tool: BaseTool | None,
        policy: ExecutionPolicy,
        *,
        context: RunContext,
        config: RunnableConfig | None,
    ) -> CallRecord:
        metadata = (tool.metadata or {}) if tool is not None else {}
        return CallRecord(
            request_id=request_id(call, context=context, config=config),
            parent_request_id=context.request_id,
            session_id=context.session_id,
            user_id=context.user_id,
            tool=str(metadata.get("tool", call["name"])),
            action=_text(metadata.get("action")),
            call_name=call["name"],
            parameters=call["args"],
            background=policy.background,
            idempotent=policy.idempotent,
        )

    async def dispatch(self, request: CallRequest) -> ToolResult:
        """Run `request` through the pipeline; the result carries the call's ids and the time
        it was made."""
        result = (await self._handler(await self._resolved(request))).stamped(datetime.now(UTC))
        if result.request_id is not None:
            # Stamped inside (the usual case), with the ids the call ran under: the request
            # log gives a call a new one when its own is another call's.
            return result
        return result.model_copy(update=request.ids)

    async def _resolved(self, request: CallRequest) -> CallRequest:
        """`request` for the real tool of a deferred one (its folder imported now, at its first
        call), so that every middleware sees the real tool; one that cannot be had is
        `unavailable`, which validation answers."""
        tool = request.tool
        if not isinstance(tool, DeferredTool):
            return request
        try:
            real = await tool.resolve()
        except FolderUnavailableError as error:
            return request.override(tool=None, unavailable=error)
        return request.override(tool=real, policy=ExecutionPolicy.of(real, limits=self.limits))

    def message(self, call: ToolCall, result: ToolResult) -> ToolMessage:
        """The answer to `call` in the conversation, cut to the level's result size; its
        `data` left out where the level says so (`include_tool_data`)."""
        return ToolMessage(
            content=result.to_model_text(
                max_chars=self.limits.max_result_chars, include_data=self.limits.include_tool_data
            ),
            tool_call_id=call["id"] or str(result.request_id),
            name=call["name"],
            status="error" if result.status == "failure" else "success",
            artifact=result.model_dump(mode="json"),
        )


def _text(value: object) -> str | None:
    return None if value is None else str(value)
