"""What an agent graph is built from: one value, the same for the orchestrator and every nested agent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from orchestrator.dispatch.middleware import ToolMiddleware
from orchestrator.graph.model_pipeline.chain import ModelMiddleware
from orchestrator.graph.model_pipeline.retrieval import Retriever
from orchestrator.graph.prompts import ORCHESTRATOR_PROMPT
from orchestrator.levels import Limits, Planning
from orchestrator.llm.reply import ReplyLimits
from orchestrator.llm.tokens import DEFAULT_CONTEXT_TOKENS


@dataclass(frozen=True)
class AgentSpec:
    """An agent: its model, tools and limits, and what runs around its model and tool calls.

    `tool_middleware` replaces the dispatch pipeline (its default when None,
    see `dispatch.dispatcher.default_middleware`); `model_middleware` is
    added to the model chain's defaults, outside them (see
    `graph.model_pipeline.defaults`). With a `retriever` the model gets RAG
    context. `reply_limits` bound the tool names and arguments a reply may
    stream; `text_tool_calls` reads calls a model wrote as text
    (ORCHESTRATOR_TEXT_TOOL_CALLS). `context_tokens` is the model's input
    limit when its profile gives none (see `llm.tokens`); `summary_model`
    writes the summaries of older messages (see `model_pipeline.compaction`). With
    `planning` the model has the plan tool and the graph the plan executor (see
    `graph.planning`). `name` names the compiled graph.
    """

    model: BaseChatModel
    tools: Sequence[BaseTool]
    limits: Limits
    system_prompt: str = ORCHESTRATOR_PROMPT
    tool_middleware: Sequence[ToolMiddleware] | None = None
    model_middleware: Sequence[ModelMiddleware] = ()
    retriever: Retriever | None = None
    reply_limits: ReplyLimits = field(default_factory=ReplyLimits)
    text_tool_calls: bool = True
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    summary_model: BaseChatModel | None = None  # writes summaries; None: `model`
    planning: Planning | None = None  # None: the agent does not plan
    name: str = "orchestrator"
