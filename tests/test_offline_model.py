"""The built-in offline model picks tools by their descriptions and is honest about itself."""

from __future__ import annotations

import pytest

from orchestrator.llm import OfflineChatModel
from orchestrator.tools import builtin_tools
from tests.helpers import make_session


@pytest.fixture
def model() -> OfflineChatModel:
    return OfflineChatModel()


async def test_arithmetic_goes_to_the_calculator(model):
    result = await make_session(model, builtin_tools()).run("what is (12 + 30) * 2?")
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("calculator", {"expression": "(12 + 30) * 2"})
    ]
    assert "value: 84" in result.answer and "offline model" in result.answer


async def test_time_question_fills_the_time_zone(model):
    result = await make_session(model, builtin_tools()).run("what time is it in Asia/Tokyo")
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("current_time", {"timezone": "Asia/Tokyo"})
    ]
    assert "Asia/Tokyo" in result.answer


async def test_no_matching_tool_says_what_it_is(model):
    result = await make_session(model, builtin_tools()).run("write me a poem")
    assert result.tool_calls == []
    assert "offline model" in result.answer and "calculator" in result.answer


async def test_failure_is_summarised_as_failed(model):
    result = await make_session(model, builtin_tools()).run("what is 1/0 calculated")
    assert result.tool_calls[0].status == "failure"
    assert "calculator failed: Division by zero." in result.answer
