"""Tools that ship with the orchestrator itself, apart from the sub-agent folders."""

from __future__ import annotations

import ast
import inspect
import math
import operator
from collections.abc import Callable
from typing import TypeVar
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from orchestrator.errors import InvalidToolArgumentsError, ToolError

Result = TypeVar("Result")

MAX_EXPONENT = 1000
# Exact integers past this many digits take seconds to minutes to compute (on the
# event loop) and cannot even be printed (Python's 4300-digit str limit).
MAX_DIGITS = 1000
MAX_EXPRESSION_CHARS = 1000
TOO_LARGE = "The result would have over {digits} digits; the limit is {limit}."
TOO_LARGE_TO_REPRESENT = "The result is too large to represent."


class CurrentTimeArgs(BaseModel):
    timezone: str = Field(
        default="UTC", description="IANA time zone name, e.g. Europe/Paris or America/New_York."
    )


def _current_time(timezone: str = "UTC") -> dict[str, str]:
    """Get the current date and time (ISO 8601) in a time zone; use for 'what time/day is it'."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidToolArgumentsError(
            f"Unknown time zone {timezone!r}; use an IANA name such as Europe/Paris."
        ) from None
    now = datetime.now(zone)
    return {"timezone": timezone, "iso": now.isoformat(timespec="seconds"), "weekday": now.strftime("%A")}


class CalculatorArgs(BaseModel):
    expression: str = Field(
        max_length=MAX_EXPRESSION_CHARS,
        description="Arithmetic with + - * / // % ** and parentheses, e.g. (2+3)*4.",
    )


def _calculator(expression: str) -> dict[str, str | float | int]:
    """Evaluate an arithmetic expression exactly; use to calculate, compute or add numbers."""
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # too deep or too long too
        raise InvalidToolArgumentsError(f"Not an arithmetic expression: {expression!r}.") from None
    try:
        return {"expression": expression, "value": _evaluate(tree.body)}
    except RecursionError:
        raise InvalidToolArgumentsError("The expression is nested too deeply.") from None


_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.expr) -> float:
    # Walks the syntax tree itself so that no name, call or attribute can ever run.
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        _check_size(node.op, left, right)
        try:
            return _real(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ToolError("Division by zero.", recoverable=False) from None
        except OverflowError:  # floats past 1e308, or an int too large to divide as one
            raise ToolError(TOO_LARGE_TO_REPRESENT, recoverable=False) from None
    raise InvalidToolArgumentsError(
        f"Unsupported element {ast.unparse(node)!r}: only numbers and + - * / // % ** are allowed."
    )


def _real(value: float | complex) -> float:
    """A finite real number: float arithmetic overflows to inf quietly, and
    a negative number to a fractional power is complex."""
    if isinstance(value, complex):
        raise ToolError("The result is not a real number.", recoverable=False)
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError(TOO_LARGE_TO_REPRESENT, recoverable=False)
    return value


def _check_size(op: ast.operator, left: float, right: float) -> None:
    """Refuse, before computing it, an exact result too large to compute quickly."""
    if isinstance(op, ast.Pow) and abs(right) > MAX_EXPONENT:
        raise ToolError(f"Exponent {right} is too large (limit {MAX_EXPONENT}).", recoverable=False)
    if not (isinstance(left, int) and isinstance(right, int)) or 0 in (left, right):
        return  # floats overflow (an error) instead of growing
    if isinstance(op, ast.Pow) and right > 0:
        digits = math.log10(abs(left)) * right
    elif isinstance(op, ast.Mult):
        digits = math.log10(abs(left)) + math.log10(abs(right))
    else:
        return  # + - // % grow by a digit at most
    if int(digits) >= MAX_DIGITS:  # the result has int(digits) + 1 digits
        raise ToolError(TOO_LARGE.format(digits=int(digits), limit=MAX_DIGITS), recoverable=False)


def _both_ways(func: Callable[..., Result], *, name: str, args_schema: type[BaseModel]) -> BaseTool:
    """A tool that runs on the event loop when awaited (it is quick) and plainly when invoked."""

    async def coroutine(**arguments: object) -> Result:
        return func(**arguments)

    return StructuredTool.from_function(
        func=func, coroutine=coroutine, name=name, args_schema=args_schema,
        description=inspect.getdoc(func) or "",
    )


current_time = _both_ways(_current_time, name="current_time", args_schema=CurrentTimeArgs)
calculator = _both_ways(_calculator, name="calculator", args_schema=CalculatorArgs)


def builtin_tools() -> list[BaseTool]:
    """The built-in tools, in the order they are offered to the model."""
    return [current_time, calculator]
