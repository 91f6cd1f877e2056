"""Judged closure (`closure: {judge: true}`): a model decides whether an answer fulfilled
the request before the request closes; if not, the agent gets more rounds.

When the agent answers (no tool call), the judge reads the request (the turn's first
message), the tools called since and the answer, and replies whether the request was
fulfilled and why. Fulfilled, or out of rounds (`max_rounds` a turn), the turn ends
with that answer. Not fulfilled, the judge's reason goes back to the agent as the
orchestrator's note and the agent goes on. Each verdict is an event `judged` of the
agent's request in the request log (the orchestrator's own turns have no request).

The judge is the level's own model, counted and held to the budgets like any model
call. A judge that fails or answers in a way that cannot be read closes the request
as it is: a judge never keeps an answer from the person.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Sequence
from typing import TypedDict, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp
from langgraph.graph import END  # pyright: ignore[reportMissingTypeStubs]  # langgraph is a namespace package: its py.typed is not read
from langgraph.runtime import Runtime
from langgraph.types import Send

from orchestrator.graph.model_pipeline.model_usage import count_model_call, least_cost
from orchestrator.graph.node_support import MODEL_NODE, run_context
from orchestrator.graph.spec import AgentSpec
from orchestrator.graph.state import OrchestratorState
from orchestrator.levels import Closure
from orchestrator.llm.deferred import resolved
from orchestrator.notes import NOTE_KEY, is_persons, note
from orchestrator.tools.context import RunContext
from orchestrator.usage.prices import ModelIdentity

logger = logging.getLogger(__name__)

JUDGE_NODE = "judge"
JUDGE_NOTE = "closure_judge"  # the notes' kind: the judge sent the agent back
JUDGE_PROMPT = """\
You check an assistant's work. Given a request, the tools it called and its final \
answer, decide whether the answer fulfils the request: everything asked was done or \
answered, or the answer says plainly why it cannot be. Reply with one JSON object \
and nothing else: {"fulfilled": true or false, "reason": "one sentence"}."""
NOT_FULFILLED = (
    "A reviewer found the request not yet fulfilled: {reason} "
    "Carry on with it, then answer again."
)
JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class Verdict(TypedDict):
    """What the judge decided of one answer, as the request log records it."""

    fulfilled: bool
    reason: str
    round: int


def judged(route: list[Send] | str) -> list[Send] | str:
    """`route_after_model`'s decision, the end of the turn going to the judge first."""
    return JUDGE_NODE if route == END else route


def route_after_judge(state: OrchestratorState) -> str:
    """Back to the model when the judge sent the agent back; else the end of the turn."""
    last = state["messages"][-1]
    return MODEL_NODE if _is_judge_note(last) else END


class JudgeNode:
    """Judges the agent's answer (see the module)."""

    def __init__(self, spec: AgentSpec, closure: Closure) -> None:
        self.spec = spec
        self.closure = closure

    async def __call__(
        self, state: OrchestratorState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> dict[str, list[BaseMessage]]:
        messages = state["messages"]
        answer = messages[-1]
        request, since = _request(messages)
        sent_back = sum(_is_judge_note(m) for m in since)
        if not isinstance(answer, AIMessage) or request is None or sent_back >= self.closure.max_rounds:
            return {}
        context = run_context(runtime, config)
        verdict = await self._verdict(request, since, answer, context, number=sent_back + 1)
        if verdict is None:
            return {}
        if context.observer is not None and context.request_id is not None:
            await context.observer.judged(
                context.request_id, user_id=context.user_id, verdict=dict(verdict)
            )
        if verdict["fulfilled"]:
            return {}
        return {"messages": [note(NOT_FULFILLED.format(reason=verdict["reason"]), kind=JUDGE_NOTE)]}

    async def _verdict(
        self,
        request: HumanMessage,
        since: Sequence[BaseMessage],
        answer: AIMessage,
        context: RunContext,
        *,
        number: int,
    ) -> Verdict | None:
        model = resolved(self.spec.model)
        identity = ModelIdentity.of(model)
        prompt = [SystemMessage(JUDGE_PROMPT), HumanMessage(_case(request, since, answer))]
        if context.usage is not None and context.usage.before_model(
            least_cost(context, identity, prompt)
        ):
            return None  # the budget is spent: the answer stands
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.spec.reply_limits.timeout_seconds):
                reply = await model.ainvoke(prompt, config={"callbacks": [], "tags": ["nostream"]})
        except GraphBubbleUp:
            raise
        except Exception as error:  # the judge is advice: its failure closes the request as it is
            logger.warning("the closure judge failed (%s); the answer stands", error)
            return None
        seconds = time.monotonic() - started
        await count_model_call(context, identity, reply, sent=prompt, seconds=seconds)
        return _read(reply.text, number=number)


def _request(messages: Sequence[BaseMessage]) -> tuple[HumanMessage | None, list[BaseMessage]]:
    """The turn's request (the person's, or the asking agent's, message) and what came after."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and is_persons(message):
            return message, list(messages[index + 1 :])
    return None, []


def _case(request: HumanMessage, since: Sequence[BaseMessage], answer: AIMessage) -> str:
    calls = [call["name"] for m in since if isinstance(m, AIMessage) for call in m.tool_calls]
    return (
        f"Request:\n{request.text}\n\n"
        f"Tools called: {', '.join(calls) if calls else 'none'}\n\n"
        f"Final answer:\n{answer.text}"
    )


def _read(text: str, *, number: int) -> Verdict | None:
    """The judge's JSON reply; None (and a line in the log) when it cannot be read."""
    found = JSON_OBJECT.search(text)
    try:
        value: object = json.loads(found.group(0)) if found else None
    except json.JSONDecodeError:
        value = None
    reply = cast("dict[str, object]", value) if isinstance(value, dict) else {}
    fulfilled = reply.get("fulfilled")
    if not isinstance(fulfilled, bool):
        logger.warning("the closure judge's reply could not be read; the answer stands")
        return None
    reason = str(reply.get("reason") or "no reason given").strip()
    return Verdict(fulfilled=fulfilled, reason=reason, round=number)


def _is_judge_note(message: BaseMessage) -> bool:
    return isinstance(message, HumanMessage) and message.additional_kwargs.get(NOTE_KEY) == JUDGE_NOTE
