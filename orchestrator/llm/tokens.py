"""How many tokens a prompt takes, and how many a model takes in.

Counting is an estimate unless tiktoken has the model's encoding on this
machine already (it is never downloaded: a count must not wait on a
network): about four characters a token, rounded up, plus a few tokens a
message for its role and framing, and a tool call's name and arguments.
The estimate errs high for English text, so a prompt it says fits does.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # role and framing, as OpenAI counts them
DEFAULT_CONTEXT_TOKENS = 32000
PROFILE = "model profile"  # where `context_window` found the limit, when the profile gave it

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """The documented estimate: characters / 4, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def message_tokens(message: BaseMessage, *, count: TokenCounter = estimate_tokens) -> int:
    """Tokens one message takes in a prompt: its text, its tool calls, its framing."""
    text = message.content if isinstance(message.content, str) else json.dumps(message.content)
    tokens = MESSAGE_OVERHEAD + count(text)
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            tokens += MESSAGE_OVERHEAD + count(call["name"]) + count(json.dumps(call["args"]))
    return tokens


def prompt_tokens(messages: Iterable[BaseMessage], *, count: TokenCounter = estimate_tokens) -> int:
    """Tokens `messages` take together."""
    return sum(message_tokens(message, count=count) for message in messages)


def context_window(model: BaseChatModel, *, configured: int) -> tuple[int, str]:
    """The model's input limit and where it comes from: its profile, else `configured`."""
    profile = getattr(model, "profile", None) or {}
    limit = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    if isinstance(limit, int) and limit > 0:
        return limit, PROFILE
    return configured, "context_tokens"
