"""A span per model call, by OpenTelemetry's GenAI conventions (only when tracing is on)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from langchain_core.messages import BaseMessage

from orchestrator.graph.model_pipeline.model_call import ModelAnswer, ModelCall, ModelHandler
from orchestrator.tracing.spans import set_content, span
from orchestrator.usage.prices import ModelIdentity
from orchestrator.usage.tokens import tokens_of

if TYPE_CHECKING:
    from opentelemetry.trace import Span


class ModelTracingMiddleware:
    """Opens `chat <model>` around each call the model is asked; records what it used.

    It sits next to the model, as usage counting does: the span times the model alone.
    """

    def __init__(self, identity: ModelIdentity) -> None:
        self.identity = identity
        address = urlsplit(identity.base_url) if identity.base_url else None
        self.attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": identity.provider,
            "gen_ai.request.model": identity.name,
            "server.address": address.hostname if address else None,
            "server.port": address.port if address else None,
        }

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """The answer of `handler`, inside its span."""
        run = request.run
        attributes = {
            **self.attributes,
            "orchestrator.session_id": run.session_id,
            "orchestrator.parent_request_id": run.request_id,
            "orchestrator.agent_path": "/".join(run.agent_path) or None,
            "orchestrator.iteration": request.iterations,
        }
        with span(f"chat {self.identity.name}", attributes, kind="CLIENT") as opened:
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
        if message.id:
            attributes["gen_ai.response.id"] = message.id
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


def _messages(messages: Iterable[BaseMessage]) -> list[dict[str, object]]:
    """Messages as the GenAI conventions record them: role, text, tool calls."""
    return [
        {"role": m.type, "content": m.text, "tool_calls": getattr(m, "tool_calls", None) or None}
        for m in messages
    ]
