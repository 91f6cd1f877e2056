"""The user's pending authorization requests, as an operator level sees and answers them.

An agent's `request_authorization` pauses its run until someone answers. A
level configured as an operator (see docs/human-in-the-loop.md) may list the
same user's pending requests (`get_authorization_requests`) and answer one
(`approve_authorization`); the answer resumes the paused run as the person's
would. The tools reach the requests through an `AuthorizationDesk` in the
run's context (the conversation layer's, which knows the sessions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pydantic import JsonValue

from orchestrator.tools.decisions import Decision
from orchestrator.tools.risk import RiskLevel, Urgency


@dataclass(frozen=True)
class PendingAuthorization:
    """One paused `request_authorization` call: who asked, for what, and where it waits."""

    request_id: str  # of the `request_authorization` call (the request log's)
    session_id: str
    question_id: str  # the interrupt's id: the answer is keyed by it
    agent_path: tuple[str, ...]  # the level that asked, from the top (empty: the orchestrator)
    tool_name: str
    reason: str
    risk_level: RiskLevel
    urgency: Urgency

    @property
    def asked_by(self) -> str:
        """The level that asked: `personal_assistant › email_agent`, or `orchestrator`."""
        return " › ".join(self.agent_path) or "orchestrator"

    def to_json(self) -> dict[str, JsonValue]:
        """What `get_authorization_requests` shows of it."""
        return {
            "request_id": self.request_id,
            "session_id": self.session_id,
            "asked_by": self.asked_by,
            "tool_name": self.tool_name,
            "reason": self.reason,
            "risk_level": self.risk_level,
            "urgency": self.urgency,
        }


class AuthorizationDesk(Protocol):
    """Where an operator's tools find and answer a user's pending authorization requests."""

    async def pending(self, *, user_id: str) -> list[PendingAuthorization]:
        """The user's pending requests (never another user's), the oldest first."""
        ...

    async def answer(
        self, request: PendingAuthorization, decision: Decision, *, user_id: str
    ) -> str:
        """Answer `request` and resume its run; what the resumed run came to, in a line."""
        ...
