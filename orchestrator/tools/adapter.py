"""Turns a drop-in `Tool` into LangChain tools: one per action, named `<tool>_<action>`."""

from __future__ import annotations

import inspect
import uuid
from functools import partial
from pathlib import Path

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools.base import ArgsSchema
from pydantic_core import to_jsonable_python

from orchestrator.tools.base import ActionSpec, Tool, ToolRequest
from orchestrator.tools.config import ToolConfig
from orchestrator.tools.results import ToolResult
from orchestrator.tools.threads import in_thread


def langchain_tools(tool: Tool, *, config: ToolConfig | None = None) -> list[BaseTool]:
    """The LangChain tools the model sees for `tool`; their schemas hold only the action's parameters.

    `config` (the folder's tool_config.yaml) sets how each call runs: timeout,
    retries, background.
    """
    policy = (
        config.model_dump(include={"timeout_seconds", "max_retries", "background", "idempotent"})
        if config is not None
        else {}
    )
    return [_action_tool(tool, spec, policy) for spec in tool.actions.values()]


class ActionTool(StructuredTool):
    """A StructuredTool whose call schema is the action's own parameter model.

    The stock property derives a new model per tool (to drop injected
    arguments, which actions never have); with hundreds of tools that was most
    of the startup time.
    """

    @property
    def tool_call_schema(self) -> ArgsSchema:
        return self.args_schema if self.args_schema is not None else super().tool_call_schema


def _action_tool(tool: Tool, spec: ActionSpec, policy: dict[str, object]) -> BaseTool:
    async def run(config: RunnableConfig, **parameters: object) -> ToolResult:
        # The executor put this call's ids in the config; the session put the rest there.
        configurable = config.get("configurable", {})
        request = ToolRequest(
            request_id=configurable.get("request_id") or uuid.uuid4().hex,
            parent_request_id=configurable.get("parent_request_id"),
            action=spec.name,
            parameters=to_jsonable_python(parameters),
            session_id=configurable.get("thread_id"),
            user_id=configurable.get("user_id"),
        )
        if not inspect.iscoroutinefunction(tool.execute):  # a blocking execute of its own
            return await in_thread(partial(tool.execute, request), name=f"{tool.name}_{spec.name}")
        return await tool.execute(request)

    return ActionTool(
        name=f"{tool.name}_{spec.name}",
        description=f"{spec.description}\n(Part of {tool.name}: {tool.description})",
        args_schema=spec.params,
        coroutine=run,
        metadata={
            "tool": tool.name,
            "action": spec.name,
            "version": tool.version,
            "folder": _folder(tool),
            **policy,
        },
    )


def _folder(tool: Tool) -> str | None:
    """Where the tool's code lives: paths inside it may be shown in its errors."""
    try:
        return str(Path(inspect.getfile(type(tool))).resolve().parent)
    except (TypeError, OSError):  # a class without a source file (built at run time)
        return None
