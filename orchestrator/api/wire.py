"""What `orchestrator serve` sends: values as the LangGraph Agent Server writes them in JSON.

Messages are LangChain's message dicts (`type`, `content`, `id`, `tool_calls`...),
interrupts `{"id", "value"}`, times ISO 8601: what `langgraph-sdk` clients read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import Enum
from uuid import UUID

from langchain_core.messages import BaseMessage
from langgraph.types import Interrupt, PregelTask, StateSnapshot
from pydantic import BaseModel
from starlette.responses import Response

from orchestrator.store.runs import RunRow
from orchestrator.store.threads import ThreadRow

GRAPH_ID = "orchestrator"


def dumps(value: object) -> str:
    """`value` as a JSON document (what an SSE event's `data` and a response body carry)."""
    return json.dumps(value, default=_default, ensure_ascii=False, separators=(",", ":"))


def json_response(value: object, *, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """`value` as a response of the API (messages, times and interrupts included)."""
    return Response(dumps(value), status_code=status, headers=headers, media_type="application/json")


def _default(value: object) -> object:
    if isinstance(value, BaseMessage):
        return value.model_dump()
    if isinstance(value, Interrupt):
        return {"id": value.id, "value": value.value}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID | Enum):
        return str(value.value if isinstance(value, Enum) else value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)  # pyright: ignore[reportUnknownArgumentType]  # any members, encoded in turn
    return repr(value)  # what JSON cannot say is shown, never a failed response


def thread_json(
    thread: ThreadRow, *, status: str, values: Mapping[str, object] | None = None
) -> dict[str, object]:
    """A thread as the API's `Thread`."""
    return {
        "thread_id": thread.thread_id,
        "created_at": thread.created_at.isoformat(),
        "updated_at": thread.updated_at.isoformat(),
        "metadata": thread.metadata,
        "status": status,
        "values": dict(values or {}),
        "interrupts": {},
    }


def run_json(run: RunRow) -> dict[str, object]:
    """A run as the API's `Run`."""
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
        "status": run.status,
        "metadata": run.metadata,
        "multitask_strategy": run.multitask_strategy,
        "kwargs": {},
    }


def state_json(state: StateSnapshot) -> dict[str, object]:
    """A checkpoint of a thread as the API's `ThreadState`."""
    configurable = state.config.get("configurable", {})
    parent = (state.parent_config or {}).get("configurable")
    return {
        "values": dict(state.values),
        "next": list(state.next),
        "tasks": [_task_json(task) for task in state.tasks],
        "checkpoint": _checkpoint_json(configurable),
        "metadata": dict(state.metadata or {}),
        "created_at": state.created_at,
        "parent_checkpoint": _checkpoint_json(parent) if parent else None,
        "interrupts": [_interrupt_json(i) for i in state.interrupts],
    }


def _task_json(task: PregelTask) -> dict[str, object]:
    return {
        "id": task.id,
        "name": task.name,
        "error": str(task.error) if task.error is not None else None,
        "interrupts": [_interrupt_json(i) for i in task.interrupts],
        "checkpoint": None,
        "state": None,  # a subgraph's: not sent
        "result": task.result,
    }


def _interrupt_json(interrupt: Interrupt) -> dict[str, object]:
    return {"id": interrupt.id, "value": interrupt.value}


def _checkpoint_json(configurable: Mapping[str, object]) -> dict[str, object]:
    return {
        "thread_id": str(configurable.get("thread_id", "")),
        "checkpoint_ns": str(configurable.get("checkpoint_ns", "")),
        "checkpoint_id": str(configurable.get("checkpoint_id", "")),
    }


def interrupts_of(values: Sequence[Interrupt]) -> list[dict[str, object]]:
    """Interrupts as the API lists them (`__interrupt__` in a values or updates event)."""
    return [_interrupt_json(i) for i in values]
