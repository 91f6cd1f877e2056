"""Usage on the model side: every call the model answered is counted where it was made."""

from __future__ import annotations

import time

from orchestrator.graph.model_pipeline.chain import ModelAnswer, ModelCall, ModelHandler
from orchestrator.graph.model_usage import count_model_call
from orchestrator.tools.request_log import CallTask
from orchestrator.usage.prices import ModelIdentity


class ModelUsageMiddleware:
    """Counts each reply's tokens, cost and time on the run's meter and in the request log.

    It sits next to the model: the time is the model's, and a reply is counted
    even when it is refused afterwards (its tokens were spent).
    """

    def __init__(self, identity: ModelIdentity) -> None:
        self.identity = identity

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """The answer of `handler`, counted when the model gave it."""
        started = time.monotonic()
        answer = await handler(request)
        if answer.reply is not None:
            seconds = time.monotonic() - started
            await count_model_call(
                request.run,
                self.identity,
                answer.reply.message,
                sent=request.prompt(),
                seconds=seconds,
                task=CallTask.of(request.config),  # kept with the model step's writes
            )
        return answer
