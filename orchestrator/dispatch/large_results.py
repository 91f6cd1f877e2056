"""Results too long for the model are kept whole, by handle, instead of being cut and lost.

Inside the request log, so that the log records the handle with the result
(`orchestrator requests show` names it). The model then reads the result's
first `max_result_chars` and the handle (`ToolResult.to_model_text`), and the
rest with the built-in `read_result` tool (`sources.result_reader`).
Without a database, or when keeping fails, the result is cut as before.
"""

from __future__ import annotations

import logging

from orchestrator.dispatch.background import is_acknowledgement
from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.store.large_results import KeepLimits, keep_result
from orchestrator.tools.results import KEPT_CHARS, READ_RESULT_TOOL, RESULT_HANDLE, ToolResult

logger = logging.getLogger(__name__)


class LargeResultMiddleware:
    """Keeps each result longer than its level's `max_result_chars` under a handle of its user."""

    def __init__(self, limits: KeepLimits | None = None) -> None:
        self.limits = limits or KeepLimits()

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        result = await handler(request)
        max_chars = request.policy.max_result_chars
        database = request.context.database
        # The reader's own answers fit by construction: a handle of a handle would lead nowhere.
        if max_chars is None or database is None or request.name == READ_RESULT_TOOL:
            return result
        if is_acknowledgement(result) or result.handle is not None:
            return result
        # What the model would read whole: its preview is the start of it, `read_result` the rest
        # (without `data` where the level leaves it out, which a handle must not give back).
        text = result.model_text(include_data=request.policy.include_data)
        if len(text) <= max_chars:
            return result
        try:
            async with database.transaction() as connection:
                kept = await keep_result(
                    connection,
                    text,
                    user_id=database.user_id,
                    request_id=request.record.request_id,
                    limits=self.limits,
                )
        except Exception as error:  # keeping must never cost the user the result's preview
            logger.warning("keeping a large result failed: %s: %s", type(error).__name__, error)
            return result
        metadata = {**result.metadata, RESULT_HANDLE: kept.handle, KEPT_CHARS: kept.kept_chars}
        return result.model_copy(update={"metadata": metadata})
