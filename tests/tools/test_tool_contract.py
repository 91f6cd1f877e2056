"""The Tool contract: actions, their generated schemas, validation before execute."""

from __future__ import annotations

import json

import pytest
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.sources.adapter import langchain_tools
from orchestrator.testing import call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from tests.helpers import make_session, tool_json


class Forecast(BaseModel):
    city: str = Field(description="City name.")
    days: int = Field(default=1, ge=1, le=7, description="How many days ahead.")


class Weather(Tool):
    name: str = "weather"
    description: str = "Weather forecasts."

    @action(Forecast)
    async def forecast(self, params: Forecast, request: ToolRequest) -> ToolResult:
        """Forecast the weather for a city."""
        return request.result(f"Sunny in {params.city}", data={"days": params.days, "user": request.user_id})


def test_actions_are_collected_from_the_class():
    assert list(Weather.actions) == ["forecast"]
    assert Weather.actions["forecast"].description == "Forecast the weather for a city."


def test_schema_holds_only_the_action_parameters():
    [tool] = langchain_tools(Weather())
    function = convert_to_openai_tool(tool)["function"]

    assert function["name"] == "weather_forecast"
    assert function["description"].startswith("Forecast the weather for a city.")
    assert function["parameters"]["required"] == ["city"]
    assert set(function["parameters"]["properties"]) == {"city", "days"}
    assert function["parameters"]["properties"]["days"]["maximum"] == 7


async def test_execute_validates_before_the_action_runs():
    request = ToolRequest(request_id="r1", action="forecast", parameters={"city": "Oslo", "days": 9})
    with pytest.raises(InvalidToolArgumentsError, match="days: Input should be less than or equal to 7"):
        await Weather().execute(request)


async def test_unknown_action_is_a_tool_error():
    with pytest.raises(ToolError, match="weather has no action 'explode'; its actions: forecast"):
        await Weather().execute(ToolRequest(request_id="r1", action="explode"))


def test_actions_must_be_methods_and_documented():
    with pytest.raises(TypeError, match="must be a method"):

        class NotAMethod(Tool):
            forecast = action(Forecast)(print)  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="needs a docstring"):

        class Silent(Tool):
            @action(Forecast)
            async def forecast(self, params: Forecast, request: ToolRequest) -> ToolResult:
                return request.result()


async def test_model_calls_reach_execute_with_ids_and_user(scripted):
    model = scripted(call_tools(("weather_forecast", {"city": "Oslo", "days": 2})), "Sunny.")
    session = make_session(model, langchain_tools(Weather()))

    result = await session.run("weather in Oslo?")

    [call] = result.tool_calls
    body = tool_json(model.received[1][-1].text)
    assert body == {"status": "success", "message": "Sunny in Oslo", "data": {"days": 2, "user": "tester"}}
    assert call.request_id is not None


async def test_bad_arguments_from_the_model_never_reach_execute(scripted):
    model = scripted(call_tools(("weather_forecast", {"days": 2})), "Which city?")
    result = await make_session(model, langchain_tools(Weather())).run("weather?")

    assert result.tool_calls[0].status == "failure"
    assert "city: Field required" in json.loads(model.received[1][-1].text)["message"]
