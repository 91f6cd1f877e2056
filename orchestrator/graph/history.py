"""The conversation as strict servers accept it, whatever an earlier version or crash left in it.

OpenAI-style servers answer 400 to every request whose history has a tool call
without an answer right after it, an answer to no call, or a call with an
empty id: one such message would fail every later turn of the session. The
model gets a mended copy; the stored history is left as it is.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage

from orchestrator.dispatch.json_shape import is_object
from orchestrator.errors import ToolError
from orchestrator.graph.calls import cleaned_name, unique_id, valid_name
from orchestrator.graph.prompts import NO_RESULT
from orchestrator.tools.results import ToolResult


def valid_history(
    messages: Sequence[BaseMessage], *, tool_names: Collection[str]
) -> list[BaseMessage]:
    """`messages` with each call answered right after its message, and no stray answers."""
    mended: list[BaseMessage] = []
    pending: dict[str, str] = {}  # the last model message's unanswered calls: id given -> id sent
    for message in messages:
        if isinstance(message, ToolMessage):
            if (call_id := pending.pop(message.tool_call_id, None)) is not None:
                mended.append(_answering(message, call_id))
            continue  # an answer to no call just before it
        mended.extend(_no_result(pending.values()))
        pending = {}
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            message, pending = _with_valid_calls(message, tool_names=tool_names)
        mended.append(message)
    mended.extend(_no_result(pending.values()))
    return mended


def _with_valid_calls(
    message: AIMessage, *, tool_names: Collection[str]
) -> tuple[AIMessage, dict[str, str]]:
    """The message with sendable calls only, and its calls' ids: id given -> id sent."""
    calls: list[ToolCall] = []
    ids: dict[str, str] = {}
    used: set[str] = set()
    for position, call in enumerate(message.tool_calls):
        call_id = unique_id(call.get("id"), used, fallback=lambda at=position: _stable_id(message, at))
        ids.setdefault(call.get("id") or "", call_id)
        name = call["name"] or ""
        name = name if valid_name(name, tool_names) else cleaned_name(name)
        given: object = call["args"]  # typed a dict; a provider's may be anything
        args = given if is_object(given) else {}
        calls.append(ToolCall(name=name, args=args, id=call_id, type="tool_call"))
    # Calls LangChain could not parse are sent as they are, yet were never answered.
    if calls == message.tool_calls and not message.invalid_tool_calls:
        return message, ids
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": []}), ids


def _stable_id(message: AIMessage, position: int) -> str:
    """The same id for the same call every time: the requests stay alike."""
    return f"call_{uuid.uuid5(uuid.NAMESPACE_OID, f'{message.id}:{position}').hex[:24]}"


def _answering(message: ToolMessage, call_id: str) -> ToolMessage:
    if message.tool_call_id == call_id:
        return message
    return message.model_copy(update={"tool_call_id": call_id})


def _no_result(call_ids: Iterable[str]) -> list[ToolMessage]:
    call_ids = list(call_ids)
    if not call_ids:
        return []
    result = ToolResult.from_error(ToolError(NO_RESULT, code="no_result", recoverable=False))
    content = result.to_model_text(max_chars=4 * len(NO_RESULT) + 200)
    return [ToolMessage(content=content, tool_call_id=i, status="error") for i in call_ids]
