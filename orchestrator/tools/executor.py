"""Runs the tool calls of one model turn: concurrently, each failure contained.

This is the single place tool calls are dispatched, so that policies (scope,
approval, timeouts, background work) sit around `invoke` in one place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from orchestrator.errors import (
    InvalidToolArgumentsError,
    ToolError,
    UnknownToolError,
    validation_problems,
)
from orchestrator.events import ToolPhase, emit_tool
from orchestrator.tools.attempt import attempt, sanitised
from orchestrator.tools.policy import ExecutionPolicy, run_with_policy
from orchestrator.tools.replay import PriorCall, decide, request_id
from orchestrator.tools.results import ToolResult

logger = logging.getLogger(__name__)

# Where a RequestObserver and a BackgroundRunner ride in the run config, so that
# nested agents' calls reach them too.
OBSERVER_KEY = "request_observer"
BACKGROUND_KEY = "background_runner"
# Keys of the graph run itself: a call that outlives the run must not carry them.
RUN_KEYS = ("checkpoint_ns", "checkpoint_id", "checkpoint_map")
ACKNOWLEDGED = (
    "{name} goes on in the background as task {task_id}; its result will come in a later "
    "message. Tell the user it has started."
)

UNKNOWN_TOOL = "There is no tool named {name!r}. Available tools: {available}."
INVALID_ARGUMENTS = "Invalid arguments for {name}: {problems}."


@dataclass(frozen=True)
class CallRecord:
    """One tool call as the request log sees it."""

    request_id: str
    parent_request_id: str | None
    session_id: str | None
    user_id: str | None
    tool: str
    action: str | None
    call_name: str
    parameters: dict[str, object]
    background: bool = False
    idempotent: bool = False


class RequestObserver(Protocol):
    """Told how each tool call goes (the request log)."""

    async def started(self, call: CallRecord) -> None: ...

    async def acknowledged(self, call: CallRecord, *, detail: str) -> None: ...

    async def finished(self, call: CallRecord, result: ToolResult) -> None: ...

    async def cancelled(self, call: CallRecord) -> None: ...

    async def prior(self, call: CallRecord) -> PriorCall | None: ...

    async def requeued(self, call: CallRecord) -> None: ...

    async def interrupted(self, call: CallRecord) -> None: ...


class BackgroundRunner(Protocol):
    """Takes over calls that run in the background (the task manager)."""

    def adopt(
        self, work: asyncio.Task[ToolResult], call: CallRecord, *, observer: RequestObserver | None
    ) -> object: ...

    def running(self, request_id: str) -> bool: ...


class ToolExecutor:
    """Validates and runs tool calls against a fixed set of LangChain tools."""

    def __init__(
        self,
        tools: Sequence[BaseTool],
        *,
        max_result_chars: int,
        default_timeout: float = 60.0,
        inline_budget: float | None = None,
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.max_result_chars = max_result_chars
        self.default_timeout = default_timeout
        self.inline_budget = inline_budget

    async def run_all(
        self, calls: Sequence[ToolCall], *, config: RunnableConfig
    ) -> list[ToolMessage]:
        """Run every call at once; the messages come back in the calls' order."""
        total = len(calls)
        return list(
            await asyncio.gather(
                *(
                    self.run_one(call, index=index, total=total, config=config)
                    for index, call in enumerate(calls, start=1)
                )
            )
        )

    async def run_one(
        self, call: ToolCall, *, index: int, total: int, config: RunnableConfig
    ) -> ToolMessage:
        """Run one call and answer with a ToolMessage, whatever happens inside the tool.

        A call the request log already knows (a resumed turn) is answered from
        the log instead, unless it is safe to run again (see `replay`).
        """
        configurable = config.get("configurable", {})
        ids = {
            "request_id": request_id(call, configurable),
            "parent_request_id": configurable.get("request_id"),
        }
        record = self._record(call, ids, configurable)
        observer: RequestObserver | None = configurable.get(OBSERVER_KEY)
        runner: BackgroundRunner | None = configurable.get(BACKGROUND_KEY)
        progress = {"tool": call["name"], "index": index, "total": total, **ids}
        emit_tool(ToolPhase.STARTING, **progress)
        decision = await decide(record, log=observer, runner=runner)
        if decision.in_background:
            return self._message(call, _acknowledgement(call, ids))
        if decision.answer is not None:
            return self._finish(call, decision.answer.model_copy(update=ids), progress)
        if observer is not None and not decision.rerun:
            await _safely(observer.started(record))
        return await self._run(
            call, record, config=config, progress=progress, observer=observer, runner=runner
        )

    async def _run(
        self,
        call: ToolCall,
        record: CallRecord,
        *,
        config: RunnableConfig,
        progress: dict[str, object],
        observer: RequestObserver | None,
        runner: BackgroundRunner | None,
    ) -> ToolMessage:
        """Run the call inline, handing it to the background runner past its budget."""
        ids = {"request_id": record.request_id, "parent_request_id": record.parent_request_id}
        if record.background and runner is not None:
            config = _detached(config)  # it will outlive this graph run
        work = asyncio.ensure_future(
            self.invoke(call, config=_child_config(config, ids), progress=progress)
        )
        try:
            budget = None if runner is None else self._budget(record)
            finished = await _finishes_within(work, budget)
        except asyncio.CancelledError:  # the turn was cancelled (Ctrl-C): so is its call
            work.cancel()
            if observer is not None:
                await asyncio.shield(_safely(observer.cancelled(record)))
            raise
        if runner is not None and not finished:
            runner.adopt(work, record, observer=observer)
            if observer is not None and not record.background:
                await _safely(observer.acknowledged(record, detail="outlived the inline budget"))
            return self._message(call, _acknowledgement(call, ids))
        result = work.result().model_copy(update=ids)
        if observer is not None:
            await _safely(observer.finished(record, result))
        return self._finish(call, result, progress)

    def _finish(
        self, call: ToolCall, result: ToolResult, progress: dict[str, object]
    ) -> ToolMessage:
        emit_tool(ToolPhase.COMPLETED, status=result.status, **progress)  # type: ignore[arg-type]
        logger.info(
            "tool %s %s request_id=%s parent_request_id=%s",
            call["name"], result.status, result.request_id, result.parent_request_id,
            extra={
                "tool": call["name"],
                "status": result.status,
                "request_id": result.request_id,
                "parent_request_id": result.parent_request_id,
            },
        )
        return self._message(call, result)

    def _budget(self, record: CallRecord) -> float | None:
        return 0.0 if record.background else self.inline_budget

    def _message(self, call: ToolCall, result: ToolResult) -> ToolMessage:
        return ToolMessage(
            content=result.to_model_text(max_chars=self.max_result_chars),
            tool_call_id=call["id"] or str(result.request_id),
            name=call["name"],
            status="error" if result.status == "failure" else "success",
            artifact=result.model_dump(mode="json"),
        )

    async def invoke(
        self,
        call: ToolCall,
        *,
        config: RunnableConfig,
        progress: dict[str, object] | None = None,
    ) -> ToolResult:
        """Validate and run one call under its policy; failures come back as error results."""
        progress = progress or {"tool": call["name"], "index": 1, "total": 1, "request_id": ""}
        tool = self.tools.get(call["name"])
        try:
            tool = self._lookup(call["name"])  # the same tool; unknown names fail here
            emit_tool(ToolPhase.VALIDATING, **progress)  # type: ignore[arg-type]
            _validate(tool, call["args"])
            emit_tool(ToolPhase.EXECUTING, **progress)  # type: ignore[arg-type]
            policy = ExecutionPolicy.of(tool, default_timeout=self.default_timeout)
            result = await run_with_policy(
                lambda: attempt(tool, call, config), name=call["name"], policy=policy
            )
        except ToolError as error:
            result = ToolResult.from_error(error)
        return sanitised(result, tool)

    def _record(
        self, call: ToolCall, ids: dict[str, str | None], configurable: dict[str, object]
    ) -> CallRecord:
        tool = self.tools.get(call["name"])
        metadata = (tool.metadata or {}) if tool is not None else {}
        policy = ExecutionPolicy.of(tool, default_timeout=self.default_timeout)
        return CallRecord(
            request_id=str(ids["request_id"]),
            parent_request_id=ids["parent_request_id"],
            session_id=_text(configurable.get("thread_id")),
            user_id=_text(configurable.get("user_id")),
            tool=str(metadata.get("tool", call["name"])),
            action=_text(metadata.get("action")),
            call_name=call["name"],
            parameters=call["args"],
            background=policy.background,
            idempotent=policy.idempotent,
        )

    def _lookup(self, name: str) -> BaseTool:
        try:
            return self.tools[name]
        except KeyError:
            available = ", ".join(sorted(self.tools)) or "none"
            raise UnknownToolError(UNKNOWN_TOOL.format(name=name, available=available)) from None


