"""Streamed answer text held back while it may be a tool call written as text.

A model without a tool parser streams its call as text (`{"name": ...}`, a
```` ```json ```` fence, `<tool_call>` tags); the model node turns it into a
real call once the reply is whole. Until then, text from a line that may begin
such a call is not shown. At the end of the reply what is held is dropped:
either it became calls, or it is part of the answer, which the turn's result
holds whole (the terminal prints what of the answer it had not shown).
"""

from __future__ import annotations

from orchestrator.events import Stage
from orchestrator.llm.text_calls import may_begin_call
from orchestrator.turns import TurnEvent

# Past this many characters, whether held text may begin a call is decided.
DECIDED_CHARS = 32
# The model node reports one of these once a reply is whole.
REPLY_ENDS = frozenset({Stage.EXECUTING, Stage.COMPLETE, Stage.ERROR})


class HeldText:
    """Filters the streamed text of one reply after another."""

    def __init__(self) -> None:
        self._message_id: str | None = None
        self._held: list[str] = []
        self._held_chars = 0
        self._line_start = True

    def filter(self, event: TurnEvent) -> TurnEvent | None:
        """The event as it may be shown (a token without the text held); None: nothing to show."""
        if event["kind"] == "token":
            text = self.feed(event["text"], message_id=event["message_id"])
            return {**event, "text": text} if text else None
        if event["kind"] == "status" and event["stage"] in REPLY_ENDS:
            self.end_reply()
        return event

    def feed(self, text: str, *, message_id: str | None) -> str:
        """What of `text` (the next piece of reply `message_id`) may be shown now."""
        if message_id != self._message_id:
            self.end_reply()
            self._message_id = message_id
        if self._held and self._held_chars >= DECIDED_CHARS:
            self._hold(text)
            return ""
        pending = "".join(self._held) + text
        self._held, self._held_chars = [], 0
        return self._scan(pending)

    def end_reply(self) -> None:
        """The reply is whole: drop what is held, and start afresh."""
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
