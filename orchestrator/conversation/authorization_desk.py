"""The user's pending authorization requests, across their sessions, for an operator level.

The request log says which `request_authorization` calls of the user wait
(under row-level security: never another user's); each one's session's
checkpoint says what it asks (the paused turn's questions), read without
opening the session. An answer resumes that session's turn as the person's
would (`Session.answer`), in a context of its own: the operator's run (its
config, its tool call, its span) is not the resumed run's parent.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Protocol

from orchestrator.conversation.thread import ConversationGraph
from orchestrator.conversation.turns import PendingQuestion, TurnResult, questions_of
from orchestrator.store.engine import Database
from orchestrator.store.request_list import paused_calls
from orchestrator.tools.authorizations import PendingAuthorization
from orchestrator.tools.decisions import Decision
from orchestrator.tools.hitl import question_risk

ASKING_TOOL = "request_authorization"
ANSWER_CHARS = 500


class Answerable(Protocol):
    """A session as the desk uses it (`session.Session`)."""

    async def answer(self, decisions: Mapping[str, Decision]) -> TurnResult: ...


# Opens the session `session_id` of `user_id` (the runtime's `Orchestrator.session`).
OpenSession = Callable[[str, str], Answerable]


class SessionDesk:
    """An `AuthorizationDesk` over the sessions of one runtime and its request log."""

    def __init__(
        self, database: Database, graph: ConversationGraph, open_session: OpenSession
    ) -> None:
        self._database = database
        self._graph = graph
        self._open = open_session

    async def pending(self, *, user_id: str) -> list[PendingAuthorization]:
        """The user's paused `request_authorization` calls, the oldest first."""
        asked: dict[str, set[str]] = defaultdict(set)
        paused = await paused_calls(self._database, user_id=user_id, name=ASKING_TOOL)
        for request_id, session_id in paused:
            asked[session_id].add(request_id)
        found: list[PendingAuthorization] = []
        for session_id, request_ids in asked.items():
            state = await self._graph.aget_state({"configurable": {"thread_id": session_id}})
            for waiting in questions_of(state):
                question = waiting.question
                if question["kind"] == "authorization" and question["request_id"] in request_ids:
                    found.append(_authorization(session_id, waiting))
        return found

    async def answer(
        self, request: PendingAuthorization, decision: Decision, *, user_id: str
    ) -> str:
        """Resume `request`'s session with `decision`; what its turn came to, in a line."""
        session = self._open(user_id, request.session_id)
        resumed = session.answer({request.question_id: decision})
        result = await asyncio.create_task(resumed, context=contextvars.Context())
        if result.questions:
            count = len(result.questions)
            return f"Its run resumed and now waits on {count} question{'s' if count > 1 else ''}."
        answer = " ".join(result.answer.split())
        if len(answer) > ANSWER_CHARS:
            answer = answer[:ANSWER_CHARS] + "…"
        return f"Its run resumed and ended: {answer}" if answer else "Its run resumed and ended."


def _authorization(session_id: str, waiting: PendingQuestion) -> PendingAuthorization:
    question = waiting.question
    args = question["action"]["args"]
    return PendingAuthorization(
        request_id=question["request_id"],
        session_id=session_id,
        question_id=waiting.id,
        agent_path=tuple(question["agent_path"]),
        tool_name=str(args.get("tool_name", "")),
        reason=str(args.get("reason", "")),
        **question_risk(question),
    )
