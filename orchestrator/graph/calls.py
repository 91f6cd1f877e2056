"""The model's tool calls, checked before anything runs, shows or stores them.

Every call the model made stays in its message, so that every call gets an
answer and the history stays valid for strict servers (OpenAI answers 400 to
a call without a reply, an empty id or arguments that are not an object).
A call that must not run keeps a valid name and id and empty arguments, and
`rejected` says why, for the tools node to answer in its place.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TypedDict

from langchain_core.messages import ToolCall, ToolMessage

from orchestrator.dispatch.json_shape import is_object
from orchestrator.errors import InvalidToolArgumentsError, UnknownToolError
from orchestrator.graph.prompts import (
    CALL_BAD_NAME,
    CALL_CUT_OFF,
    CALL_NOT_JSON,
    CALL_NOT_OBJECT,
    CALL_TOO_LARGE,
)
from orchestrator.llm.reply import RawCall, Reply, ReplyLimits
from orchestrator.tools.results import ToolResult

# What OpenAI accepts as a function name; other names are shown and stored cleaned.
SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
INVALID_NAME = "invalid_tool_name"
# Ids as providers write them: printable ASCII without spaces, not too long.
SAFE_ID = re.compile(r"[!-~]{1,128}")
PREVIEW_CHARS = 80


class Rejection(TypedDict):
    """Why one call was not run: the error code and the message for the model."""

    code: str
    message: str


@dataclass(frozen=True)
class CheckedCalls:
    """Every call with a valid name, a unique id and object arguments; the ones not to run."""

    calls: list[ToolCall]
    rejected: dict[str, Rejection]


def check_calls(
    reply: Reply, *, tool_names: Collection[str], limits: ReplyLimits, cut: bool
) -> CheckedCalls:
    """Check each call of `reply`; `cut`: the reply may have ended before its last call did."""
    calls: list[ToolCall] = []
    rejected: dict[str, Rejection] = {}
    used: set[str] = set()
    last = len(reply.calls) - 1
    for position, raw in enumerate(reply.calls):
        call_id = unique_id(raw.id, used)
        name = raw.name if valid_name(raw.name, tool_names) else cleaned_name(raw.name)
        # Only the last call can have been cut: the stream moved on from the others.
        how = _how(reply) if cut and position == last else None
        args, rejection = _checked(raw, tool_names=tool_names, limits=limits, how=how)
        calls.append(ToolCall(name=name, args=args, id=call_id, type="tool_call"))
        if rejection is not None:
            rejected[call_id] = rejection
    return CheckedCalls(calls=calls, rejected=rejected)


def refusal(call: ToolCall, rejection: Rejection, *, max_chars: int) -> ToolMessage:
    """The answer of a call that must not run: its error, in the envelope of tool results."""
    unknown = rejection["code"] == UnknownToolError.code
    error = (UnknownToolError if unknown else InvalidToolArgumentsError)(rejection["message"])
    result = ToolResult.from_error(error).model_copy(update={"request_id": uuid.uuid4().hex})
    return ToolMessage(
        content=result.to_model_text(max_chars=max_chars),
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="error",
        artifact=result.model_dump(mode="json"),
    )


def _checked(
    raw: RawCall, *, tool_names: Collection[str], limits: ReplyLimits, how: str | None
) -> tuple[dict[str, object], Rejection | None]:
    """The call's arguments, or empty ones and why the call must not run."""
    if raw.oversized is not None:
        limit = limits.max_name_chars if raw.oversized == "name" else limits.max_argument_chars
        return {}, _arguments_error(CALL_TOO_LARGE.format(what=raw.oversized, limit=limit))
    if not valid_name(raw.name, tool_names):
        available = ", ".join(sorted(tool_names)) or "none"
        message = CALL_BAD_NAME.format(name=_preview(raw.name), available=available)
        return {}, Rejection(code=UnknownToolError.code, message=message)
    if raw.args is not None:
        return raw.args, None
    return _parsed(raw.arguments or "", how=how)


def _parsed(text: str, *, how: str | None) -> tuple[dict[str, object], Rejection | None]:
    if not text.strip() and how is None:
        return {}, None  # no arguments at all: the call takes none
    try:
        value = json.loads(text, parse_constant=_not_json)
    except (ValueError, RecursionError) as error:  # RecursionError: nesting too deep
        if how is not None:
            return {}, _arguments_error(CALL_CUT_OFF.format(how=how, length=len(text)))
        return {}, _arguments_error(CALL_NOT_JSON.format(error=_first_line(error)))
    if not is_object(value):
        return {}, _arguments_error(CALL_NOT_OBJECT.format(kind=_kind(value)))
    return value, None


def _not_json(constant: str) -> object:
    # Python reads NaN and Infinity, which JSON has not: a strict server would refuse them.
    raise ValueError(f"{constant} is not JSON")


def _how(reply: Reply) -> str:
    """How a reply that may have ended early ended."""
    return "at its length limit" if reply.finish_reason == "length" else "without a finish reason"


def _arguments_error(message: str) -> Rejection:
    return Rejection(code=InvalidToolArgumentsError.code, message=message)


def valid_name(name: str, tool_names: Collection[str]) -> bool:
    """Whether `name` may be shown, stored and sent back as it is."""
    return name in tool_names or SAFE_NAME.fullmatch(name) is not None


def cleaned_name(name: str) -> str:
    """A name that may be shown, stored and sent back, made of what `name` has of one."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name[:64]).strip("_") or INVALID_NAME


def unique_id(
    given: str | None, used: set[str], *, fallback: Callable[[], str] | None = None
) -> str:
    """The provider's id when it is usable and not taken yet, else `fallback()` or a new one.

    `fallback` is called only when it is needed (it may hash: every model call mends the history).
    """
    if given is not None and SAFE_ID.fullmatch(given) and given not in used:
        call_id = given
    else:
        call_id = (fallback() if fallback else "") or f"call_{uuid.uuid4().hex[:24]}"
    used.add(call_id)
    return call_id


def _preview(text: str) -> str:
    shown = repr(text[:PREVIEW_CHARS])
    return f"{shown}… ({len(text)} characters)" if len(text) > PREVIEW_CHARS else shown


def _kind(value: object) -> str:
    if value is None:
        return "null"
    names: dict[type, str] = {
        list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"
    }
    return names.get(type(value), type(value).__name__)


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__
