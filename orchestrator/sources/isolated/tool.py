"""A folder's actions run in its process, as LangChain tools: `<tool>_<action>`, JSON schemas.

They carry the same metadata as inline actions (`tool`, `action`, `folder`,
timeout, retries, sensitivity), so the dispatch pipeline treats them alike;
the pipeline hands each its `ToolRequest` (`run_request`), ids and all.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools.base import ArgsSchema
from pydantic import JsonValue, SkipValidation

from orchestrator.errors import ToolError
from orchestrator.folders.risk_marks import action_risks
from orchestrator.folders.sensitivity import BY_AUTHOR, marked_actions
from orchestrator.folders.tool_config import POLICY_FIELDS, ToolConfig
from orchestrator.folders.tool_names import qualified_name
from orchestrator.sources.isolated.process import Action, FolderProcess
from orchestrator.sources.mcp.definitions import ToolDefinition
from orchestrator.sources.mcp.sandboxed import denial_note
from orchestrator.sources.mcp.tool_scope import JsonScope, json_scopes
from orchestrator.tools.base import ToolRequest
from orchestrator.tools.context import current_context
from orchestrator.tools.results import ToolResult


class IsolatedTool(StructuredTool):
    """One action of a folder that runs in a process of its own."""

    process: SkipValidation[FolderProcess]
    action: str
    full_schema: dict[str, JsonValue]  # hidden parameters included: calls are validated against it
    scope: SkipValidation[JsonScope | None] = None

    @property
    def tool_call_schema(self) -> ArgsSchema:
        return self.scope.visible if self.scope is not None else self.full_schema

    async def run_request(self, request: ToolRequest) -> ToolResult:
        """Run the call in the folder's process; a permission error is noted as a likely denial.

        A denial is the call's answer, not retried: the sandbox would refuse it again.
        """
        context = current_context()
        try:
            result = await self.process.call(request, user_id=context.user_id if context else None)
        except ToolError as error:
            if denial_note(str(error)) is None:
                raise
            result = ToolResult.from_error(
                ToolError(str(error), code=error.code, recoverable=False)
            )
        note = denial_note(result.message) if result.status == "failure" else None
        if note is not None:
            result.metadata["sandbox"] = note
        return result


def isolated_tools(process: FolderProcess, *, config: ToolConfig, folder: Path) -> list[BaseTool]:
    """The LangChain tools of the actions `process` reported, with the folder's scope and marks.

    Raises ToolLoadError when `config` names a parameter or sensitive action no action has.
    """
    definitions = {
        a.name: ToolDefinition(name=a.name, inputSchema=dict(a.schema)) for a in process.actions
    }
    scopes = json_scopes(config.name, definitions, config.parameters)
    authored = {a.name: BY_AUTHOR for a in process.actions if a.sensitive}
    marks = marked_actions(config.name, config, known=definitions.keys(), marks=authored)
    risks = action_risks(config.name, config, known=definitions.keys())
    metadata = {
        "tool": config.name,
        "version": config.version,
        "folder": str(folder.resolve()),
        "isolation": "process",
        **config.model_dump(include=POLICY_FIELDS),
    }
    return [
        _tool(
            process,
            action,
            config,
            {
                **metadata,
                "action": action.name,
                "sensitive": marks.get(action.name),
                **risks[action.name],
            },
            scopes.get(action.name),
        )
        for action in process.actions
    ]


def _tool(
    process: FolderProcess,
    action: Action,
    config: ToolConfig,
    metadata: Mapping[str, object],
    scope: JsonScope | None,
) -> IsolatedTool:
    isolated: IsolatedTool

    async def run(
        **arguments: object,
    ) -> ToolResult:  # straight through LangChain: a request of its own
        import uuid

        from pydantic_core import to_jsonable_python

        context = current_context()
        request = ToolRequest(
            request_id=uuid.uuid4().hex,
            parent_request_id=context.request_id if context else None,
            action=action.name,
            parameters=to_jsonable_python(arguments),
            session_id=context.session_id if context else None,
            user_id=context.user_id if context else None,
        )
        return await isolated.run_request(request)

    schema = dict(action.schema)
    isolated = IsolatedTool(
        name=qualified_name(config.name, action.name),
        description=f"{action.description}\n(Part of {config.name}: {config.description})",
        args_schema=scope.visible if scope is not None else schema,
        coroutine=run,
        process=process,
        action=action.name,
        full_schema=schema,
        scope=scope,
        metadata=dict(metadata),
    )
    return isolated

