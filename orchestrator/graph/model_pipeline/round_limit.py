"""The tool-round limit: a turn's model may ask for tools `max_iterations` times."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from orchestrator.graph.model_pipeline.model_call import (
    STOPPED,
    ModelAnswer,
    ModelCall,
    ModelHandler,
)
from orchestrator.graph.prompts import ITERATION_LIMIT


class RoundLimitMiddleware:
    """Ends the turn with a notice when the model asks for tools once more than the limit allows."""

    def __init__(self, max_iterations: int) -> None:
        self.max_iterations = max_iterations

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """The answer of `handler`, or its text and the notice in place of its calls."""
        answer = await handler(request)
        # Every model call before this one in the turn asked for tools: one round each.
        if answer.message.tool_calls and request.iterations >= self.max_iterations:
            message = stop_at_limit(answer.message, self.max_iterations)
            return answer.override(message=message, rejected={}, ended=STOPPED)
        return answer


def stop_at_limit(response: AIMessage, limit: int) -> AIMessage:
    """`response`'s text and the limit's notice, without its calls."""
    notice = ITERATION_LIMIT.format(limit=limit)
    text = response.text.strip()
    # A new message without the tool calls keeps the history valid for every provider.
    return AIMessage(content=f"{text}\n\n{notice}" if text else notice)
