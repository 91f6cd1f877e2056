"""LangChain's standard tests (`langchain-tests`) for what the orchestrator hands to LangChain.

`ScriptedChatModel` against `ChatModelUnitTests`; the tools the adapter makes
from a drop-in `Tool`, and the built-in tools, against `ToolsUnitTests` and
`ToolsIntegrationTests` (which need no network for these tools: they invoke
them, sync and async, with and without a tool call).
"""

from __future__ import annotations

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests, ToolsUnitTests
from pydantic import BaseModel, Field
from pytest_benchmark.fixture import BenchmarkFixture

from orchestrator.sources.adapter import langchain_tools
from orchestrator.sources.builtin import calculator, current_time
from orchestrator.testing import ScriptedChatModel
from orchestrator.tools import Tool, ToolRequest, ToolResult, action


class TestScriptedChatModel(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return ScriptedChatModel

    @property
    def chat_model_params(self) -> dict[str, object]:
        return {"steps": ["Hello."]}

    @pytest.fixture
    def benchmark(self, benchmark: BenchmarkFixture) -> BenchmarkFixture:
        """`test_init_time` runs its work once: the suite checks behaviour, not timings."""
        benchmark.disabled = True
        return benchmark


class Forecast(BaseModel):
    city: str = Field(description="City name.")
    days: int = Field(default=1, ge=1, le=7, description="How many days ahead.")


class Weather(Tool):
    name: str = "weather"
    description: str = "Weather forecasts."

    @action
    async def forecast(self, params: Forecast, request: ToolRequest) -> ToolResult:
        """Forecast the weather for a city."""
        return request.result(f"Sunny in {params.city} for {params.days} day(s)")

    @action
    def history(self, params: Forecast, request: ToolRequest) -> ToolResult:
        """The weather a city had (blocking: it runs on a thread)."""
        return request.result(f"Rain in {params.city}")


def _adapted(action_name: str) -> BaseTool:
    [tool] = [t for t in langchain_tools(Weather()) if t.name == f"weather_{action_name}"]
    return tool


class AdaptedAsyncAction:
    @property
    def tool_constructor(self) -> BaseTool:
        return _adapted("forecast")

    @property
    def tool_invoke_params_example(self) -> dict[str, object]:
        return {"city": "Oslo", "days": 2}


class AdaptedBlockingAction:
    @property
    def tool_constructor(self) -> BaseTool:
        return _adapted("history")

    @property
    def tool_invoke_params_example(self) -> dict[str, object]:
        return {"city": "Bergen"}


class CurrentTime:
    @property
    def tool_constructor(self) -> BaseTool:
        return current_time

    @property
    def tool_invoke_params_example(self) -> dict[str, object]:
        return {"timezone": "Europe/Paris"}


class Calculator:
    @property
    def tool_constructor(self) -> BaseTool:
        return calculator

    @property
    def tool_invoke_params_example(self) -> dict[str, object]:
        return {"expression": "(2+3)*4"}


class TestAdaptedAsyncActionUnit(AdaptedAsyncAction, ToolsUnitTests):
    pass


class TestAdaptedBlockingActionUnit(AdaptedBlockingAction, ToolsUnitTests):
    pass


class TestCurrentTimeUnit(CurrentTime, ToolsUnitTests):
    pass


class TestCalculatorUnit(Calculator, ToolsUnitTests):
    pass


class TestAdaptedAsyncActionIntegration(AdaptedAsyncAction, ToolsIntegrationTests):
    pass


class TestAdaptedBlockingActionIntegration(AdaptedBlockingAction, ToolsIntegrationTests):
    pass


class TestCurrentTimeIntegration(CurrentTime, ToolsIntegrationTests):
    pass


class TestCalculatorIntegration(Calculator, ToolsIntegrationTests):
    pass


async def test_an_adapted_tool_answers_a_tool_call_with_its_result() -> None:
    # The standard tests check only the type of the content; this checks what it says.
    call = {"name": "weather_forecast", "args": {"city": "Oslo", "days": 2}, "id": "c1"}
    message = await _adapted("forecast").ainvoke({**call, "type": "tool_call"})
    assert message.tool_call_id == "c1"
    assert "Sunny in Oslo for 2 day(s)" in message.content


def test_the_scripted_model_binds_tools_and_keeps_its_script() -> None:
    model = ScriptedChatModel(steps=["Hi."])
    bound = model.bind_tools([_adapted("forecast"), Forecast], tool_choice="any")
    assert model.bound_tools == ["weather_forecast", "Forecast"]
    assert bound.invoke("hello").content == "Hi."
    assert [[m.content for m in received] for received in model.received] == [["hello"]]
    model.assert_complete()


def test_the_scripted_model_names_itself_in_traces() -> None:
    params = ScriptedChatModel()._get_ls_params()
    assert (params["ls_provider"], params["ls_model_name"]) == ("scripted", "scripted")
    assert ScriptedChatModel()._get_ls_params(model="other")["ls_model_name"] == "other"
