"""JSON values as the type checker may see them: objects keyed by strings, arrays of values.

A tool's schema, its arguments and its result's data come as JSON; `isinstance(value,
dict)` alone tells the checker nothing of what is inside. These checks are the same
`isinstance`, saying what JSON guarantees: an object's keys are strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeGuard

from langchain_core.tools import BaseTool
from pydantic import BaseModel


def is_object(value: object) -> TypeGuard[dict[str, object]]:
    """Whether `value` is a JSON object (a dict: JSON's keys are strings)."""
    return isinstance(value, dict)


def is_mapping(value: object) -> TypeGuard[Mapping[str, object]]:
    """Whether `value` is a mapping, keyed by strings as a JSON object is (a dict or not)."""
    return isinstance(value, Mapping)


def is_array(value: object) -> TypeGuard[list[object]]:
    """Whether `value` is a JSON array (a list)."""
    return isinstance(value, list)


def properties(schema: object) -> dict[str, object]:
    """The `properties` of a JSON schema; {} when it has none (or is no schema)."""
    found = schema.get("properties") if is_object(schema) else None
    return found if is_object(found) else {}


def call_schema(tool: BaseTool) -> dict[str, object]:
    """The JSON schema of the arguments the model may set (its parameter model's, made)."""
    schema = tool.tool_call_schema
    if is_object(schema):
        return dict(schema)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return {}  # a pydantic v1 model (LangChain still takes one): its schema is not read here
