"""A request in words turned into an action's parameters, or a clear error naming what is missing.

`to: a@b.c, subject: Hello, body: Hi there` is read as it is (offline too); a
sentence is given to the level's model with structured output, when one is
configured. An action with one text parameter takes a sentence whole offline, and
when the model read nothing for it (a model without structured output, a reply that
made no call). What the
text does not give, or gives in a form the action does not take, is an error
naming the field and its description: nothing runs on a guess. Parameters the
folder's configuration fixes cannot be set by the text.
"""

from __future__ import annotations

import json
import re
import time
import typing
from collections.abc import Mapping, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from orchestrator.actions.runnable import (
    Runnable,
    action_name,
    as_sent,
    description_of,
    folder_name,
    hidden_names,
    visible_model,
)
from orchestrator.errors import InvalidToolArgumentsError
from orchestrator.folders.tool_names import qualified_name
from orchestrator.graph.model_pipeline.model_usage import count_model_call
from orchestrator.llm.offline import OfflineChatModel
from orchestrator.sources.loaded import LoadedTool
from orchestrator.tools.context import RunContext
from orchestrator.usage.prices import ModelIdentity

FILL_PROMPT = (
    "Fill in the parameters of the action {operation} ({description}) from the person's "
    "request below. Set only what the request says; leave out anything it does not say. "
    "Never invent a value."
)
CHOOSE_PROMPT = "Which action does the person's request below ask for? One of: {actions}."
FIXED = (
    "{names} of {operation} {verb} fixed by the folder's configuration: the text cannot set "
    "{pronoun}"
)
UNREAD = (
    "Could not read the parameters of {operation} from the text: write them as `key: value`, "
    "separated by commas or lines ({fields})"
)
PROBLEM = "{operation}: {field} {problem}"
NO_ACTION = "Which action of {tool}? Name it before the request: {actions}"
LIST_SEPARATOR = re.compile(r"\s*[,;]\s*|\s+and\s+")


def choose_action(text: str, actions: Sequence[Runnable]) -> tuple[Runnable | None, str]:
    """The action the text names, without a model: the only one, its first word, or `action: X`.

    Returns (None, text) when the text does not say; the rest of the text otherwise.
    """
    if len(actions) == 1:
        return actions[0], text
    by_name = {action_name(tool).lower(): tool for tool in actions}
    first, _, rest = text.strip().partition(" ")
    if first.lower().rstrip(":") in by_name:
        return by_name[first.lower().rstrip(":")], rest
    said = re.search(r"(?:^|[\s,;])action\s*[:=]\s*(\w+)", text, re.IGNORECASE)
    if said and said.group(1).lower() in by_name:
        rest = (text[: said.start()] + text[said.end() :]).strip(" ,;")
        return by_name[said.group(1).lower()], rest
    return None, text


async def which_action(
    text: str,
    actions: Sequence[Runnable],
    *,
    model: BaseChatModel | None,
    run: RunContext | None = None,
) -> tuple[Runnable, str]:
    """The action the text asks for and the text for its parameters.

    Read without a model where the text says (see `choose_action`); else the
    level's model chooses, when there is one (its call counted on `run`'s meter).
    An error listing the actions otherwise.
    """
    found, rest = choose_action(text, actions)
    if found is not None:
        return found, rest
    names = [action_name(tool) for tool in actions]
    owner = folder_name(actions[0])
    if model is None:
        raise InvalidToolArgumentsError(NO_ACTION.format(tool=owner, actions=", ".join(names)))
    schema = {
        "title": "choose_action",
        "description": "The action the request asks for.",
        "type": "object",
        "properties": {"action": {"type": "string", "enum": names}},
        "required": ["action"],
    }
    listing = "; ".join(f"{action_name(tool)}: {description_of(tool)}" for tool in actions)
    prompt = [SystemMessage(CHOOSE_PROMPT.format(actions=listing)), HumanMessage(text)]
    chosen = await _structured(model, schema, prompt, run=run)
    name = chosen.get("action")
    for tool in actions:
        if action_name(tool) == name:
            return tool, text
    raise InvalidToolArgumentsError(NO_ACTION.format(tool=owner, actions=", ".join(names)))


async def parameters_from_text(
    text: str, tool: Runnable, *, model: BaseChatModel | None, run: RunContext | None = None
) -> dict[str, object]:
    """The parameters `text` gives for `tool`'s action, validated against what the caller may set.

    `model`: the level's model, asked with structured output when the text is
    not in `key: value` form (None: offline); its call is counted on `run`'s meter.
    No text gives no parameters: an action whose parameters are all optional runs on its
    defaults; another's error names what is missing.
    """
    visible = visible_model(tool)
    fixed = sorted(hidden_names(tool))
    pairs = read_pairs(text, visible, also=fixed) if text.strip() else {}  # nothing said: defaults
    if pairs is not None:
        _refuse_fixed(pairs, fixed, tool)
    elif model is not None:
        pairs = await _model_fill(model, text, tool, visible, run=run)
        if (field := _single_text_field(visible)) is not None and field not in pairs:
            # The model read nothing for it (no structured output, or no call made):
            # the sentence is read as offline, not refused as missing.
            pairs = {**pairs, field: text.strip()}
    elif (field := _single_text_field(visible)) is not None:
        pairs = {field: text.strip()}
    else:
        raise InvalidToolArgumentsError(
            UNREAD.format(operation=_operation(tool), fields=_field_list(visible))
        )
    return _validated(pairs, visible, tool)


