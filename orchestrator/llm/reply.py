"""A model's reply, read from its stream within size limits, with its tool calls still raw.

LangChain merges a stream's tool-call chunks by re-joining and re-parsing the
whole argument text at every step (`parse_partial_json`, quadratic), and
repairs arguments that were cut off. Here the pieces are joined once, the
stream stops being read as soon as a tool name or arguments outgrow their
limit, and argument text is kept as it came, for the caller to judge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import aclosing
from dataclasses import dataclass

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCallChunk
from langchain_core.messages.utils import message_chunk_to_message
from langchain_core.runnables import Runnable, RunnableConfig

# A tool name past this is no tool's (OpenAI allows 64 characters).
MAX_NAME_CHARS = 256
# Arguments past this are not read: far above what a tool takes (about 25k tokens),
# and LangChain's client spends about a second on every 50k characters streamed.
MAX_ARGUMENT_CHARS = 100_000
# The keys under which providers report why a reply ended.
FINISH_KEYS = ("finish_reason", "stop_reason", "done_reason")


@dataclass(frozen=True)
class ReplyLimits:
    """How long a tool name and a call's arguments may grow before the reply stops being read."""

    max_name_chars: int = MAX_NAME_CHARS
    max_argument_chars: int = MAX_ARGUMENT_CHARS


@dataclass(frozen=True)
class RawCall:
    """One tool call as the model sent it.

    `arguments` is the text sent; `args` replaces it when the provider parsed
    the arguments itself (a reply that was not streamed). `oversized` names
    what outgrew its limit ("name" or "arguments"), both then cut short.
    """

    name: str
    id: str | None
    arguments: str | None = None
    args: dict[str, object] | None = None
    oversized: str | None = None


@dataclass(frozen=True)
class Reply:
    """The reply without its tool calls, the raw calls, and why it ended (None: not said).

    The stream is left unread past an oversized call: it is the last call then.
    """

    message: AIMessage
    calls: list[RawCall]
    finish_reason: str | None


async def read_reply(
    model: Runnable[LanguageModelInput, BaseMessage],
    messages: Iterable[BaseMessage],
    config: RunnableConfig,
    *,
    limits: ReplyLimits,
) -> Reply:
    """Stream the model's reply to `messages`, not past an oversized tool call."""
    chunks: list[AIMessageChunk] = []
    calls: dict[object, _Streamed] = {}
    # Closed as soon as it is left, so that the server's connection is let go at once.
    async with aclosing(model.astream(list(messages), config)) as stream:
        async for item in stream:
            if not isinstance(item, AIMessageChunk):  # a model that does not stream
                return _whole(item, limits=limits)
            chunks.append(_without_calls(item))
            if _add_pieces(calls, item.tool_call_chunks, limits=limits) is not None:
                break
    message = _merged(chunks)
    raw = [streamed.call(limits) for streamed in calls.values()]
    return Reply(message, raw, finish_reason(message))


def finish_reason(message: BaseMessage) -> str | None:
    """Why the provider says the reply ended, if it says."""
    metadata = message.response_metadata
    return next((str(metadata[k]) for k in FINISH_KEYS if metadata.get(k)), None)


class _Streamed:
    """The pieces of one streamed call, joined once at the end."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.names: list[str] = []
        self.arguments: list[str] = []
        self.name_chars = 0
        self.argument_chars = 0

    def add(self, piece: ToolCallChunk) -> None:
        if name := piece.get("name"):
            self.names.append(name)
            self.name_chars += len(name)
        if arguments := piece.get("args"):
            self.arguments.append(arguments)
            self.argument_chars += len(arguments)
        self.id = self.id or piece.get("id")

    def oversized(self, limits: ReplyLimits) -> str | None:
        return _oversized(self.name_chars, self.argument_chars, limits)

    def call(self, limits: ReplyLimits) -> RawCall:
        # What outgrew its limit is cut there: nobody reads it in full.
        return RawCall(
            name="".join(self.names)[: limits.max_name_chars],
            id=self.id,
            arguments="".join(self.arguments)[: limits.max_argument_chars],
            oversized=self.oversized(limits),
        )


def _oversized(name_chars: int, argument_chars: int, limits: ReplyLimits) -> str | None:
    if name_chars > limits.max_name_chars:
        return "name"
    return "arguments" if argument_chars > limits.max_argument_chars else None


def _add_pieces(
    calls: dict[object, _Streamed], pieces: list[ToolCallChunk], *, limits: ReplyLimits
) -> str | None:
    """Add a chunk's tool-call pieces; what outgrew its limit, if anything did."""
    for piece in pieces:
        # Pieces of one call share an index; a piece without one is a call of its own.
        index = piece.get("index")
        streamed = calls.setdefault(len(calls) if index is None else ("index", index), _Streamed())
        streamed.add(piece)
        if (oversized := streamed.oversized(limits)) is not None:
            return oversized
    return None


def _without_calls(chunk: AIMessageChunk) -> AIMessageChunk:
    # Raw calls in `additional_kwargs` would reach the next request unchecked.
    kwargs = {
        k: v for k, v in chunk.additional_kwargs.items() if k not in ("tool_calls", "function_call")
    }
    update = {"tool_call_chunks": [], "tool_calls": [], "invalid_tool_calls": []}
    return chunk.model_copy(update={**update, "additional_kwargs": kwargs})


def _merged(chunks: list[AIMessageChunk]) -> AIMessage:
    if not chunks:
        return AIMessage(content="")
    merged = chunks[0] + chunks[1:] if len(chunks) > 1 else chunks[0]
    message = message_chunk_to_message(merged)
    return message if isinstance(message, AIMessage) else AIMessage(content=message.content)


def _whole(message: BaseMessage, *, limits: ReplyLimits) -> Reply:
    """A reply that came in one piece, its calls already parsed by the provider."""
    if not isinstance(message, AIMessage):
        message = AIMessage(content=message.content, id=message.id)
    calls = [_parsed(c["name"], c["id"], c["args"], limits) for c in message.tool_calls]
    calls += [
        _parsed(c["name"] or "", c["id"], c["args"] or "", limits)
        for c in message.invalid_tool_calls
    ]
    bare = message.model_copy(update={"tool_calls": [], "invalid_tool_calls": []})
    return Reply(bare, calls, finish_reason(message))


def _parsed(name: str, id: str | None, args: object, limits: ReplyLimits) -> RawCall:
    # Arguments that are not an object go on as text, for the caller to refuse.
    if isinstance(args, dict):
        text = None
    else:
        text = args if isinstance(args, str) else json.dumps(args, default=str)
    size = len(text) if text is not None else len(json.dumps(args, default=str))
    oversized = _oversized(len(name), size, limits)
    return RawCall(
        name=name[: limits.max_name_chars],
        id=id,
        arguments=None if text is None else text[: limits.max_argument_chars],
        args=args if isinstance(args, dict) and not oversized else None,
        oversized=oversized,
    )
