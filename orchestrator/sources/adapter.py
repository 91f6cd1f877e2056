"""Turns a drop-in `Tool` into LangChain tools: one per action, named `<tool>_<action>`."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import cast

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools.base import ArgsSchema
from pydantic import BaseModel, JsonValue, PrivateAttr, SkipValidation
from pydantic_core import to_jsonable_python

from orchestrator.folders.risk_marks import Authored, action_risks
from orchestrator.folders.scope import ActionScope
from orchestrator.folders.sensitivity import sensitive_actions
from orchestrator.folders.tool_config import POLICY_FIELDS, ToolConfig
from orchestrator.folders.tool_names import qualified_name
from orchestrator.tools.base import ActionSpec, Tool, ToolRequest
from orchestrator.tools.context import current_context
from orchestrator.tools.results import ToolResult
from orchestrator.tools.threads import in_thread


def langchain_tools(
    tool: Tool,
    *,
    config: ToolConfig | None = None,
    scopes: Mapping[str, ActionScope] | None = None,
    folder: Path | None = None,
) -> list[BaseTool]:
    """The LangChain tools the model sees for `tool`; their schemas hold only what the model sets.

    `config` (the folder's tool_config.yaml) sets how each call runs: timeout,
    retries, background, whether it needs the person's decision first (see
    `sensitivity`). `scopes` (by action) hide the parameters the
    configuration fixes (see `scope`). `folder` is where the tool lives (by
    default, its class's file): paths inside it may be shown in its errors.
    """
    policy = config.model_dump(include=POLICY_FIELDS) if config is not None else {}
    metadata = {"tool": tool.name, "version": tool.version, "folder": _folder(tool, folder), **policy}
    marks = sensitive_actions(tool, config)  # who marked an action sensitive (see `sensitivity`)
    authored: dict[str, Authored] = {
        name: (spec.risk_level, spec.urgency) for name, spec in tool.actions.items()
    }
    risks = action_risks(tool.name, config, known=tool.actions.keys(), authored=authored)
    scopes = scopes or {}
    return [
        _action_tool(
            tool,
            spec,
            {**metadata, "sensitive": marks.get(spec.name), **risks[spec.name]},
            scopes.get(spec.name),
        )
        for spec in tool.actions.values()
    ]


class ActionTool(StructuredTool):
    """A tool action as LangChain sees it; the dispatch pipeline runs it through `run_action`.

    Its call schema is the JSON schema of the action's own parameter model,
    less the parameters its scope hides, made once: `bind_tools` and the
    folder's manifest (see `manifest`) both read it, and the model is sent the
    same as from the model itself. (The stock property derives a new model per
    tool, to drop injected arguments, which actions never have: with hundreds
    of tools that was most of the startup time.)
    """

    owner: SkipValidation[Tool]
    spec: SkipValidation[ActionSpec]
    scope: SkipValidation[ActionScope | None] = None
    _call_schema: dict[str, JsonValue] | None = PrivateAttr(default=None)

    @property
    def tool_call_schema(self) -> ArgsSchema:
        if self._call_schema is None:
            schema = self.args_schema
            if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
                return super().tool_call_schema
            self._call_schema = schema.model_json_schema()
        return self._call_schema

    async def run_action(self, request: ToolRequest) -> ToolResult:
        """Run the action for `request` (its parameters validated already, or validated now)."""
        execute = self.owner.execute
        if not inspect.iscoroutinefunction(execute):  # a blocking execute of its own
            # Tool declares `execute` async; a subclass may override it with a blocking one.
            blocking = cast("Callable[[ToolRequest], ToolResult]", execute)
            return await in_thread(partial(blocking, request), name=self.name)
        return await execute(request)


def action_request(
    tool: ActionTool, arguments: Mapping[str, object], *, ids: Mapping[str, str | None]
) -> ToolRequest:
    """The `ToolRequest` of one call of `tool`, for the run it belongs to."""
    return tool_request(tool.spec.name, arguments, ids=ids)


def tool_request(
    action: str, arguments: Mapping[str, object], *, ids: Mapping[str, str | None]
) -> ToolRequest:
    """The `ToolRequest` of one call of `action`, for the run it belongs to."""
    context = current_context()
    return ToolRequest(
        request_id=ids.get("request_id") or uuid.uuid4().hex,
        parent_request_id=ids.get("parent_request_id"),
        action=action,
        parameters=to_jsonable_python(dict(arguments)),
        session_id=context.session_id if context is not None else None,
        user_id=context.user_id if context is not None else None,
    )


def _action_tool(
    tool: Tool, spec: ActionSpec, metadata: dict[str, object], scope: ActionScope | None
) -> BaseTool:
    action_tool: ActionTool

    async def run(**parameters: object) -> ToolResult:
        # Called straight through LangChain (outside the dispatch pipeline): a request of its own.
        context = current_context()
        ids = {"request_id": None, "parent_request_id": context.request_id if context else None}
        return await action_tool.run_action(action_request(action_tool, parameters, ids=ids))

    def run_sync(**parameters: object) -> ToolResult:
        # LangChain's `invoke` outside any event loop (a script, a notebook cell).
        return asyncio.run(run(**parameters))

    schema: type[BaseModel] = scope.visible if scope is not None else spec.params
    action_tool = ActionTool(
        name=qualified_name(tool.name, spec.name),
        description=f"{spec.description}\n(Part of {tool.name}: {tool.description})",
        args_schema=schema,
        func=run_sync,
        coroutine=run,
        owner=tool,
        spec=spec,
        scope=scope,
        metadata={**metadata, "action": spec.name},
    )
    return action_tool


def _folder(tool: Tool, folder: Path | None) -> str | None:
    """Where the tool lives: paths inside it may be shown in its errors."""
    if folder is not None:
        return str(folder.resolve())
    try:
        return str(Path(inspect.getfile(type(tool))).resolve().parent)
    except (TypeError, OSError):  # a class without a source file (built at run time)
        return None
