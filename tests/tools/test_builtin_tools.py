"""The built-in tools."""

from __future__ import annotations

import pytest

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.sources.builtin import calculator, current_time


@pytest.mark.parametrize(
    ("expression", "value"),
    [("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("-2 ** 2", -4), ("7 // 2", 3), ("7 % 4", 3), ("1 / 4", 0.25)],
)
async def test_calculator(expression: str, value: float):
    assert (await calculator.ainvoke({"expression": expression}))["value"] == value


@pytest.mark.parametrize(
    "expression", ["__import__('os')", "x + 1", "open('f')", "(1).real", "True + 1", "2 +"]
)
async def test_calculator_refuses_anything_but_arithmetic(expression: str):
    with pytest.raises(InvalidToolArgumentsError):
        await calculator.ainvoke({"expression": expression})


async def test_calculator_refuses_huge_exponents():
    with pytest.raises(ToolError, match="too large"):
        await calculator.ainvoke({"expression": "9 ** 99999"})


async def test_current_time_in_a_zone():
    result = await current_time.ainvoke({"timezone": "America/New_York"})
    assert result["timezone"] == "America/New_York"
    assert result["iso"][-6:] in ("-05:00", "-04:00")


async def test_current_time_rejects_unknown_zones():
    with pytest.raises(InvalidToolArgumentsError, match="Unknown time zone 'Mars/Olympus'"):
        await current_time.ainvoke({"timezone": "Mars/Olympus"})


@pytest.mark.parametrize(
    "expression",
    [
        "((10**1000)**1000)**50",
        "(2**999)**5",
        "10**600 * 10**600",
        "(9**900) * (9**900) * (9**900)",
    ],
    ids=["tower", "power-of-power", "product", "chain"],
)
async def test_the_calculator_refuses_results_too_large_to_compute(expression: str):
    with pytest.raises(ToolError, match="too large|digits"):
        await calculator.ainvoke({"expression": expression})


async def test_the_calculator_refuses_an_endless_expression():
    with pytest.raises(Exception, match="at most 1000 characters"):
        await calculator.ainvoke({"expression": "1+" * 5000 + "1"})


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("1e308*10", "too large to represent"),
        ("-(1e308*10)", "too large to represent"),
        ("(-1)**0.5", "not a real number"),
        ("10**1000", "digits"),
    ],
    ids=["inf", "minus-inf", "complex", "1001-digits"],
)
async def test_the_calculator_answers_only_finite_real_numbers(expression: str, error: str):
    with pytest.raises(ToolError, match=error):
        await calculator.ainvoke({"expression": expression})


def test_inf_and_nan_are_stored_as_text():
    from orchestrator.store.text import storable_json

    assert storable_json({"v": [float("inf"), float("-inf"), float("nan"), 1.5]}) == {
        "v": ["inf", "-inf", "nan", 1.5]
    }
