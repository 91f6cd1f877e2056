"""How a tool call is run: its timeout, retries, and whether it goes to the background."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_core.tools import BaseTool

from orchestrator.errors import ToolError
from orchestrator.tools.results import ToolResult
from orchestrator.tracing.spans import annotate

if TYPE_CHECKING:
    from orchestrator.levels import Limits

BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 10.0
# How long a timed-out attempt may take to unwind (its `finally`, a rollback)
# before it is abandoned; one that ignores its cancellation is abandoned then.
CANCEL_GRACE_SECONDS = 2.0
TIMED_OUT = "{name} did not finish within {seconds:g}s"
BLOCKED_LOOP = (
    "{name} did not finish within {seconds:g}s: the event loop was blocked meanwhile "
    "(async tool code must not block; an action that is a plain def runs on a thread)"
)
CANCELLED_ITSELF = "{name} was cancelled from inside the tool"


@dataclass(frozen=True)
class ExecutionPolicy:
    """How one tool's calls run: from its folder's `tool_config.yaml` and its level's limits."""

    timeout_seconds: float
    max_retries: int = 0
    background: bool = False
    idempotent: bool = False
    inline_budget: float | None = None  # past it, a call goes on in the background
    max_cost_usd: float | None = None  # the most one call may cost (tool_config.yaml)
    max_result_chars: int | None = None  # past it, the result is kept by handle for the model
    include_data: bool = True  # whether the model reads a result's `data` (`include_tool_data`)

    @classmethod
    def of(cls, tool: BaseTool | None, *, limits: Limits) -> ExecutionPolicy:
        """The policy of `tool` (carried in its metadata) at a level with `limits`."""
        metadata = (tool.metadata or {}) if tool is not None else {}
        return cls(
            timeout_seconds=float(metadata.get("timeout_seconds", limits.timeout_seconds)),
            max_retries=int(metadata.get("max_retries", 0)),
            background=bool(metadata.get("background", False)),
            idempotent=bool(metadata.get("idempotent", False)),
            inline_budget=limits.inline_budget_seconds,
            max_cost_usd=_dollars(metadata.get("max_cost_usd")),
            max_result_chars=limits.max_result_chars,
            include_data=limits.include_tool_data,
        )


def _dollars(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


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
    try is the result.
    """
    tries = policy.max_retries + 1
    for number in range(1, tries + 1):
        try:
            result = await within_timeout(attempt, name=name, seconds=policy.timeout_seconds)
        except ToolError as error:
            result = ToolResult.from_error(error)
        if not _worth_retrying(result, policy) or number == tries:
            return result
        annotate({"orchestrator.retries": number})  # on the call's span, when traced
        await sleep(backoff(number))
    raise AssertionError("unreachable")  # the loop always returns


def _worth_retrying(result: ToolResult, policy: ExecutionPolicy) -> bool:
    # Bad arguments fail the same way again: the model fixes those, not a retry.
    return (
        result.status == "failure"
        and result.retry_strategy == "retry_with_backoff"
        and not _may_still_run(result.error_code, policy)
    )


def _may_still_run(code: str | None, policy: ExecutionPolicy) -> bool:
    """A call that timed out may still be running (an abandoned thread, a swallowed
    cancellation) or may have done its work: only an idempotent one is tried again."""
    return code == "timeout" and not policy.idempotent


async def within_timeout(
    attempt: Callable[[], Awaitable[ToolResult]], *, name: str, seconds: float
) -> ToolResult:
    """One attempt, as a task of its own that is given up on after `seconds`.

    Its own task, watched from outside: a tool that swallows its cancellation
    is abandoned rather than waited for. An attempt that ends past its deadline
    because the event loop was blocked (so no timer could fire: async code
    calling `time.sleep`, say) fails with a timeout too, whatever it returned;
    blocking code belongs on a thread, where a plain-def action runs.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    work = asyncio.ensure_future(attempt())
    try:
        await asyncio.wait({work}, timeout=seconds)
    except asyncio.CancelledError:  # the turn was cancelled: so is the attempt
        work.cancel()
        raise
    if not work.done():
        await _abandon(work)
        raise ToolError(TIMED_OUT.format(name=name, seconds=seconds), code="timeout")
    if work.cancelled():  # nobody here cancelled it: the tool's own doing
        raise ToolError(CANCELLED_ITSELF.format(name=name), code="cancelled", recoverable=False)
    result = work.result()
    if loop.time() > deadline:
        raise ToolError(BLOCKED_LOOP.format(name=name, seconds=seconds), code="timeout")
    return result


async def _abandon(work: asyncio.Future[ToolResult]) -> None:
    work.cancel()
    await asyncio.wait({work}, timeout=CANCEL_GRACE_SECONDS)
    # Whatever it ends with later is nobody's business; retrieved, so asyncio does not log it.
    work.add_done_callback(lambda done: done.cancelled() or done.exception())
