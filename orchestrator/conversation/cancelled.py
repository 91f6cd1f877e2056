"""A cancelled turn's history mended: every call answered, the turn ended.

Without this the checkpoint would still say the turn is due to go on, and
reopening the session would run it (and its tools) again.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage

from orchestrator.conversation.thread import Thread
from orchestrator.errors import ToolError
from orchestrator.graph.planning.executor import end_plan_request
from orchestrator.graph.planning.lifecycle import ended
from orchestrator.graph.prompts import CANCELLED_CALL, CANCELLED_TURN
from orchestrator.tools.results import ToolResult


async def close_cancelled_turn(thread: Thread) -> None:
    """Answer the turn's unanswered calls as cancelled, and end the turn (and its running plan)."""
    state = await thread.state()
    if not state.next:
        return
    cancelled = ToolResult.from_error(ToolError(CANCELLED_CALL, code="cancelled", recoverable=False))
    content = cancelled.to_model_text(max_chars=thread.settings.max_tool_result_chars)
    notes = [
        ToolMessage(content=content, tool_call_id=call["id"], name=call["name"], status="error")
        for call in unanswered_calls(state.values.get("messages", []))
    ]
    update: dict[str, object] = {"messages": [*notes, AIMessage(content=CANCELLED_TURN)]}
    plan = state.values.get("plan")
    if plan and plan["status"] == "running":  # its tasks not run are not run later either
        update["plan"] = finished = ended(plan, "cancelled")
        await end_plan_request(finished, cancelled, context=thread.context)
    await thread.update(update)


def unanswered_calls(messages: list[BaseMessage]) -> list[ToolCall]:
    """The tool calls of the last model message that no tool message answers yet."""
    last_reply = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if last_reply is None:
        return []
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [call for call in last_reply.tool_calls if call["id"] not in answered]
