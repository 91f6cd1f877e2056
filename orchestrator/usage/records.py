"""What the request log keeps of a call's usage: one row per model call and per billed tool call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.usage.tokens import TokenCount

UsageKind = Literal["model", "tool"]


@dataclass(frozen=True)
class UsageRecord:
    """The usage of one request: a model call (its own request id) or a tool call (the call's).

    `parent_request_id` is the agent call a nested model call ran for (None
    at the top); `turn_id` the message the turn began with; `name` the model
    or the tool. `cost_usd` None: no price is known.
    """

    request_id: str
    parent_request_id: str | None
    session_id: str | None
    user_id: str | None
    turn_id: str | None
    kind: UsageKind
    name: str
    tokens: TokenCount
    cost_usd: float | None
    credits: float | None = None
    seconds: float = 0.0
