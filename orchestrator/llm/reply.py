"""A model's reply, read from its stream within size and time limits, its tool calls still raw.

LangChain merges a stream's tool-call chunks by re-joining and re-parsing the
whole argument text at every step (`parse_partial_json`, quadratic), and
repairs arguments that were cut off. Here the pieces are joined once, the
stream stops being read as soon as a tool name or arguments outgrow their
limit, and argument text is kept as it came, for the caller to judge.

The whole reply, from the request to its last token, is bounded in time here,
and its output in tokens: whatever the provider, and whether its client's own
timeout (which bounds each read, not the reply) or the server's cap hold.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass
from typing import cast

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
# The finish reason of a reply cut at its length limit (OpenAI's word, which we use too).
LENGTH = "length"
# A token is rarely longer: a stream whose pieces hold several tokens each is
# counted by its characters too, at this many a token, so that it never errs low.
MAX_TOKEN_CHARS = 16


@dataclass(frozen=True)
class ReplyLimits:
    """How far a reply is read: a tool name, a call's arguments, its output, its time.

    `max_output_tokens` (None: as long as the model makes it) is asked of the
    provider and also held here; `timeout_seconds` (None: no bound) bounds the
    whole reply, its first token and its last.
    """

    max_name_chars: int = MAX_NAME_CHARS
    max_argument_chars: int = MAX_ARGUMENT_CHARS
    max_output_tokens: int | None = None
    timeout_seconds: float | None = None


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
    `capped`: the stream was left unread past `max_output_tokens`, the server
    not having ended it there (the finish reason is then `length`).
    """

    message: AIMessage
    calls: list[RawCall]
    finish_reason: str | None
    capped: bool = False


async def read_reply(
    model: Runnable[LanguageModelInput, BaseMessage],
    messages: Iterable[BaseMessage],
    config: RunnableConfig,
    *,
    limits: ReplyLimits,
) -> Reply:
    """Stream the model's reply to `messages`, not past an oversized tool call, its cap or its time.

    Raises ModelTimeoutError when the reply has not ended within `limits.timeout_seconds`.
    """
    stream = _Stream(limits)
    deadline = asyncio.timeout(limits.timeout_seconds)
    try:
        async with deadline:
            return await stream.read(model, list(messages), config, expired=deadline.expired)
    except Exception as error:
        # Past the deadline, the client's own timeout may have fired in the same breath.
        if not deadline.expired():
            raise
        # Imported only now: it imports the OpenAI client, which the offline model never needs.
        from orchestrator.llm.model_errors import reply_timeout

        seconds = float(limits.timeout_seconds or 0)
        received = stream.chars if stream.pieces else None  # None: not a token came
        raise reply_timeout(model, seconds=seconds, received=received) from error


def finish_reason(message: BaseMessage) -> str | None:
    """Why the provider says the reply ended, if it says."""
    metadata = message.response_metadata
    return next((str(metadata[k]) for k in FINISH_KEYS if metadata.get(k)), None)


class _Stream:
    """One reply as it streams in: its chunks, its calls' pieces, how much output came."""

    def __init__(self, limits: ReplyLimits) -> None:
        self.limits = limits
        self.chunks: list[AIMessageChunk] = []
        self.calls: dict[object, _Streamed] = {}
        self.pieces = 0  # chunks that carried output, a token at least each
        self.chars = 0

    async def read(
        self,
        model: Runnable[LanguageModelInput, BaseMessage],
        messages: list[BaseMessage],
        config: RunnableConfig,
        *,
        expired: Callable[[], bool],
    ) -> Reply:
        # Closed as soon as it is left, so that the server's connection is let go at once.
        # `astream` is an async generator, though LangChain types it an AsyncIterator.
        stream = cast("AsyncGenerator[BaseMessage]", model.astream(messages, config))
        async with aclosing(stream):
            async for item in stream:
                # The deadline cancels the read; before Python 3.12 an `asyncio.wait_for`
                # in a client (langchain-openai's per-chunk timeout) can swallow that
                # cancellation when a chunk lands at the same moment, and a stream that
                # never ends would then be read for ever.
                if expired():
                    raise TimeoutError("the reply outlived its deadline")
                if not isinstance(item, AIMessageChunk):  # a model that does not stream
                    return _whole(item, limits=self.limits)
                if self._past_cap(item):  # a server that does not hold the cap itself
                    return self._reply(capped=True)
                self.chunks.append(_without_calls(item))
                if _add_pieces(self.calls, item.tool_call_chunks, limits=self.limits) is not None:
                    break
        return self._reply(capped=False)

    def _past_cap(self, chunk: AIMessageChunk) -> bool:
        """Whether `chunk` takes the reply past its cap in tokens (if not, it is counted)."""
        arguments = sum(len(piece.get("args") or "") for piece in chunk.tool_call_chunks)
        added = len(chunk.text) + arguments
        if not added:
            return False
        pieces, chars = self.pieces + 1, self.chars + added
        cap = self.limits.max_output_tokens
        if cap is not None and max(pieces, math.ceil(chars / MAX_TOKEN_CHARS)) > cap:
            return True
        self.pieces, self.chars = pieces, chars
        return False

    def _reply(self, *, capped: bool) -> Reply:
        message = _merged(self.chunks)
        raw = [streamed.call(self.limits) for streamed in self.calls.values()]
        reason = LENGTH if capped else finish_reason(message)
        return Reply(message, raw, reason, capped=capped)


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
