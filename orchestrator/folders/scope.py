"""AI scope per parameter: which parameters of an action the model sets, which are fixed.

A tool's author marks the parameters a model must never control with `NotAI`
in the action's parameter model; unmarked parameters are the model's to set:

    class Fetch(BaseModel):
        url: str = Field(description="The page to fetch.")
        api_key: Annotated[str, NotAI] = Field(description="The service's key.")

The folder's `tool_config.yaml` then chooses, per parameter name (for every
action that has a parameter of that name):

    parameters:
      url: ai                    # the model sets it (the default for unmarked ones)
      api_key: {value: "..."}    # fixed: the model neither sees nor sets it

A marked parameter takes its fixed value from the configuration, else its
default; one with neither makes the folder fail to load, as does `ai` for a
marked parameter, a name no action has, or a value of the wrong type. The same
tool code serves every choice: the schema the model sees (`ActionScope.visible`)
lacks the hidden parameters, and the dispatch pipeline adds the fixed values to
the model's arguments before they are validated against the full model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, TypeAlias

from pydantic import BaseModel, JsonValue, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo

from orchestrator.errors import validation_problems
from orchestrator.folders.loader import ToolLoadError
from orchestrator.folders.tool_config import FixedValue, ParameterChoice
from orchestrator.tools.base import ActionSpec, Tool
from orchestrator.tools.not_ai import NotAI

__all__ = ["ActionScope", "NotAI", "ParameterChoice", "resolve_scopes"]


Choices: TypeAlias = Mapping[str, ParameterChoice]

NO_VALUE = (
    "{where}: parameter {name} may not be set by the model and tool_config.yaml gives no value: "
    "add parameters: {{{name}: {{value: ...}}}}"
)
NOT_AI = (
    "{where}: parameter {name} may not be set by the model (its author marked it NotAI), "
    "but tool_config.yaml says `{name}: ai`: give it a value instead"
)
UNKNOWN = "{tool}: tool_config.yaml names parameter {name}, which none of its actions has{known}"
BAD_VALUE = "{where}: tool_config.yaml's value for parameter {name} is invalid: {problems}"


@dataclass(frozen=True)
class ActionScope:
    """What the model controls of one action's parameters.

    `visible` is the schema the model sees: the action's parameter model less
    the `hidden` parameters, with the same field descriptions, constraints,
    defaults and docstring (it only describes: calls are validated against the
    full model, with `fixed` merged in). `hidden` holds the argument names the
    model may not send; `fixed` the values the configuration gives some of
    them (the others take their defaults).
    """

    visible: type[BaseModel]
    fixed: dict[str, JsonValue]
    hidden: frozenset[str]


def resolve_scopes(tool: Tool, choices: Choices) -> dict[str, ActionScope]:
    """The scope of each action of `tool` that hides a parameter, under `choices`.

    `choices` is `tool_config.yaml`'s `parameters`. Actions that hide nothing
    are left out (their schema is their parameter model as it is). Raises
    ToolLoadError for a choice the tool's parameters do not allow.
    """
    _check_names(tool, choices)
    scopes = {}
    for spec in tool.actions.values():
        scope = _action_scope(tool, spec, choices)
        if scope is not None:
            scopes[spec.name] = scope
    return scopes


def _check_names(tool: Tool, choices: Choices) -> None:
    if not choices:
        return
    known = {name for spec in tool.actions.values() for name in spec.params.model_fields}
    for name in choices:
        if name not in known:
            listed = f" (its parameters: {', '.join(sorted(known))})" if known else ""
            raise ToolLoadError(UNKNOWN.format(tool=tool.name, name=name, known=listed))


def _action_scope(tool: Tool, spec: ActionSpec, choices: Choices) -> ActionScope | None:
    marked = never_ai(spec.params)
    if not marked and not choices:  # the common case: nothing to build
        return None
    where = f"{tool.name}.{spec.name}"
    hidden: set[str] = set()
    fixed: dict[str, JsonValue] = {}
    for name, field in spec.params.model_fields.items():
        choice = choices.get(name)
        if isinstance(choice, FixedValue):
            key = _argument_key(name, field)
            hidden.add(key)
            fixed[key] = _checked(choice.value, field, where=where, name=name)
        elif name in marked:
            if choice == "ai":
                raise ToolLoadError(NOT_AI.format(where=where, name=name))
            if field.is_required():
                raise ToolLoadError(NO_VALUE.format(where=where, name=name))
            hidden.add(_argument_key(name, field))  # it takes its default
    if not hidden:
        return None
    frozen = frozenset(hidden)
    return ActionScope(visible=visible_model(spec.params, frozen), fixed=fixed, hidden=frozen)


@cache
def never_ai(params: type[BaseModel]) -> frozenset[str]:
    """The names of the fields of `params` marked `NotAI`."""
    return frozenset(
        name
        for name, field in params.model_fields.items()
        if any(item is NotAI for item in field.metadata)
    )


@cache
def visible_model(params: type[BaseModel], hidden: frozenset[str]) -> type[BaseModel]:
    """`params` without the fields whose argument names are in `hidden`: a schema, no validators."""
    kept = {
        name: (field.annotation, field)
        for name, field in params.model_fields.items()
        if _argument_key(name, field) not in hidden
    }
    # `**kept` could, for the checker, fill create_model's own keywords (`__base__`, ...):
    # its keys are the model's field names, which never start with `__`.
    return create_model(  # pyright: ignore[reportCallIssue]
        params.__name__,
        __config__=params.model_config,
        __doc__=params.__doc__,
        __module__=params.__module__,
        **kept,  # pyright: ignore[reportArgumentType]  # as above: field names only
    )


def _argument_key(name: str, field: FieldInfo) -> str:
    """The name the model's arguments use for the field (its alias, if it has one)."""
    alias = field.validation_alias if isinstance(field.validation_alias, str) else field.alias
    return alias or name


def _checked(value: JsonValue, field: FieldInfo, *, where: str, name: str) -> JsonValue:
    """`value` if it is valid for the field (type and constraints), else a ToolLoadError."""
    # Annotated keeps the field's constraints (`ge`, `max_length`, ...) from its metadata.
    annotation = field.annotation
    if field.metadata:
        annotation = Annotated[(annotation, *field.metadata)]
    # Annotated built at run time: a type form the checker cannot follow.
    adapter: TypeAdapter[object] = TypeAdapter(annotation)  # pyright: ignore[reportArgumentType]
    try:
        adapter.validate_python(value)
    except ValidationError as error:
        problems = validation_problems(error)
        raise ToolLoadError(BAD_VALUE.format(where=where, name=name, problems=problems)) from None
    return value
