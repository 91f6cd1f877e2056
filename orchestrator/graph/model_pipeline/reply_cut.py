"""A reply cut at its length limit says so: a line after its text, and why it was cut."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from orchestrator.graph.model_pipeline.model_call import ModelAnswer, ModelCall, ModelHandler
from orchestrator.graph.prompts import CUT_AT_CAP, CUT_BY_SERVER
from orchestrator.llm.reply import LENGTH, Reply
from orchestrator.settings import env_name

# What sets a nested agent's cap: its folder, or what it inherits.
LEVEL_CAP = "llm.max_output_tokens (or ORCHESTRATOR_MAX_OUTPUT_TOKENS)"


class ReplyCutMiddleware:
    """Ends an answer that was cut at its length limit with a line that says so and why.

    Cut by the server (finish reason `length`), or stopped here at the level's
    `max_output_tokens` when the server went on. A reply with tool calls is
    left as it is: a call cut short is refused, and the model told why (see
    `graph.calls`). The line stays in the history: the model sees it too.
    """

    def __init__(self, max_output_tokens: int | None) -> None:
        self.max_output_tokens = max_output_tokens

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """The answer of `handler`, with the line when its reply was cut."""
        answer = await handler(request)
        reply = answer.reply
        if reply is None or reply.finish_reason != LENGTH or answer.message.tool_calls:
            return answer
        setting = LEVEL_CAP if request.run.agent_path else env_name("max_output_tokens")
        line = self.line(reply, setting=setting)
        return answer.override(message=_ending_with(answer.message, line))

    def line(self, reply: Reply, *, setting: str) -> str:
        """Why `reply` was cut, in one line."""
        if reply.capped:
            return CUT_AT_CAP.format(setting=setting, limit=self.max_output_tokens)
        limit = f"; {setting} is {self.max_output_tokens}" if self.max_output_tokens else ""
        return CUT_BY_SERVER.format(limit=limit)


def _ending_with(message: AIMessage, line: str) -> AIMessage:
    """`message` with `line` after its text (what streamed stays a prefix of it)."""
    content = message.content
    if isinstance(content, str):
        ended: str | list[str | dict[str, object]] = f"{content}\n\n{line}" if content else line
    else:
        ended = [*content, {"type": "text", "text": f"\n\n{line}"}]
    return message.model_copy(update={"content": ended})
