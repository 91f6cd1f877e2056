"""Budgets on the model side: a turn whose budget is spent ends before the model is called."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from orchestrator.graph.model_pipeline.model_call import (
    STOPPED,
    ModelAnswer,
    ModelCall,
    ModelHandler,
)
from orchestrator.graph.model_pipeline.model_usage import least_cost
from orchestrator.usage.prices import ModelIdentity


class ModelBudgetMiddleware:
    """Answers with the budget's stop instead of calling the model once a budget ends the turn.

    The call is checked at the least it will cost (its prompt's tokens,
    roughly, at the model's price).
    """

    def __init__(self, identity: ModelIdentity) -> None:
        self.identity = identity

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """The stop as the answer, or the model's."""
        meter = request.run.usage
        if meter is not None:
            stop = meter.before_model(least_cost(request.run, self.identity, request.prompt()))
            if stop is not None:
                return ModelAnswer(AIMessage(stop.message), ended=STOPPED)
        return await handler(request)
