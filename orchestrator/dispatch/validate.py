"""Validation, once per call: the arguments against the tool's parameters, before anything runs."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from langchain_core.tools import BaseTool
from pydantic import BaseModel, JsonValue, ValidationError

from orchestrator.dispatch.json_check import json_problems as json_problems  # re-exported
from orchestrator.dispatch.json_check import json_problems_within
from orchestrator.dispatch.json_shape import call_schema, is_object, properties
from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.errors import (
    InvalidToolArgumentsError,
    UnknownToolError,
    validation_details,
    validation_problems,
)
from orchestrator.events import ToolPhase
from orchestrator.sources.adapter import ActionTool
from orchestrator.tools.results import ToolResult

UNKNOWN_TOOL = "There is no tool named {name!r}. Available tools: {available}."
INVALID_ARGUMENTS = "Invalid arguments for {name}: {problems}."
UNKNOWN_ARGUMENTS = (
    "Invalid arguments for {name}: it takes no {names} (its parameters: {known}); "
    "leave them out or use one of those"
)
# Words of a JSON schema that small models write among a call's arguments.
SCHEMA_WORDS = frozenset({"type", "required", "properties"})

logger = logging.getLogger(__name__)


class ValidationMiddleware:
    """Checks the arguments (fixed ones included) and hands on the parsed parameters.

    A folder tool's action gets the parsed model as it is: it is not
    validated again. A bad argument is an error for the model to fix.
    Small models copy JSON-schema words (`type`, `required`, `properties`)
    beside the real arguments: such keys no parameter declares are dropped
    when the rest is valid. Any other key no parameter declares is refused,
    naming the parameters there are: dropped, it would read as done (an
    email's `bcc` never sent). A parameter model with `extra="allow"` or
    `extra="ignore"` (an MCP tool's schema with `additionalProperties`) takes them.
    """

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        if request.unavailable is not None:
            return request.failed(request.unavailable)
        if request.tool is None:
            available = ", ".join(request.available) or "none"
            message = UNKNOWN_TOOL.format(name=request.name, available=available)
            return request.failed(UnknownToolError(message))
        request.emit(ToolPhase.VALIDATING)
        tool = request.tool
        stray = schema_words(tool, request.arguments)
        unknown = [key for key in unknown_parameters(tool, request.arguments) if key not in stray]
        if unknown:
            details: dict[str, JsonValue] = {
                "unknown": list(unknown),
                "known": list(visible_parameters(tool)),
            }
            error = InvalidToolArgumentsError(unknown_arguments(tool, unknown), details=details)
            return request.failed(error)
        if stray:
            cleaned = {k: v for k, v in request.arguments.items() if k not in stray}
            valid = await _checked(request.override(arguments=cleaned), tool)
            if isinstance(valid, CallRequest):
                logger.debug("%s: dropped schema words %s from the arguments", request.name, stray)
                return await handler(valid)
        checked = await _checked(request, tool)
        return await handler(checked) if isinstance(checked, CallRequest) else checked


def unknown_arguments(tool: BaseTool, unknown: list[str]) -> str:
    """The line refusing the arguments `unknown` of `tool`, naming the parameters it has."""
    known = ", ".join(visible_parameters(tool)) or "none"
    names = ", ".join(repr(key) for key in unknown)
    return UNKNOWN_ARGUMENTS.format(name=tool.name, names=names, known=known)


def unknown_parameters(tool: BaseTool, arguments: Mapping[str, object]) -> list[str]:
    """The keys of `arguments` no parameter of `tool` has (none when its schema takes any)."""
    model = parameters_model(tool)
    if model is not None:
        if model.model_config.get("extra") in ("allow", "ignore"):  # said so: it takes them
            return []
    else:  # a JSON schema, if any: one without properties, or open to more, takes any key
        schema: object = getattr(tool, "full_schema", None) or tool.args_schema
        if not is_object(schema) or not is_object(schema.get("properties")):
            return []
        if schema.get("additionalProperties") not in (None, False):
            return []
    declared = declared_parameters(tool)
    return [key for key in arguments if key not in declared]


def visible_parameters(tool: BaseTool) -> list[str]:
    """The names of the parameters the caller may set (those the configuration fixes left out)."""
    return list(properties(call_schema(tool)))


async def _checked(request: CallRequest, tool: BaseTool) -> CallRequest | ToolResult:
    """The request with its parsed parameters, or the failure to send the model."""
    schema = parameters_model(tool)
    if schema is None:  # described by a JSON schema (an MCP tool, say): checked off the loop
        seconds = request.policy.timeout_seconds
        problems = await json_problems_within(tool, request.arguments, seconds=seconds)
        if problems:
            message = INVALID_ARGUMENTS.format(name=request.name, problems=problems)
            return request.failed(InvalidToolArgumentsError(message))
        return request
    try:
        return request.override(parsed=schema.model_validate(request.arguments))
    except ValidationError as error:
        message = INVALID_ARGUMENTS.format(name=request.name, problems=validation_problems(error))
        details = validation_details(error)
        return request.failed(InvalidToolArgumentsError(message, details=details))


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
    schema: object = getattr(tool, "full_schema", None) or tool.args_schema
    return set(properties(schema))


def parameters_model(tool: BaseTool) -> type[BaseModel] | None:
    """Every parameter of the tool, those the model does not see included."""
    if isinstance(tool, ActionTool):
        return tool.spec.params
    schema = tool.args_schema
    return schema if isinstance(schema, type) and issubclass(schema, BaseModel) else None