def reading_model(folder: LoadedTool) -> BaseChatModel | None:
    """The folder's level's model, which reads a sentence; None for the offline model."""
    model = folder.level.model if folder.level is not None else None
    return None if model is None or isinstance(model, OfflineChatModel) else model


def read_pairs(
    text: str, model: type[BaseModel], *, also: Sequence[str] = ()
) -> dict[str, object] | None:
    """The `key: value` pairs of `text` for the fields of `model` (and the names `also`).

    None when the text has none. Only known names start a pair, so a value may
    hold commas and colons of its own; a list field's value is split at commas.
    """
    fields = model.model_fields
    names = sorted({*fields, *also}, key=len, reverse=True)
    if not names:
        return None
    pattern = re.compile(
        r"(?:^|(?<=[\s,;]))(" + "|".join(map(re.escape, names)) + r")\s*[:=]\s*", re.IGNORECASE
    )
    matches = list(pattern.finditer(text))
    if not matches:
        return None
    lower = {name.lower(): name for name in names}
    pairs: dict[str, object] = {}
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following is not None else len(text)
        raw = text[match.end() : end].strip().rstrip(",;").strip()
        name = lower[match.group(1).lower()]
        info = fields.get(name)
        pairs[name] = _value(raw, info.annotation if info is not None else None)
    return pairs


def _value(raw: str, annotation: object) -> object:
    """A list for a list field (split at commas); JSON where it reads as such; else the text."""
    if typing.get_origin(annotation) in (list, tuple, set, frozenset):
        if raw.startswith("["):
            try:
                return json.loads(raw)
            except json.JSONDecodeError:
                pass
        return [item.strip() for item in LIST_SEPARATOR.split(raw) if item.strip()]
    if raw[:1] in ("{", "["):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


async def _model_fill(
    model: BaseChatModel,
    text: str,
    tool: Runnable,
    visible: type[BaseModel],
    *,
    run: RunContext | None,
) -> dict[str, object]:
    """What the level's model reads in `text`, every field optional: what it leaves out stays out."""
    schema = visible.model_json_schema()
    schema.pop("required", None)
    schema["title"] = qualified_name(folder_name(tool), action_name(tool))
    schema.setdefault("description", description_of(tool))
    instruction = FILL_PROMPT.format(operation=_operation(tool), description=description_of(tool))
    prompt = [SystemMessage(instruction), HumanMessage(text)]
    filled = await _structured(model, schema, prompt, run=run)
    pairs = {name: value for name, value in filled.items() if value is not None}
    _refuse_fixed(pairs, sorted(hidden_names(tool)), tool)
    return {name: value for name, value in pairs.items() if name in visible.model_fields}


async def _structured(
    model: BaseChatModel,
    schema: dict[str, object],
    prompt: list[BaseMessage],
    *,
    run: RunContext | None,
) -> dict[str, object]:
    """What the model's tool call for `schema` holds, its call counted.

    Empty when it made none, or cannot make one (a model without tool calling).
    """
    started = time.monotonic()
    try:
        structured = model.with_structured_output(
            schema, method="function_calling", include_raw=True
        )
    except NotImplementedError:  # LangChain's word for a model without tool calling
        return {}
    reply = await structured.ainvoke(prompt)
    raw = reply.get("raw") if isinstance(reply, dict) else None
    if run is not None and isinstance(raw, AIMessage):
        seconds = time.monotonic() - started
        await count_model_call(run, ModelIdentity.of(model), raw, sent=prompt, seconds=seconds)
    parsed = reply.get("parsed") if isinstance(reply, dict) else None
    return parsed if isinstance(parsed, dict) else {}


def _validated(
    pairs: Mapping[str, object], visible: type[BaseModel], tool: Runnable
) -> dict[str, object]:
    """`pairs` as the caller may send them; the first problem as an error naming its field."""
    try:
        visible.model_validate(dict(pairs))
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "the parameters"
        info = visible.model_fields.get(field)
        described = (
            f"{field} ({info.description})" if info is not None and info.description else field
        )
        problem = "is missing" if first["type"] == "missing" else f"is not valid: {first['msg']}"
        raise InvalidToolArgumentsError(
            PROBLEM.format(operation=_operation(tool), field=described, problem=problem)
        ) from None
    return as_sent(tool, pairs, visible)


def _refuse_fixed(pairs: Mapping[str, object], fixed: Sequence[str], tool: Runnable) -> None:
    named = [name for name in fixed if name in pairs]
    if named:
        many = len(named) > 1
        raise InvalidToolArgumentsError(
            FIXED.format(
                names=", ".join(named),
                operation=_operation(tool),
                verb="are" if many else "is",
                pronoun="them" if many else "it",
            )
        )


def _single_text_field(visible: type[BaseModel]) -> str | None:
    """The one text field a sentence fills whole: the only required one (or the only one)."""
    fields = visible.model_fields
    required = [name for name, info in fields.items() if info.is_required()]
    candidates = required or list(fields)
    if len(candidates) == 1 and fields[candidates[0]].annotation is str:
        return candidates[0]
    return None


def _operation(tool: Runnable) -> str:
    return f"{folder_name(tool)}.{action_name(tool)}"


def _field_list(visible: type[BaseModel]) -> str:
    shown = []
    for name, info in visible.model_fields.items():
        mark = "" if info.is_required() else ", optional"
        shown.append(f"{name}{mark}: {info.description}" if info.description else f"{name}{mark}")
    return "; ".join(shown) or "it takes none"
