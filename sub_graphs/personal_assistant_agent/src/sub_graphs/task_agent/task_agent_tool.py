"""A per-user to-do list in the orchestrator's database (table `tasks`, from this folder's migrations/)."""

from __future__ import annotations

from datetime import date
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field, model_validator
from sqlalchemy import RowMapping, text

from orchestrator.tools import Tool, ToolError, ToolRequest, ToolResult, action

from .due_dates import due_date

DUE = (
    "Due date: YYYY-MM-DD, or words such as 'tomorrow', 'next Friday', 'in 3 days' "
    "(read against today's date)."
)
# A date given as ISO text or in words (see `due_dates`).
DueDate = Annotated[date, BeforeValidator(due_date)]

ADD = text(
    """INSERT INTO tasks (user_id, task_id, title, due)
    SELECT :user_id, COALESCE(MAX(task_id), 0) + 1, :title, :due FROM tasks WHERE user_id = :user_id
    RETURNING task_id, title, due, done"""
)
LIST = text(
    """SELECT task_id, title, due, done FROM tasks
    WHERE user_id = :user_id AND (:include_done OR NOT done) ORDER BY task_id"""
)
EDIT = text(
    """UPDATE tasks SET
        title = COALESCE(CAST(:title AS text), title),
        due = CASE WHEN :clear_due THEN NULL ELSE COALESCE(CAST(:due AS date), due) END,
        done = COALESCE(CAST(:done AS boolean), done),
        completed_at = CASE
            WHEN CAST(:done AS boolean) IS NULL THEN completed_at
            WHEN CAST(:done AS boolean) THEN COALESCE(completed_at, now())
        END
    WHERE user_id = :user_id AND task_id = :task_id RETURNING task_id, title, due, done"""
)
DELETE = text(
    """DELETE FROM tasks WHERE user_id = :user_id AND task_id = :task_id
    RETURNING task_id, title, due, done"""
)
COMPLETE = text(
    """UPDATE tasks SET done = true, completed_at = now()
    WHERE user_id = :user_id AND task_id = :task_id RETURNING task_id, title, due, done"""
)


class AddTask(BaseModel):
    title: str = Field(min_length=1, max_length=500, description="What is to be done.")
    due: DueDate | None = Field(default=None, description=DUE)


class ListTasks(BaseModel):
    include_done: bool = Field(default=False, description="Also list completed tasks.")


class CompleteTask(BaseModel):
    task_id: int = Field(ge=1, description="The id of the task, as add or list gave it.")


class EditTask(BaseModel):
    task_id: int = Field(ge=1, description="The id of the task, as add or list gave it.")
    title: str | None = Field(default=None, min_length=1, max_length=500, description="A new title.")
    due: DueDate | None = Field(default=None, description="A new d" + DUE[1:])
    clear_due: bool = Field(default=False, description="Remove the due date.")
    done: bool | None = Field(default=None, description="true: done; false: open again.")

    @model_validator(mode="after")
    def _changes_something(self) -> EditTask:
        if self.title is None and self.due is None and not self.clear_due and self.done is None:
            raise ValueError("nothing to change: give a title, due, clear_due or done")
        if self.due is not None and self.clear_due:
            raise ValueError("give due or clear_due, not both")
        return self


class DeleteTask(BaseModel):
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
            raise _no_task(params.task_id)
        return request.result(f"Completed task #{task['task_id']}: {task['title']}", data=_json(task))

    @action(EditTask)
    async def edit(self, params: EditTask, request: ToolRequest) -> ToolResult:
        """Change a task: its title, its due date (or remove it), done or open again."""
        async with self._transaction(request) as connection:
            task = (await connection.execute(EDIT, {**self._user(request), **params.model_dump()})).mappings().first()
        if task is None:
            raise _no_task(params.task_id)
        return request.result(f"Changed task: {_describe(task)}", data=_json(task))

    @action(DeleteTask, sensitive=True)
    async def delete(self, params: DeleteTask, request: ToolRequest) -> ToolResult:
        """Delete a task from the user's list for good (asks first)."""
        async with self._transaction(request) as connection:
            task = (await connection.execute(DELETE, {**self._user(request), **params.model_dump()})).mappings().first()
        if task is None:
            raise _no_task(params.task_id)
        return request.result(f"Deleted task #{task['task_id']}: {task['title']}", data=_json(task))

    def _transaction(self, request: ToolRequest):  # noqa: ANN202 (an async context manager)
        return self.context.require_database(self.name).user_transaction(self._user(request)["user_id"])

    @staticmethod
    def _user(request: ToolRequest) -> dict[str, str]:
        return {"user_id": request.user_id or "anonymous"}


def _no_task(task_id: int) -> ToolError:
    return ToolError(
        f"There is no task #{task_id}; list the tasks to see their ids.", code="not_found", recoverable=False
    )


def _describe(task: RowMapping) -> str:
    due = f" (due {task['due']})" if task["due"] else ""
    return f"#{task['task_id']} {task['title']}{due}{' [done]' if task['done'] else ''}"


def _json(task: RowMapping) -> dict[str, object]:
    return {**task, "due": task["due"].isoformat() if task["due"] else None}
