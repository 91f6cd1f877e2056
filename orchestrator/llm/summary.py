"""What a model is asked when a conversation is summarised, and the summary a model-less level writes."""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, ToolMessage

SUMMARY_PROMPT = (
    "Summarise the conversation below for your own later use: what the person asked and "
    "decided, facts, names, ids, numbers and results that may matter later, and what is "
    "still open. Write plain sentences, no preamble."
)
_SENTENCE = re.compile(r"(.+?[.!?])(?:\s|$)", re.DOTALL)
FIRST_SENTENCE_CHARS = 200


def is_summary_request(instruction: str) -> bool:
    """Whether a system message asks for a summary (the offline model answers it extractively)."""
    return instruction.startswith(SUMMARY_PROMPT)


def extractive_summary(conversation: str) -> str:
    """The first sentence of each line of `conversation` (each cut to 200 characters)."""
    lines = []
    for line in conversation.splitlines():
        line = line.strip()
        if not line:
            continue
        match = _SENTENCE.match(line)
        first = match.group(1) if match else line
        lines.append(first[:FIRST_SENTENCE_CHARS])
    return "\n".join(lines)


def after_summary(messages: Sequence[BaseMessage], upto: str | None) -> list[BaseMessage]:
    """The messages a summary whose last message is `upto` does not cover: those after it,
    less the results that answer calls it covers (all of them when `upto` is not among them:
    the covered ones were dropped already)."""
    if upto is None:
        return list(messages)
    for position in range(len(messages) - 1, -1, -1):
        if messages[position].id == upto:
            rest = list(messages[position + 1 :])
            while rest and isinstance(rest[0], ToolMessage):  # their call is in the summary
                rest = rest[1:]
            return rest
    return list(messages)
