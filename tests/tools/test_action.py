"""`@action` bare reads the parameter model from the annotation; `@action(Model)` names it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import pytest
from pydantic import BaseModel, Field

from orchestrator.errors import ToolContractError
from orchestrator.sources.adapter import langchain_tools
from orchestrator.tools import Tool, ToolResult, action
from orchestrator.tools.base import ToolRequest

if TYPE_CHECKING:  # a name only type checkers see: the bare form must not need it
    from orchestrator.tools.base import ToolRequest as Call


class AddTask(BaseModel):
    title: str = Field(description="What to do.")


class Tasks(Tool):
    name: str = "tasks"
    description: str = "A to-do list."

    @action
    async def add(self, params: AddTask, request: ToolRequest) -> ToolResult:
        """Add a task."""
        return request.result(f"added {params.title}")

    @action
    def count(self, params: Annotated[AddTask, "extras are stripped"], request: Call) -> ToolResult:
        """Count the tasks like this one (a blocking action)."""
        return request.result(params.title)

    @action(AddTask)
    async def named(self, params: AddTask, request: ToolRequest) -> ToolResult:
        """The old form."""
        return request.result(params.title)


def test_the_bare_form_takes_the_model_from_the_string_annotation():
    # This module has `from __future__ import annotations`: every annotation is a string.
    assert Tasks.actions["add"].params is AddTask
    assert Tasks.actions["count"].params is AddTask
    assert Tasks.actions["named"].params is AddTask
    assert Tasks.actions["add"].description == "Add a task."
    assert Tasks.actions["count"].blocking


async def test_a_bare_action_validates_and_runs():
    tool = Tasks()
    adding = ToolRequest(request_id="r1", action="add", parameters={"title": "a"})
    assert (await tool.execute(adding)).message == "added a"
    counting = ToolRequest(request_id="r2", action="count", parameters={"title": "b"})
    assert (await tool.execute(counting)).message == "b"


def test_the_schema_the_model_sees_comes_from_the_annotation():
    schemas = {t.name: t.tool_call_schema for t in langchain_tools(Tasks())}
    assert schemas["tasks_add"]["required"] == ["title"]
    assert set(schemas["tasks_add"]["properties"]) == {"title"}


def test_without_an_annotation_the_class_is_refused_naming_the_method():
    with pytest.raises(ToolContractError, match=r"action .*Bare\.add: annotate 'params'"):

        class Bare(Tool):
            @action
            async def add(self, params, request: ToolRequest) -> ToolResult:  # type: ignore
                """Add."""
                return request.result()


def test_an_annotation_that_is_no_model_is_refused_naming_the_method():
    with pytest.raises(TypeError, match=r"action .*Loose\.add: 'params' is annotated <class 'dict"):

        class Loose(Tool):
            @action
            async def add(self, params: dict, request: ToolRequest) -> ToolResult:
                """Add."""
                return request.result()


def test_an_unresolvable_annotation_is_refused_naming_the_method():
    with pytest.raises(ToolContractError, match=r"action .*Lost\.add: cannot resolve .*'Missing'"):

        class Lost(Tool):
            @action
            async def add(self, params: Missing, request: ToolRequest) -> ToolResult:  # noqa: F821
                """Add."""
                return request.result()


def test_a_method_without_params_is_refused():
    with pytest.raises(ToolContractError, match=r"Short\.add must take \(self, params, request\)"):

        class Short(Tool):
            @action
            async def add(self, request: ToolRequest) -> ToolResult:
                """Add."""
                return request.result()


def test_naming_something_other_than_a_model_is_refused():
    with pytest.raises(ToolContractError, match=r"@action\(dict\): not a pydantic BaseModel"):
        action(dict)  # type: ignore[call-overload]


def test_contract_errors_are_type_errors_for_old_callers():
    assert issubclass(ToolContractError, TypeError)