def _validate(tool: BaseTool, args: dict[str, object]) -> None:
    schema = tool.args_schema
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        return  # a tool described by a raw JSON schema validates its own input
    try:
        schema.model_validate(args)
    except ValidationError as error:
        raise InvalidToolArgumentsError(
            INVALID_ARGUMENTS.format(name=tool.name, problems=validation_problems(error))
        ) from None


def _child_config(config: RunnableConfig, ids: dict[str, str | None]) -> RunnableConfig:
    # A nested agent reads its own request_id here and uses it as its calls' parent.
    configurable = {**config.get("configurable", {}), **ids}
    return {**config, "configurable": configurable}


async def _finishes_within(work: asyncio.Task[ToolResult], budget: float | None) -> bool:
    """Wait for `work` up to `budget` seconds (None: as long as it takes)."""
    await asyncio.wait({work}, timeout=budget)
    return work.done()


def _acknowledgement(call: ToolCall, ids: dict[str, str | None]) -> ToolResult:
    return ToolResult(
        type="status",
        status="partial",
        message=ACKNOWLEDGED.format(name=call["name"], task_id=ids["request_id"]),
        data={"task_id": ids["request_id"], "status": "acknowledged"},
        **ids,
    )


def _detached(config: RunnableConfig) -> RunnableConfig:
    configurable = {
        key: value
        for key, value in config.get("configurable", {}).items()
        if not key.startswith("__") and key not in RUN_KEYS
    }
    return {"configurable": configurable}


async def _safely(tracking: Awaitable[None]) -> None:
    # The request log must never cost the user a tool result.
    try:
        await tracking
    except Exception as error:
        # One line: SQLAlchemy's text holds the statement and its parameters.
        first = (str(error).strip().splitlines() or [""])[0]
        logger.warning("request tracking failed: %s: %s", type(error).__name__, first)


def _text(value: object) -> str | None:
    return None if value is None else str(value)
