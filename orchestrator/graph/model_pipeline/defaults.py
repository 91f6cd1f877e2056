"""The model chain every agent's model calls go through, and the call of the model at its centre.

    yours -> round limit -> RAG context -> budget -> compaction -> reply cut
    -> text tool calls -> reply check -> tracing (when on) -> usage -> the model

The model at the centre is read within the spec's reply limits: its time, its
output in tokens, its calls' size (see `llm.reply`).

A new concern of the model side (compaction, planning, tracing, guardrails)
is a middleware: a file here, and a place in this list.
"""

from __future__ import annotations

from orchestrator.chain import compose, with_defaults
from orchestrator.events import Stage, emit_status
from orchestrator.graph.model_pipeline.compaction import CompactionMiddleware
from orchestrator.graph.model_pipeline.model_budget import ModelBudgetMiddleware
from orchestrator.graph.model_pipeline.model_call import (
    ModelAnswer,
    ModelCall,
    ModelHandler,
    ModelMiddleware,
)
from orchestrator.graph.model_pipeline.model_tracing import ModelTracingMiddleware
from orchestrator.graph.model_pipeline.model_usage import ModelUsageMiddleware
from orchestrator.graph.model_pipeline.reply_check import ReplyCheckMiddleware
from orchestrator.graph.model_pipeline.reply_cut import ReplyCutMiddleware
from orchestrator.graph.model_pipeline.retrieval import RetrievalMiddleware
from orchestrator.graph.model_pipeline.round_limit import RoundLimitMiddleware
from orchestrator.graph.model_pipeline.written_calls import TextCallsMiddleware
from orchestrator.graph.spec import AgentSpec
from orchestrator.llm.providers import reports_finish_reason
from orchestrator.llm.reply import ReplyLimits, read_reply
from orchestrator.llm.tokens import PROFILE, context_window
from orchestrator.tools.results import READ_RESULT_TOOL
from orchestrator.tracing.provider import enabled as tracing_enabled
from orchestrator.usage.prices import ModelIdentity

__all__ = ["ModelReader", "default_model_middleware", "model_chain"]


def default_model_middleware(spec: AgentSpec) -> list[ModelMiddleware]:
    """The defaults for `spec`'s model calls, outermost first.

    RAG only with a retriever, text tool calls only when `spec` reads them.
    The round limit is outermost, so that it sees every call the model asked
    for; usage is innermost, so that it times the model alone and counts a
    reply the check then refuses.
    """
    identity = ModelIdentity.of(spec.model)
    tool_names = frozenset(tool.name for tool in spec.tools)
    chain: list[ModelMiddleware] = [RoundLimitMiddleware(spec.limits.max_iterations)]
    if spec.retriever is not None:
        chain.append(RetrievalMiddleware(spec.retriever))
    chain.append(ModelBudgetMiddleware(identity))
    window, source = context_window(spec.model, configured=spec.context_tokens)
    summariser = spec.summary_model or spec.model
    chain.append(
        CompactionMiddleware(
            model=summariser,
            window=window,
            # What is offered from the start: the reader of results kept by handle only
            # comes once one was kept (see `graph.builder.Bound`).
            tools=[tool for tool in spec.tools if tool.name != READ_RESULT_TOOL],
            window_from_profile=source == PROFILE,
            timeout_seconds=spec.reply_limits.timeout_seconds,
        )
    )
    chain.append(ReplyCutMiddleware(spec.reply_limits.max_output_tokens))
    if spec.text_tool_calls:
        chain.append(TextCallsMiddleware(tool_names))
    chain.append(
        ReplyCheckMiddleware(
            tool_names=tool_names,
            limits=spec.reply_limits,
            reports_finish=reports_finish_reason(spec.model),
        )
    )
    if tracing_enabled():  # only with an OTLP endpoint set: else nothing of it loads
        chain.append(ModelTracingMiddleware(identity))
    chain.append(ModelUsageMiddleware(identity))
    return chain


def model_chain(spec: AgentSpec) -> ModelHandler:
    """`spec`'s chain, composed once: its own middleware around the defaults (or in their
    place), the model inside."""
    middleware = with_defaults(
        spec.model_middleware,
        lambda: default_model_middleware(spec),
        replace_defaults=spec.replace_defaults,
    )
    return compose((layer.awrap_model_call for layer in middleware), ModelReader(spec.reply_limits))


class ModelReader:
    """The centre of the chain: streams the model's reply to the call's messages, within `limits`."""

    def __init__(self, limits: ReplyLimits) -> None:
        self.limits = limits

    async def __call__(self, request: ModelCall) -> ModelAnswer:
        """The reply, its calls not checked yet (they are the answer's `reply.calls`)."""
        emit_status(Stage.STREAMING)
        reply = await read_reply(
            request.model, request.prompt(), request.config, limits=self.limits
        )
        return ModelAnswer(reply.message, reply)
