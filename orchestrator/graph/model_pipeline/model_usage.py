"""Usage on the model side: each model call's tokens, cost and time, counted where it was made.

`ModelUsageMiddleware` counts every call of the chain; calls made beside it (a
summary's, `actions.free_text`'s) count through `count_model_call`, and budgets
check a call beforehand at its `least_cost`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

from langchain_core.messages import AIMessage, BaseMessage

from orchestrator.graph.model_pipeline.model_call import ModelAnswer, ModelCall, ModelHandler
from orchestrator.tools.context import RunContext
from orchestrator.tools.request_log import CallTask, safely
from orchestrator.usage.prices import ModelIdentity
from orchestrator.usage.records import UsageRecord
from orchestrator.usage.tokens import TokenCount, tokens_of

# Roughly four characters a token in English text: the least a prompt will be billed.
CHARS_PER_TOKEN = 4
# For a call whose usage was not reported: three characters a token, more tokens than
# most text is billed for, so that a budget errs on the side of stopping.
ESTIMATE_CHARS_PER_TOKEN = 3


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


async def count_model_call(
    context: RunContext,
    identity: ModelIdentity,
    reply: AIMessage,
    *,
    sent: Iterable[BaseMessage],
    seconds: float,
    task: CallTask | None = None,
) -> None:
    """Count `reply`'s tokens and cost once, where the call was made (any level of the tree).

    A reply without usage (a server that streams none) costs "unknown", never
    zero: budgets count an estimate from the text of `sent` and of the reply.
    """
    meter = context.usage
    if meter is None:
        return
    model = _served_model(reply) or identity.name
    tokens = tokens_of(reply.usage_metadata)
    if tokens is None and meter.prices.free(identity):
        return  # the built-in offline model: nothing to count, nothing spent
    if tokens is None:
        cost = None
        estimate = meter.price(identity, estimated_tokens(sent, reply), model=model)
        meter.add_unreported(model, estimate, seconds=seconds)
        tokens = TokenCount()
    else:
        cost = meter.price(identity, tokens, model=model)
        meter.add_model(model, tokens, cost, seconds=seconds)
    if context.observer is None:
        return
    record = UsageRecord(
        request_id=uuid.uuid4().hex,
        parent_request_id=context.request_id,
        session_id=context.session_id,
        user_id=context.user_id,
        turn_id=meter.turn_id,
        kind="model",
        name=model,
        tokens=tokens,
        cost_usd=cost,
        seconds=seconds,
    )
    await safely(context.observer.used(record, task=task))


def least_cost(
    context: RunContext, identity: ModelIdentity, messages: Iterable[BaseMessage]
) -> float:
    """What sending `messages` will cost at least: their input tokens, roughly, at the model's price.

    Zero without a budget to check it against, or without a known price.
    """
    meter = context.usage
    if meter is None or not meter.budgets.any:
        return 0.0
    characters = sum(len(str(message.content)) for message in messages)
    tokens = TokenCount(input=characters // CHARS_PER_TOKEN)
    return meter.price(identity, tokens) or 0.0


def estimated_tokens(sent: Iterable[BaseMessage], reply: AIMessage) -> TokenCount:
    """The tokens of a call whose usage was not reported, estimated high from its text."""
    return TokenCount(
        input=_estimate(sum(_characters(message) for message in sent)),
        output=_estimate(_characters(reply)),
    )


def _characters(message: BaseMessage) -> int:
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    return len(str(message.content)) + sum(len(str(call)) for call in calls)


def _estimate(characters: int) -> int:
    return -(-characters // ESTIMATE_CHARS_PER_TOKEN)


def _served_model(reply: AIMessage) -> str | None:
    # The model that answered, as the provider names it (a dated version of the one asked for).
    name = reply.response_metadata.get("model_name") or reply.response_metadata.get("model")
    return str(name) if name else None
