"""Validation, once per call: the arguments against the tool's parameters, before anything runs."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from orchestrator.errors import InvalidToolArgumentsError, UnknownToolError, validation_problems
from orchestrator.events import ToolPhase
from orchestrator.tools.adapter import ActionTool
from orchestrator.tools.pipeline.base import Handler, ToolCallRequest
from orchestrator.tools.results import ToolResult

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as JsonSchemaError
    from jsonschema.protocols import Validator

UNKNOWN_TOOL = "There is no tool named {name!r}. Available tools: {available}."
INVALID_ARGUMENTS = "Invalid arguments for {name}: {problems}."
MAX_PROBLEMS = 5  # of a JSON-schema check, in one message
# Words of a JSON schema that small models write among a call's arguments.
SCHEMA_WORDS = frozenset({"type", "required", "properties"})

logger = logging.getLogger(__name__)


class ValidationMiddleware:
    """Checks the arguments (fixed ones included) and hands on the parsed parameters.

    A folder tool's action gets the parsed model as it is: it is not
    validated again. A bad argument is an error for the model to fix.
    Small models copy JSON-schema words (`type`, `required`, `properties`)
    beside the real arguments: such keys no parameter declares are dropped
    when the rest is valid.
    """

    async def awrap_tool_call(self, request: ToolCallRequest, handler: Handler) -> ToolResult:
        if request.tool is None:
            available = ", ".join(request.available) or "none"
            message = UNKNOWN_TOOL.format(name=request.name, available=available)
            return request.failed(UnknownToolError(message))
        request.emit(ToolPhase.VALIDATING)
        tool = request.tool
        stray = schema_words(tool, request.arguments)
        if stray:
            cleaned = {k: v for k, v in request.arguments.items() if k not in stray}
            valid = _checked(request.override(arguments=cleaned), tool)
            if isinstance(valid, ToolCallRequest):
                logger.debug("%s: dropped schema words %s from the arguments", request.name, stray)
                return await handler(valid)
        checked = _checked(request, tool)
        return await handler(checked) if isinstance(checked, ToolCallRequest) else checked


def _checked(request: ToolCallRequest, tool: BaseTool) -> ToolCallRequest | ToolResult:
    """The request with its parsed parameters, or the failure to send the model."""
    schema = parameters_model(tool)
    if schema is None:  # described by a JSON schema (an MCP tool, say)
        problems = json_problems(tool, request.arguments)
        if problems:
            message = INVALID_ARGUMENTS.format(name=request.name, problems=problems)
            return request.failed(InvalidToolArgumentsError(message))
        return request
    try:
        return request.override(parsed=schema.model_validate(request.arguments))
    except ValidationError as error:
        message = INVALID_ARGUMENTS.format(name=request.name, problems=validation_problems(error))
        return request.failed(InvalidToolArgumentsError(message))


def schema_words(tool: BaseTool, arguments: Mapping[str, object]) -> list[str]:
    """The argument keys that are JSON-schema words and none of the tool's parameters."""
    stray = [key for key in arguments if key in SCHEMA_WORDS]
    if not stray:
        return []
    declared = declared_parameters(tool)
    return [key for key in stray if key not in declared]


def declared_parameters(tool: BaseTool) -> set[str]:
    """The names (and aliases) of the tool's parameters."""
    model = parameters_model(tool)
    if model is not None:
        fields = model.model_fields.values()
        return set(model.model_fields) | {f.alias for f in fields if f.alias}
    schema = getattr(tool, "full_schema", None) or tool.args_schema
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return set(properties) if isinstance(properties, dict) else set()


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
    # Imported with the first JSON-schema tool's call: most runs have none.
    from jsonschema import validators

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
