"""Validation, once per call: the arguments against the tool's parameters, before anything runs."""

from __future__ import annotations

from collections.abc import Mapping

from jsonschema import validators
from jsonschema.exceptions import ValidationError as JsonSchemaError
from jsonschema.protocols import Validator
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from orchestrator.errors import InvalidToolArgumentsError, UnknownToolError, validation_problems
from orchestrator.events import ToolPhase
from orchestrator.tools.adapter import ActionTool
from orchestrator.tools.pipeline.base import Handler, ToolCallRequest
from orchestrator.tools.results import ToolResult

UNKNOWN_TOOL = "There is no tool named {name!r}. Available tools: {available}."
INVALID_ARGUMENTS = "Invalid arguments for {name}: {problems}."
MAX_PROBLEMS = 5  # of a JSON-schema check, in one message


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
        if schema is None:  # described by a JSON schema (an MCP tool, say)
            problems = json_problems(request.tool, request.arguments)
            if problems:
                message = INVALID_ARGUMENTS.format(name=request.name, problems=problems)
                return request.failed(InvalidToolArgumentsError(message))
            return await handler(request)
        try:
            parsed = schema.model_validate(request.arguments)
        except ValidationError as error:
            problems = validation_problems(error)
            message = INVALID_ARGUMENTS.format(name=request.name, problems=problems)
            return request.failed(InvalidToolArgumentsError(message))
        return await handler(request.override(parsed=parsed))


def json_problems(tool: BaseTool, arguments: Mapping[str, object]) -> str | None:
    """What is wrong with `arguments` for a tool described by a JSON schema (None: nothing).

    The schema is the tool's whole one (`full_schema`, hidden parameters
    included), else its `args_schema`; a tool with neither checks its own input.
    """
    schema = getattr(tool, "full_schema", None) or tool.args_schema
    if not isinstance(schema, dict):
        return None
    errors = sorted(_validator(schema).iter_errors(dict(arguments)), key=str)
    if not errors:
        return None
    return "; ".join(_json_problem(error) for error in errors[:MAX_PROBLEMS])


# Per schema (by id, with the schema itself to tell a reused id): its validator, made once.
_VALIDATORS: dict[int, tuple[dict[str, object], Validator]] = {}


def _validator(schema: dict[str, object]) -> Validator:
    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = _VALIDATORS[id(schema)] = (schema, validators.validator_for(schema)(schema))
    return cached[1]


def _json_problem(error: JsonSchemaError) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def parameters_model(tool: BaseTool) -> type[BaseModel] | None:
    """Every parameter of the tool, those the model does not see included."""
    if isinstance(tool, ActionTool):
        return tool.spec.params
    schema = tool.args_schema
    return schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None
