"""Streamed answer text held back while it may be a tool call written as text.

A model without a tool parser streams its call as text (`{"name": ...}`, a
```` ```json ```` fence, `<tool_call>` tags); the model node turns it into a
real call once the reply is whole. Until then, a reply's text from the start
of a line that may begin such a call is held, and released as soon as it no
longer can (```` ```python ````). The model node's stage then settles the rest:
`COMPLETE` (the reply is the answer) releases it, `EXECUTING` (it became calls)
and `ERROR` drop it.
"""

from __future__ import annotations

from orchestrator.conversation.turns import TokenEvent, TurnEvent
from orchestrator.events import Stage, StatusEvent
from orchestrator.graph.builder import STOPPED
from orchestrator.llm.text_calls import may_begin_call

# Past this many characters, whether held text may begin a call is decided.
DECIDED_CHARS = 32
# The model node reports one of these once a reply is whole.
REPLY_ENDS = frozenset({Stage.EXECUTING, Stage.COMPLETE, Stage.ERROR})


class HeldText:
    """Filters the top-level events of one graph run: streamed replies lose what may be a call."""

    def __init__(self) -> None:
        self._message_id: str | None = None
        self._held: list[str] = []
        self._held_chars = 0
        self._line_start = True

    def filter(self, event: TurnEvent) -> list[TurnEvent]:
        """The events to show for `event`: none, it alone, or the text it releases then it."""
        if event["kind"] == "token":
            text = self.feed(event["text"], message_id=event["message_id"])
            return [{**event, "text": text}] if text else []
        if event["kind"] == "status" and event["stage"] in REPLY_ENDS:
            if _is_the_answer(event):
                return [*self.release(), event]
            self.drop()
        return [event]

    def feed(self, text: str, *, message_id: str | None) -> str:
        """What of `text` (the next piece of reply `message_id`) may be shown now."""
        if message_id != self._message_id:
            self.drop()  # a reply that ended without a stage: what it held is not shown
            self._message_id = message_id
        if self._held and self._held_chars >= DECIDED_CHARS:
            self._hold(text)
            return ""
        pending = "".join(self._held) + text
        self._held, self._held_chars = [], 0
        return self._scan(pending)

    def release(self) -> list[TurnEvent]:
        """The held text as a token event to show (none when nothing is held); the reply ends."""
        text, message_id = "".join(self._held), self._message_id
        self.drop()
        return [TokenEvent(kind="token", text=text, message_id=message_id)] if text else []

    def drop(self) -> None:
        """Forget the held text; the reply ends, the next one starts afresh."""
        self._held, self._held_chars = [], 0
        self._line_start = True

    def _scan(self, text: str) -> str:
        for index, char in enumerate(text):
            if self._line_start and char in "{[`<" and may_begin_call(text[index:]):
                self._hold(text[index:])
                return text[:index]
            self._line_start = char == "\n" or (self._line_start and char in " \t")
        return text

    def _hold(self, text: str) -> None:
        self._held.append(text)
        self._held_chars += len(text)


def _is_the_answer(event: StatusEvent) -> bool:
    """Whether the reply just streamed is the turn's answer (a stop's notice replaces it)."""
    return event["stage"] == Stage.COMPLETE and event["detail"] != STOPPED
