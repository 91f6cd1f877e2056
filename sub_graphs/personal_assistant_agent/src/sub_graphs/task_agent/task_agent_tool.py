"""A per-user to-do list, kept as JSON files under the tool's data directory."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from datetime import UTC, date, datetime
from pathlib import Path
from urllib.parse import quote

from pydantic import BaseModel, Field, PrivateAttr

from orchestrator.tools import Tool, ToolError, ToolRequest, ToolResult, action


class Task(BaseModel):
    id: int
    title: str
    due: date | None = None
    done: bool = False
    created_at: datetime
    completed_at: datetime | None = None


class TaskList(BaseModel):
    next_id: int = 1
    tasks: list[Task] = Field(default_factory=list)


class AddTask(BaseModel):
    title: str = Field(min_length=1, max_length=500, description="What is to be done.")
    due: date | None = Field(default=None, description="Due date, YYYY-MM-DD, if any.")


class ListTasks(BaseModel):
    include_done: bool = Field(default=False, description="Also list completed tasks.")


class CompleteTask(BaseModel):
    task_id: int = Field(ge=1, description="The id of the task, as add or list gave it.")


class TaskAgent(Tool):
    """The to-do list of each user."""

    _lock: asyncio.Lock = PrivateAttr(default_factory=asyncio.Lock)

    @action(AddTask)
    async def add(self, params: AddTask, request: ToolRequest) -> ToolResult:
        """Add a task to the user's to-do list."""
        async with self._lock:
            tasks = self._load(request)
            task = Task(id=tasks.next_id, title=params.title, due=params.due, created_at=_now())
            tasks.tasks.append(task)
            tasks.next_id += 1
            self._save(request, tasks)
        return request.result(f"Added task #{task.id}: {task.title}", data=task.model_dump(mode="json"))

    @action(ListTasks)
    async def list(self, params: ListTasks, request: ToolRequest) -> ToolResult:
        """List the user's tasks (open ones unless include_done)."""
        tasks = [t for t in self._load(request).tasks if params.include_done or not t.done]
        lines = [_describe(t) for t in tasks] or ["No tasks."]
        return request.result("\n".join(lines), data=[t.model_dump(mode="json") for t in tasks])

    @action(CompleteTask)
    async def complete(self, params: CompleteTask, request: ToolRequest) -> ToolResult:
        """Mark one of the user's tasks as done."""
        async with self._lock:
            tasks = self._load(request)
            task = next((t for t in tasks.tasks if t.id == params.task_id), None)
            if task is None:
                raise ToolError(f"There is no task #{params.task_id}; list the tasks to see their ids.")
            task.done, task.completed_at = True, _now()
            self._save(request, tasks)
        return request.result(f"Completed task #{task.id}: {task.title}", data=task.model_dump(mode="json"))

    def _file(self, request: ToolRequest) -> Path:
        return self.context.data_dir / f"{quote(request.user_id or 'anonymous', safe='')}.json"

    def _load(self, request: ToolRequest) -> TaskList:
        try:
            return TaskList.model_validate_json(self._file(request).read_bytes())
        except FileNotFoundError:
            return TaskList()

    def _save(self, request: ToolRequest, tasks: TaskList) -> None:
        file = self._file(request)
        file.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=file.parent, prefix=".tasks-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(tasks.model_dump(mode="json"), handle, indent=1)
        os.replace(temporary, file)


def _describe(task: Task) -> str:
    due = f" (due {task.due})" if task.due else ""
    return f"#{task.id} {task.title}{due}{' [done]' if task.done else ''}"


def _now() -> datetime:
    return datetime.now(UTC)
