"""A span per model call, by OpenTelemetry's GenAI conventions (only when tracing is on).

A span carries what is its own: the request's model and server, the reply's
id, tokens, finish and cost. The session, the user and the calling request are
on its ancestors (the turn's span, the `execute_tool` span of the call that
asked a nested agent): each attribute repeated on every call cost an exported
trace about 9 us per span (its check when set, its encoding) for nothing a
trace viewer does not already show.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from langchain_core.messages import AIMessage, BaseMessage

from orchestrator.graph.model_pipeline.model_call import ModelAnswer, ModelCall, ModelHandler
from orchestrator.tracing.spans import set_content, span
from orchestrator.usage.prices import ModelIdentity
from orchestrator.usage.tokens import tokens_of

if TYPE_CHECKING:
    from opentelemetry.trace import Span

LANGCHAIN_IDS = ("lc_run-", "run-")  # the prefixes of the reply ids LangChain makes up


class ModelTracingMiddleware:
    """Opens `chat <model>` around each call the model is asked; records what it used.

    It sits next to the model, as usage counting does: the span times the model alone.
    """

    def __init__(self, identity: ModelIdentity) -> None:
        self.identity = identity
        address = urlsplit(identity.base_url) if identity.base_url else None
        self.name = f"chat {identity.name}"
        self.attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": identity.provider,
            "gen_ai.request.model": identity.name,
            "server.address": address.hostname if address else None,
            "server.port": address.port if address else None,
        }

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """The answer of `handler`, inside its span."""
        with span(self.name, self.attributes, kind="CLIENT") as opened:
            set_content(opened, "gen_ai.input.messages", lambda: _messages(request.prompt()))
            answer = await handler(request)
            if opened is not None and answer.reply is not None:
                self._record(opened, answer, request)
        return answer

    def _record(self, opened: Span, answer: ModelAnswer, request: ModelCall) -> None:
        message = answer.reply.message if answer.reply is not None else None
        if message is None:
            return
        served = message.response_metadata.get("model_name") or message.response_metadata.get(
            "model"
        )
        tokens = tokens_of(message.usage_metadata)
        attributes: dict[str, str | int | float] = {}
        if served:
            attributes["gen_ai.response.model"] = str(served)
        if response_id := provider_response_id(message):
            attributes["gen_ai.response.id"] = response_id
        if tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = tokens.input
            attributes["gen_ai.usage.output_tokens"] = tokens.output
            meter = request.run.usage
            cost = (
                meter.price(self.identity, tokens, model=str(served) if served else None)
                if meter
                else None
            )
            if cost is not None:
                attributes["orchestrator.cost_usd"] = cost
        finish = message.response_metadata.get("finish_reason")
        if finish:
            attributes["gen_ai.response.finish_reasons"] = str(finish)
        opened.set_attributes(attributes)
        set_content(opened, "gen_ai.output.messages", lambda: _messages([message]))


def provider_response_id(message: BaseMessage) -> str | None:
    """The provider's id of the reply (OpenAI's `chatcmpl-...`), not one LangChain made up.

    LangChain names a reply whose provider gave none after its own run (`lc_run-...`,
    `run-...` before), which no provider's logs know.
    """
    given = message.response_metadata.get("id")
    if isinstance(given, str) and given:
        return given
    own = message.id if isinstance(message, AIMessage) else None
    return own if own and not own.startswith(LANGCHAIN_IDS) else None


def _messages(messages: Iterable[BaseMessage]) -> list[dict[str, object]]:
    """Messages as the GenAI conventions record them: role, text, tool calls."""
    return [
        {"role": m.type, "content": m.text, "tool_calls": getattr(m, "tool_calls", None) or None}
        for m in messages
    ]
