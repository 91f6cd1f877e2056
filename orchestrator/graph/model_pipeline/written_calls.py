"""Tool calls a model wrote as its reply's text, taken as calls (see `llm.text_calls`)."""

from __future__ import annotations

import logging

from langchain_core.messages import ToolCall

from orchestrator.graph.model_pipeline.model_call import ModelAnswer, ModelCall, ModelHandler
from orchestrator.llm.text_calls import read_text_calls

logger = logging.getLogger(__name__)


class TextCallsMiddleware:
    """Makes a reply that is nothing but calls of offered tools those calls (and no text).

    A reply with calls of its own is left as it is. The calls it reads name
    offered tools and carry object arguments and fresh ids: they pass every
    check a call gets (ORCHESTRATOR_TEXT_TOOL_CALLS turns this off).
    """

    def __init__(self, tool_names: frozenset[str]) -> None:
        self.tool_names = tool_names

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """The answer of `handler`, with the calls its text is."""
        answer = await handler(request)
        message = answer.message
        if answer.reply is None or message.tool_calls:
            return answer
        found = read_text_calls(message.text, tool_names=self.tool_names)
        if found is None:
            return answer
        logger.debug("read %d tool call(s) from the reply's text", len(found))
        calls = [ToolCall(name=c.name, args=c.args, id=c.id, type="tool_call") for c in found]
        return answer.override(
            message=message.model_copy(update={"content": "", "tool_calls": calls})
        )
