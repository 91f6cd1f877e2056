"""At startup: tool calls a stopped process left running are failed, or run again if safe."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig

from orchestrator.runtime import Runtime
from orchestrator.tasks import TaskManager
from orchestrator.tools.executor import (
    BACKGROUND_KEY,
    OBSERVER_KEY,
    CallRecord,
    RequestObserver,
    ToolExecutor,
)


@dataclass(frozen=True)
class Recovered:
    """One orphaned call, and what became of it: `failed` or `requeued`."""

    call: CallRecord
    outcome: str


async def recover(runtime: Runtime, *, user_id: str) -> list[Recovered]:
    """Deal with the user's calls left open by dead processes; what was done with each."""
    storage = runtime.storage
    if storage is None:
        return []
    tools = {tool.name: tool for tool in runtime.all_tools()}
    executor = ToolExecutor(
        list(tools.values()),
        max_result_chars=runtime.settings.max_tool_result_chars,
        default_timeout=runtime.settings.tool_timeout_seconds,
    )
    recovered = []
    for call in await storage.requests.orphaned(user_id=user_id):
        if call.idempotent and call.call_name in tools:
            await storage.requests.requeued(call)
            config = _config(call, observer=storage.requests, tasks=runtime.tasks)
            work = asyncio.ensure_future(executor.invoke(_tool_call(call), config=config))
            runtime.tasks.adopt(work, call, observer=storage.requests)
            recovered.append(Recovered(call, "requeued"))
        else:
            await storage.requests.interrupted(call)
            recovered.append(Recovered(call, "failed"))
    return recovered


def _tool_call(call: CallRecord) -> ToolCall:
    return ToolCall(name=call.call_name, args=call.parameters, id=call.request_id)


def _config(call: CallRecord, *, observer: RequestObserver, tasks: TaskManager) -> RunnableConfig:
    return {
        "configurable": {
            "request_id": call.request_id,
            "parent_request_id": call.parent_request_id,
            "thread_id": call.session_id,
            "user_id": call.user_id,
            OBSERVER_KEY: observer,
            BACKGROUND_KEY: tasks,
        }
    }
