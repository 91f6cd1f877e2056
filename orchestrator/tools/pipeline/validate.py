"""Validation, once per call: the arguments against the tool's parameters, before anything runs."""

from __future__ import annotations

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from orchestrator.errors import InvalidToolArgumentsError, UnknownToolError, validation_problems
from orchestrator.events import ToolPhase
from orchestrator.tools.adapter import ActionTool
from orchestrator.tools.pipeline.base import Handler, ToolCallRequest
from orchestrator.tools.results import ToolResult

UNKNOWN_TOOL = "There is no tool named {name!r}. Available tools: {available}."
INVALID_ARGUMENTS = "Invalid arguments for {name}: {problems}."


class ValidationMiddleware:
    """Checks the arguments (fixed ones included) and hands on the parsed parameters.

    A folder tool's action gets the parsed model as it is: it is not
    validated again. A bad argument is an error for the model to fix.
    """

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> ToolResult:
        if request.tool is None:
            available = ", ".join(request.available) or "none"
            message = UNKNOWN_TOOL.format(name=request.name, available=available)
            return request.failed(UnknownToolError(message))
        request.emit(ToolPhase.VALIDATING)
        schema = parameters_model(request.tool)
        if schema is None:  # described by a raw JSON schema: the tool checks its own input
            return await handler(request)
        try:
            parsed = schema.model_validate(request.arguments)
        except ValidationError as error:
            problems = validation_problems(error)
            message = INVALID_ARGUMENTS.format(name=request.name, problems=problems)
            return request.failed(InvalidToolArgumentsError(message))
        return await handler(request.override(parsed=parsed))


def parameters_model(tool: BaseTool) -> type[BaseModel] | None:
    """Every parameter of the tool, those the model does not see included."""
    if isinstance(tool, ActionTool):
        return tool.spec.params
    schema = tool.args_schema
    return schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None
