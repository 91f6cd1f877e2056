"""Runs the tool calls of one model turn: concurrently, each failure contained.

This is the single place tool calls are dispatched, so that policies (scope,
approval, timeouts, background work) can be slotted in around `_invoke`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence

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
from orchestrator.tools.results import ToolResult, result_from_output

logger = logging.getLogger(__name__)

UNKNOWN_TOOL = "There is no tool named {name!r}. Available tools: {available}."
INVALID_ARGUMENTS = "Invalid arguments for {name}: {problems}."
TOOL_FAILED = "{name} failed: {error}"


class ToolExecutor:
    """Validates and runs tool calls against a fixed set of LangChain tools."""

    def __init__(self, tools: Sequence[BaseTool], *, max_result_chars: int) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.max_result_chars = max_result_chars

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
        """Run one call and answer with a ToolMessage, whatever happens inside the tool."""
        parent_request_id = config.get("configurable", {}).get("request_id")
        ids = {"request_id": uuid.uuid4().hex, "parent_request_id": parent_request_id}
        progress = {"tool": call["name"], "index": index, "total": total, **ids}
        emit_tool(ToolPhase.STARTING, **progress)
        try:
            tool = self._lookup(call["name"])
            _validate(tool, call["args"])
            emit_tool(ToolPhase.EXECUTING, **progress)
            output = await tool.ainvoke(call["args"], config=_child_config(config, ids))
            result = result_from_output(output).model_copy(update=ids)
        except ToolError as error:
            result = ToolResult.from_error(error, **ids)
        except Exception as error:  # a tool's bug must not end the turn
            logger.debug("tool %s raised", call["name"], exc_info=True)
            failure = ToolError(TOOL_FAILED.format(name=call["name"], error=_describe(error)))
            result = ToolResult.from_error(failure, **ids)
        emit_tool(ToolPhase.COMPLETED, status=result.status, **progress)
        logger.info(
            "tool %s %s request_id=%s parent_request_id=%s",
            call["name"], result.status, ids["request_id"], ids["parent_request_id"],
            extra={"tool": call["name"], "status": result.status, **ids},
        )
        return ToolMessage(
            content=result.to_model_text(max_chars=self.max_result_chars),
            tool_call_id=call["id"] or ids["request_id"],
            name=call["name"],
            status="error" if result.status == "failure" else "success",
            artifact=result.model_dump(mode="json"),
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


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
