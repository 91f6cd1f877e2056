"""The model's reply, checked before anything runs, shows or stores it (see `graph.calls`)."""

from __future__ import annotations

from collections.abc import Collection

from orchestrator.errors import IncompleteReplyError
from orchestrator.graph.calls import SAFE_ID, check_calls
from orchestrator.graph.model_pipeline.model_call import ModelAnswer, ModelCall, ModelHandler
from orchestrator.graph.prompts import NO_CHOICES, REPLY_CUT_OFF
from orchestrator.llm.reply import ReplyLimits


class ReplyCheckMiddleware:
    """Puts the reply's calls in its message, checked; an unfinished reply without calls fails.

    `reports_finish`: the provider says why each reply ended, so a reply that
    does not say was cut off. Calls that must not run are in the answer's
    `rejected`; a message id the archive could not index is dropped (the graph
    gives the message a new one).
    """

    def __init__(
        self, *, tool_names: Collection[str], limits: ReplyLimits, reports_finish: bool
    ) -> None:
        self.tool_names = tool_names
        self.limits = limits
        self.reports_finish = reports_finish

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        """The answer of `handler`, its calls checked when the model gave it."""
        answer = await handler(request)
        reply = answer.reply
        if reply is None:
            return answer
        unsaid = self.reports_finish and reply.finish_reason is None
        if unsaid and not reply.calls:
            text = reply.message.text
            raise IncompleteReplyError(
                REPLY_CUT_OFF.format(length=len(text)) if text else NO_CHOICES
            )
        cut = unsaid or reply.finish_reason == "length"
        checked = check_calls(reply, tool_names=self.tool_names, limits=self.limits, cut=cut)
        message_id = answer.message.id
        if message_id is not None and not SAFE_ID.fullmatch(message_id):
            message_id = None  # the archive indexes it: the graph gives it a new one
        message = answer.message.model_copy(update={"tool_calls": checked.calls, "id": message_id})
        return answer.override(message=message, rejected=checked.rejected)
