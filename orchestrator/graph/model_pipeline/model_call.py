"""The model side of the middleware chain (see `orchestrator.chain`): a model call, its answer.

Modelled on LangChain v1's `AgentMiddleware.awrap_model_call(request, handler)`
(whose `ModelRequest` and `ModelResponse` these mirror, smaller): each
middleware gets the call and the rest of the chain, and may change the call
(its messages, its model), answer in the model's place (not calling
`handler`), call `handler` more than once, or look at the answer on the way
out. The chain is composed once, when the graph is built (`defaults.model_chain`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Protocol

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig

from orchestrator.chain import Handler
from orchestrator.graph.calls import Rejection
from orchestrator.graph.state import OrchestratorState
from orchestrator.llm.reply import Reply
from orchestrator.tools.context import RunContext

StateUpdate = dict[str, object]
# The detail of a COMPLETE whose answer is a stop's notice, not the reply the model streamed.
STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call on its way through the chain.

    `messages` follow the system message: the turn's context (once RAG has
    added it) and the conversation. `iterations` counts the model calls the
    turn made before this one. `state` is the graph's, `run` the run's
    context, `config` the graph run's (the model streams under it).
    """

    model: Runnable[LanguageModelInput, BaseMessage]
    system_message: SystemMessage
    messages: list[BaseMessage]
    state: OrchestratorState
    run: RunContext
    config: RunnableConfig
    iterations: int

    def prompt(self) -> Iterator[BaseMessage]:
        """Every message the model gets, the system message first (nothing copied)."""
        return itertools.chain((self.system_message,), self.messages)

    def override(self, **changes: object) -> ModelCall:
        """A copy with `changes` (the call itself never changes)."""
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """What a model call answered, on its way back through the chain.

    `message` is the reply (its tool calls once the reply is checked); `reply`
    is the reply as the model sent it, None when a middleware answered in the
    model's place. `rejected` are the calls that must not run (by call id),
    `update` what the model node writes to the state besides the message, and
    `ended` the detail of the status when the answer ends the turn otherwise
    than the model said (a budget's or the round limit's stop).
    """

    message: AIMessage
    reply: Reply | None = None
    rejected: dict[str, Rejection] = field(default_factory=dict)
    update: StateUpdate = field(default_factory=dict)
    ended: str = ""

    def override(self, **changes: object) -> ModelAnswer:
        """A copy with `changes` (the answer itself never changes)."""
        return replace(self, **changes)


# The rest of the chain, from one middleware's place in it.
ModelHandler = Handler[ModelCall, ModelAnswer]


class ModelMiddleware(Protocol):
    """One concern of calling the model (context, budgets, usage, guardrails, tracing, ...)."""

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """Answer `request` through `handler` (the rest of the chain), or in the model's place."""
        ...
