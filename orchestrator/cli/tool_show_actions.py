"""The actions `tools show` lists: a folder tool's, or an MCP server's, in one shape.

Each action: the name the model calls, the first line of its description,
whether a call needs the person's decision (and why), and its parameters with
who sets each. A value fixed by `tool_config.yaml` is never shown: it may be a
secret.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.errors import ToolLoadError
from orchestrator.folders.sensitivity import SensitivityRules, sensitive_actions
from orchestrator.folders.tool_names import qualified_name
from orchestrator.terminal.text import one_line, shown

if TYPE_CHECKING:
    from pydantic import BaseModel, JsonValue

    from orchestrator.folders.discovery import ToolFolder
    from orchestrator.folders.scope import ActionScope
    from orchestrator.settings import Settings
    from orchestrator.sources.mcp.definitions import ToolDefinition
    from orchestrator.sources.mcp.tool_scope import JsonScope
    from orchestrator.tools.base import Tool

Json = dict[str, object]

BY_MODEL = "the model"
BY_CONFIG = "tool_config.yaml"  # the value itself may be a secret: never shown
BY_DEFAULT = "its default (not the model)"


def folder_actions(
    tool: Tool, scopes: dict[str, ActionScope], settings: Settings, folder: ToolFolder
) -> list[Json]:
    """The actions of a folder's loaded `tool`, as its model sees them."""
    rules = SensitivityRules.of(settings.sensitive_words)
    try:
        marks = sensitive_actions(tool, folder.config)
    except ToolLoadError:  # startup skips such a folder and says why; here, shown unmarked
        marks = {}
    metadata = {"requires_approval": folder.config.requires_approval}
    return [
        {
            "name": qualified_name(tool.name, spec.name),
            "description": first_line(spec.description),
            "parameters": _parameters(spec.params, scopes.get(spec.name)),
            "needs_decision": rules.why(
                qualified_name(tool.name, spec.name), {**metadata, "sensitive": marks.get(spec.name)}
            ),
        }
        for spec in tool.actions.values()
    ]


def schema_action(
    tool: ToolDefinition, name: str, scope: JsonScope | None, needs_decision: str | None
) -> Json:
    """An action the model sees by its JSON schema (an MCP server's tool, a held folder's action)."""
    return {
        "name": name,
        "tool": tool.name,
        "description": first_line(tool.description or tool.title or tool.name),
        "parameters": _json_parameters(tool, scope),
        "needs_decision": needs_decision,
    }


def _json_parameters(tool: ToolDefinition, scope: JsonScope | None) -> list[Json]:
    properties = tool.inputSchema.get("properties")
    required = tool.inputSchema.get("required")
    fixed = scope.fixed if scope is not None else {}
    described = []
    for name, schema in (properties if isinstance(properties, dict) else {}).items():
        description = schema.get("description") if isinstance(schema, dict) else None
        described.append(
            parameter(
                name,
                kind=_schema_type(schema),
                required=isinstance(required, list) and name in required,
                description=description if isinstance(description, str) else "",
                set_by=BY_CONFIG if name in fixed else BY_MODEL,
            )
        )
    return described


def _schema_type(schema: JsonValue) -> str:
    """A JSON schema's type in a word or a few: `string`, `integer | null`, `array`."""
    if not isinstance(schema, dict):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    for combined in ("anyOf", "oneOf"):
        options = schema.get(combined)
        if isinstance(options, list):
            return " | ".join(_schema_type(option) for option in options)
    reference = schema.get("$ref")
    if isinstance(reference, str):
        return reference.rsplit("/", 1)[-1]
    return "enum" if "enum" in schema else "any"


def first_line(text: str) -> str:
    """The first line of a description (the rest is for the model)."""
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def parameter(
    name: str, *, kind: str, required: bool, description: str, set_by: str
) -> Json:
    """One parameter of an action, as shown."""
    return {
        "name": name,
        "type": kind,
        "required": required,
        "description": description,
        "set_by": set_by,
    }


def action_lines(report: Json) -> list[str]:
    """The `actions:` lines of a report, or why there are none to show."""
    actions = report.get("actions")
    if not isinstance(actions, list):
        return [f"  actions: {shown(str(report.get('actions_note')))}"]
    lines = ["  actions:"]
    for action in actions:
        name, description = shown(action["name"]), shown(one_line(action["description"]))
        lines.append(f"    [bold]{name}[/bold]: {description}")
        if action.get("needs_decision"):
            lines.append(f"      needs your decision: {shown(action['needs_decision'])}")
        for entry in action["parameters"]:
            required = "required" if entry["required"] else "optional"
            lines.append(
                f"      {shown(entry['name'])}: {shown(entry['type'])}, {required}, "
                f"set by {entry['set_by']}"
            )
    return lines


def _parameters(params: type[BaseModel], scope: ActionScope | None) -> list[Json]:
    hidden = scope.hidden if scope is not None else frozenset()
    fixed = scope.fixed if scope is not None else {}
    described = []
    for name, field in params.model_fields.items():
        key = field.alias or name
        set_by = BY_CONFIG if key in fixed else BY_DEFAULT if key in hidden else BY_MODEL
        described.append(
            parameter(
                key,
                kind=_type_name(field.annotation),
                required=field.is_required(),
                description=field.description or "",
                set_by=set_by,
            )
        )
    return described


def _type_name(annotation: object) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("datetime.", "")
