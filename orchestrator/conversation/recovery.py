"""At startup: tool calls a stopped process left running are failed, or run again if safe.

They run through the same dispatch pipeline as any call: the request log's
replay decision requeues an idempotent call (it then runs in the
background) and fails any other as interrupted. An idempotent task of a plan
is left to its plan, which runs it again when its session's turn resumes:
the plan needs its result, which a run in the background would not give it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool

from orchestrator.conversation.job_board import JobBoard
from orchestrator.dispatch.background import is_acknowledgement
from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.dispatch.middleware import ToolMiddleware
from orchestrator.levels import Limits
from orchestrator.settings import Settings
from orchestrator.store.storage import Storage
from orchestrator.tools.context import RunContext
from orchestrator.tools.request_log import CallRecord


class Recovering(Protocol):
    """What recovery reads of the runtime (an `Orchestrator`, which sits above this package)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def storage(self) -> Storage | None: ...

    @property
    def middleware(self) -> Sequence[ToolMiddleware]: ...

    @property
    def jobs(self) -> JobBoard: ...

    def all_tools(self) -> list[BaseTool]:
        """The tools of every level."""
        ...


@dataclass(frozen=True)
class Recovered:
    """One orphaned call, and what became of it: `failed` or `requeued`."""

    call: CallRecord
    outcome: str


async def recover(runtime: Recovering, *, user_id: str) -> list[Recovered]:
    """Deal with the user's calls left open by dead processes; what was done with each."""
    storage = runtime.storage
    if storage is None:
        return []
    dispatcher = Dispatcher(
        runtime.all_tools(),
        limits=Limits.from_settings(runtime.settings),
        middleware=runtime.middleware,
    )
    recovered = []
    orphans = await storage.requests.orphaned(user_id=user_id)
    again = [call.request_id for call in orphans if call.idempotent]
    planned = await storage.requests.plan_tasks(again, user_id=user_id)
    for call in orphans:
        if call.request_id in planned:
            continue
        if call.call_name not in dispatcher.tools:  # gone since: nothing can run it again
            await storage.requests.interrupted(call)
            recovered.append(Recovered(call, "failed"))
            continue
        context = RunContext(
            user_id=user_id,
            session_id=call.session_id,
            request_id=call.parent_request_id,
            observer=storage.requests,
            background=runtime.jobs,
        )
        # In the background: it goes on after startup, and is reported into its session.
        record = replace(call, background=True)
        request = dispatcher.request(_tool_call(call), context, record=record)
        result = await dispatcher.dispatch(request)
        recovered.append(Recovered(call, "requeued" if is_acknowledgement(result) else "failed"))
    return recovered


def _tool_call(call: CallRecord) -> ToolCall:
    return ToolCall(name=call.call_name, args=call.parameters, id=call.request_id)
