"""What the request log and the background runner are told about a call."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol

from orchestrator.tools.replay import PriorCall
from orchestrator.tools.results import ToolResult

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallRecord:
    """One tool call as the request log sees it."""

    request_id: str
    parent_request_id: str | None
    session_id: str | None
    user_id: str | None
    tool: str
    action: str | None
    call_name: str
    parameters: dict[str, object]
    background: bool = False
    idempotent: bool = False


class RequestObserver(Protocol):
    """Told how each tool call goes (the request log)."""

    async def started(self, call: CallRecord) -> None: ...

    async def acknowledged(self, call: CallRecord, *, detail: str) -> None: ...

    async def finished(self, call: CallRecord, result: ToolResult) -> None: ...

    async def cancelled(self, call: CallRecord) -> None: ...

    async def paused(self, call: CallRecord) -> None: ...

    async def resumed(self, call: CallRecord) -> None: ...

    async def prior(self, call: CallRecord) -> PriorCall | None: ...

    async def requeued(self, call: CallRecord) -> None: ...

    async def interrupted(self, call: CallRecord) -> None: ...


class BackgroundRunner(Protocol):
    """Takes over calls that run in the background (the task manager)."""

    def adopt(
        self, work: asyncio.Task[ToolResult], call: CallRecord, *, observer: RequestObserver | None
    ) -> object: ...

    def running(self, request_id: str) -> bool: ...


async def safely(tracking: Awaitable[None]) -> None:
    """Run one request-log write; the log must never cost the user a tool result."""
    try:
        await tracking
    except Exception as error:
        # One line: SQLAlchemy's text holds the statement and its parameters.
        first = (str(error).strip().splitlines() or [""])[0]
        logger.warning("request tracking failed: %s: %s", type(error).__name__, first)
