"""Tool calls a model wrote as text, read back as calls.

Small models served without a tool parser (llama.cpp without `--jinja`, vLLM
without `--tool-call-parser`, many Ollama models) write their call as the
reply's text:

    {"name": "current_time", "arguments": {"timezone": "Asia/Tokyo"}}
    ```json
    {"name": "current_time", "parameters": {"timezone": "Asia/Tokyo"}}
    ```
    <tool_call>{"name": "current_time", "arguments": {"timezone": "Asia/Tokyo"}}</tool_call>

A reply is read as calls only when it is nothing but calls and whitespace, and
every call names a tool offered at its level: anything else stays text. A
model that quotes a call among its words ("for reference, do not run it") is
not taken to make it. The calls may be bare objects (several one after another,
or a JSON list), fences or tags (a last tag left open, a fence inside a tag).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass

from orchestrator.llm.reply import RawCall, Reply

# The last tag may be left open: a model often stops right after its call.
TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
FENCED = re.compile(r"```[ \t]*(?i:json|tool_call)?[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL)
FENCE_LANGUAGES = ("json", "tool_call")
ARGUMENTS = ("arguments", "parameters")
FENCE_WORD = re.compile(r"[ \t]*([A-Za-z_]*)")

_DECODER = json.JSONDecoder()

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextCall:
    """One call read from text: the tool's name, its arguments, a fresh call id."""

    name: str
    args: dict[str, object]
    id: str


def with_text_calls(reply: Reply, *, tool_names: frozenset[str]) -> Reply:
    """`reply` with the calls its text is as real calls (and no text left)."""
    if reply.calls:
        return reply
    found = read_text_calls(reply.message.text, tool_names=tool_names)
    if found is None:
        return reply
    logger.debug("read %d tool call(s) from the reply's text", len(found))
    message = reply.message.model_copy(update={"content": ""})
    calls = [RawCall(name=call.name, id=call.id, args=call.args) for call in found]
    return Reply(message, calls, reply.finish_reason)


def read_text_calls(text: str, *, tool_names: frozenset[str]) -> list[TextCall] | None:
    """The calls `text` is, if it is nothing else and they all name offered tools; else None."""
    stripped = text.strip()
    if not stripped or not tool_names:
        return None
    for pattern in (TAGGED, FENCED):
        blocks = list(pattern.finditer(stripped))
        if blocks:
            return _from_blocks(stripped, blocks, pattern, tool_names)
    return _offered(_calls_in(stripped), tool_names)


def _from_blocks(
    text: str, blocks: list[re.Match[str]], pattern: re.Pattern[str], tool_names: frozenset[str]
) -> list[TextCall] | None:
    if pattern.sub("", text).strip():
        return None  # words beside the blocks: the model shows a call, it does not make one
    calls: list[TextCall] = []
    for block in blocks:
        fenced = FENCED.fullmatch(block.group(1))  # a fence inside a tag
        found = _calls_in(fenced.group(1) if fenced else block.group(1))
        if found is None:
            return None  # a fence of other JSON or code: the reply is text
        calls += found
    return _offered(calls, tool_names)


def _offered(calls: list[TextCall] | None, tool_names: frozenset[str]) -> list[TextCall] | None:
    if not calls or any(call.name not in tool_names for call in calls):
        return None
    return calls


def _calls_in(text: str) -> list[TextCall] | None:
    """The calls of JSON text: an object, a list of them, or objects one after another."""
    values: list[object] = []
    position = 0
    text = text.strip()
    while position < len(text):
        try:
            value, position = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError:
            return None
        values += value if isinstance(value, list) else [value]
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
    calls: list[TextCall] = []
    for value in values:
        call = _call(value)
        if call is None:
            return None
        calls.append(call)
    return calls or None


def _call(value: object) -> TextCall | None:
    if not isinstance(value, dict):
        return None
    function = value.get("function")
    if isinstance(function, dict):  # {"type": "function", "function": {...}}
        value = function
    name = value.get("name")
    arguments = next((value[key] for key in ARGUMENTS if value.get(key) is not None), {})
    if isinstance(arguments, str):  # OpenAI writes arguments as JSON text
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return None
    extra = set(value) - {"name", *ARGUMENTS, "type", "id"}
    if not isinstance(name, str) or not isinstance(arguments, dict) or extra:
        return None
    if value.get("type", "function") != "function":  # a schema with a "name", say
        return None
    return TextCall(name=name, args=arguments, id=f"call_{uuid.uuid4().hex[:24]}")


def may_begin_call(text: str) -> bool:
    """Whether `text` may still turn out to begin a call written as text (more may follow)."""
    text = text.lstrip()
    if not text:
        return True
    if text[0] in "{[":
        rest = text[1:].lstrip()
        return not rest or rest[0] == ('"' if text[0] == "{" else "{")
    if text[0] == "<":
        return "<tool_call>".startswith(text[:11])
    if text[0] == "`":
        return _may_begin_fence(text)
    return False


def _may_begin_fence(text: str) -> bool:
    if not "```".startswith(text[:3]):
        return False
    language = FENCE_WORD.match(text, 3)
    if language is None:
        return False
    word, rest = language.group(1), text[language.end() :]
    if word and not any(name.startswith(word.lower()) for name in FENCE_LANGUAGES):
        return False
    rest = rest.lstrip(" \t\r\n")
    return not rest or rest[0] in "{["
