"""How a tool call is run: its timeout, retries, and whether it goes to the background."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from langchain_core.tools import BaseTool

from orchestrator.errors import ToolError
from orchestrator.tools.results import ToolResult

BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 10.0
TIMED_OUT = "{name} did not finish within {seconds:g}s"


@dataclass(frozen=True)
class ExecutionPolicy:
    """Read from a folder tool's `tool_config.yaml` (carried in the LangChain tool's metadata)."""

    timeout_seconds: float
    max_retries: int = 0
    background: bool = False
    idempotent: bool = False

    @classmethod
    def of(cls, tool: BaseTool | None, *, default_timeout: float) -> ExecutionPolicy:
        metadata = (tool.metadata or {}) if tool is not None else {}
        return cls(
            timeout_seconds=float(metadata.get("timeout_seconds", default_timeout)),
            max_retries=int(metadata.get("max_retries", 0)),
            background=bool(metadata.get("background", False)),
            idempotent=bool(metadata.get("idempotent", False)),
        )


def backoff(attempt: int) -> float:
    """Seconds to wait before retry number `attempt` (1, 2, ...): doubling, capped, jittered."""
    ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
    return random.uniform(ceiling / 2, ceiling)


async def run_with_policy(
    attempt: Callable[[], Awaitable[ToolResult]],
    *,
    name: str,
    policy: ExecutionPolicy,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> ToolResult:
    """Run `attempt` under the timeout, retrying recoverable failures with backoff.

    A timeout counts as a recoverable failure. What is left after the last
    try is raised as the ToolError it was.
    """
    tries = policy.max_retries + 1
    for number in range(1, tries + 1):
        try:
            async with asyncio.timeout(policy.timeout_seconds):
                return await attempt()
        except TimeoutError:
            error = ToolError(
                TIMED_OUT.format(name=name, seconds=policy.timeout_seconds), code="timeout"
            )
        except ToolError as failure:
            error = failure
        if not error.recoverable or number == tries:
            raise error
        await sleep(backoff(number))
    raise AssertionError("unreachable")  # the loop always returns or raises
