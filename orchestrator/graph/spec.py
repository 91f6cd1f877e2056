"""What an agent graph is built from: one value, the same for the orchestrator and every nested agent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from orchestrator.chain import with_defaults
from orchestrator.dispatch.ask_approval import SensitiveCallGate
from orchestrator.dispatch.dispatcher import default_middleware
from orchestrator.dispatch.middleware import ToolMiddleware
from orchestrator.folders.sensitivity import SensitivityRules
from orchestrator.graph.model_pipeline.model_call import ModelMiddleware
from orchestrator.graph.model_pipeline.retrieval import ContextLookup
from orchestrator.graph.prompts import ORCHESTRATOR_PROMPT
from orchestrator.levels import Closure, Limits, Planning
from orchestrator.llm.reply import ReplyLimits
from orchestrator.llm.tokens import DEFAULT_CONTEXT_TOKENS
from orchestrator.store.large_results import KeepLimits


@dataclass(frozen=True)
class AgentSpec:
    """An agent: its model, tools and limits, and what runs around its model and tool calls.

    `middleware` runs around the dispatch pipeline's defaults (see
    `dispatch.dispatcher.default_middleware`), `model_middleware` around the
    model chain's (see `graph.model_pipeline.defaults`); with
    `replace_defaults`, each of the two that is given is its chain whole (see
    `chain.with_defaults`). `sensitive_patterns` are the default pipeline's
    patterns of call names that need the person's decision
    (ORCHESTRATOR_SENSITIVE_PATTERNS; None: the built-in ones). With a
    `retriever` the model gets RAG context. `reply_limits` bound the tool names and arguments a reply may
    stream; `text_tool_calls` reads calls a model wrote as text
    (ORCHESTRATOR_TEXT_TOOL_CALLS). `context_tokens` is the model's input
    limit when its profile gives none (see `llm.tokens`); `summary_model`
    writes the summaries of older messages (see `model_pipeline.compaction`);
    `tool_result_model` answers each round whose last message is a tool result
    (the first round of a turn is `model`'s). With
    `planning` the model has the plan tool and the graph the plan executor (see
    `graph.planning`). `result_cache` False leaves the default pipeline's result
    cache out (ORCHESTRATOR_RESULT_CACHE). `result_keeping` bounds the results too
    long for the model that are kept by handle (see `store.large_results`). `name`
    names the compiled graph.
    """

    model: BaseChatModel
    tools: Sequence[BaseTool]
    limits: Limits
    system_prompt: str = ORCHESTRATOR_PROMPT
    middleware: Sequence[ToolMiddleware] | None = None
    model_middleware: Sequence[ModelMiddleware] | None = None
    replace_defaults: bool = False
    sensitive_patterns: Sequence[str] | None = None
    retriever: ContextLookup | None = None
    reply_limits: ReplyLimits = field(default_factory=ReplyLimits)
    text_tool_calls: bool = True
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    summary_model: BaseChatModel | None = None  # writes summaries; None: `model`
    tool_result_model: BaseChatModel | None = None  # rounds after tool results; None: `model`
    planning: Planning | None = None  # None: the agent does not plan
    closure: Closure | None = None  # None: its answer ends the turn unjudged (see graph.closure)
    result_cache: bool = True
    name: str = "orchestrator"
    result_keeping: KeepLimits = field(default_factory=KeepLimits)  # results kept by handle

    def tool_middleware(self) -> list[ToolMiddleware]:
        """The dispatch pipeline of the agent's tool calls, outermost first."""
        gate = SensitiveCallGate(SensitivityRules.of(self.sensitive_patterns))
        return with_defaults(
            self.middleware,
            lambda: default_middleware(
                gates=[gate], result_cache=self.result_cache, keeping=self.result_keeping
            ),
            replace_defaults=self.replace_defaults,
        )
