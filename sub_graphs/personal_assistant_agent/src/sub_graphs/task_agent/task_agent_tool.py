"""A per-user to-do list in the orchestrator's database (table `tasks`, from this folder's migrations/)."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field
from sqlalchemy import RowMapping, text

from orchestrator.tools import Tool, ToolError, ToolRequest, ToolResult, action

ADD = text(
    """INSERT INTO tasks (user_id, task_id, title, due)
    SELECT :user_id, COALESCE(MAX(task_id), 0) + 1, :title, :due FROM tasks WHERE user_id = :user_id
    RETURNING task_id, title, due, done"""
)
LIST = text(
    """SELECT task_id, title, due, done FROM tasks
    WHERE user_id = :user_id AND (:include_done OR NOT done) ORDER BY task_id"""
)
COMPLETE = text(
    """UPDATE tasks SET done = true, completed_at = now()
    WHERE user_id = :user_id AND task_id = :task_id RETURNING task_id, title, due, done"""
)


class AddTask(BaseModel):
    title: str = Field(min_length=1, max_length=500, description="What is to be done.")
    due: date | None = Field(default=None, description="Due date, YYYY-MM-DD, if any.")


class ListTasks(BaseModel):
    include_done: bool = Field(default=False, description="Also list completed tasks.")


class CompleteTask(BaseModel):
    task_id: int = Field(ge=1, description="The id of the task, as add or list gave it.")


class TaskAgent(Tool):
    """The to-do list of each user."""

    @action(AddTask)
    async def add(self, params: AddTask, request: ToolRequest) -> ToolResult:
        """Add a task to the user's to-do list."""
        async with self._transaction(request) as connection:
            # One numbering per user: concurrent adds wait for each other.
            await connection.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": f"tasks:{request.user_id}"}
            )
            task = (await connection.execute(ADD, {**self._user(request), **params.model_dump()})).mappings().one()
        return request.result(f"Added task #{task['task_id']}: {task['title']}", data=_json(task))

    @action(ListTasks)
    async def list(self, params: ListTasks, request: ToolRequest) -> ToolResult:
        """List the user's tasks (open ones unless include_done)."""
        async with self._transaction(request) as connection:
            rows = (await connection.execute(LIST, {**self._user(request), **params.model_dump()})).mappings().all()
        lines = [_describe(row) for row in rows] or ["No tasks."]
        return request.result("\n".join(lines), data=[_json(row) for row in rows])

    @action(CompleteTask)
    async def complete(self, params: CompleteTask, request: ToolRequest) -> ToolResult:
        """Mark one of the user's tasks as done."""
        async with self._transaction(request) as connection:
            task = (await connection.execute(COMPLETE, {**self._user(request), **params.model_dump()})).mappings().first()
        if task is None:
            raise ToolError(f"There is no task #{params.task_id}; list the tasks to see their ids.")
        return request.result(f"Completed task #{task['task_id']}: {task['title']}", data=_json(task))

    def _transaction(self, request: ToolRequest):  # noqa: ANN202 (an async context manager)
        return self.context.require_database(self.name).user_transaction(self._user(request)["user_id"])

    @staticmethod
    def _user(request: ToolRequest) -> dict[str, str]:
        return {"user_id": request.user_id or "anonymous"}


def _describe(task: RowMapping) -> str:
    due = f" (due {task['due']})" if task["due"] else ""
    return f"#{task['task_id']} {task['title']}{due}{' [done]' if task['done'] else ''}"


def _json(task: RowMapping) -> dict[str, object]:
    return {**task, "due": task["due"].isoformat() if task["due"] else None}
