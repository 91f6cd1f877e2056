"""Tools that ship with the orchestrator itself, apart from the sub-agent folders.

`current_time` and `calculator` answer at once. `ask_human` and
`request_authorization` pause the turn with a question for the person (see
`hitl`) and give the model the answer; every level of agents has them (who
asks shows as the agent path), and each answer is recorded in the request log.
"""

from __future__ import annotations

import ast
import inspect
import math
import operator
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, JsonValue

from orchestrator.errors import InvalidToolArgumentsError, ToolError
from orchestrator.tools.context import current_context
from orchestrator.tools.hitl import (
    ALLOWED,
    INTERACTIVE,
    Question,
    QuestionKind,
    ask_person,
    can_ask,
)
from orchestrator.tools.request_log import ANSWERED, DECLINED, GRANTED, REFUSED, safely
from orchestrator.tools.results import ToolResult
from orchestrator.tools.risk import DEFAULT_RISK, DEFAULT_URGENCY, Risk, RiskLevel, Urgency

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
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: operator.mod,
    ast.Pow: lambda a, b: a**b,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def _evaluate(node: ast.expr) -> float:
    # Walks the syntax tree itself so that no name, call or attribute can ever run.
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, int | float) and not isinstance(value, bool):  # not True, 1j, "1"
        return value
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


MAX_QUESTION_CHARS = 4000
QUESTION_RISK: RiskLevel = "low"  # `ask_human`'s: answering runs nothing
NOT_IN_A_CONVERSATION = "{name} can only ask the user during a conversation."
DECLINED_TO_ANSWER = "The user declined to answer"
GRANTED_MESSAGE = "The user granted the authorization for {tool_name}."
REFUSED_MESSAGE = "The user refused the authorization for {tool_name}"


class AskHumanArgs(BaseModel):
    question: str = Field(
        min_length=1, max_length=MAX_QUESTION_CHARS, description="The question, in plain words."
    )
    context: str = Field(
        default="",
        max_length=MAX_QUESTION_CHARS,
        description="What the user needs to know to answer (what you found, the options).",
    )
    urgency: Urgency = Field(
        default=DEFAULT_URGENCY, description="How soon you need the answer: low, normal or high."
    )


async def _ask_human(
    question: str, context: str = "", urgency: Urgency = DEFAULT_URGENCY
) -> ToolResult:
    """Ask the user a question and wait for the answer; use it for what only the user can
    say (a missing detail, a choice between options), not for what a tool can find out."""
    description = f"{question}\n{context}" if context else question
    args: dict[str, object] = {"question": question, "context": context}
    risk = Risk(risk_level=QUESTION_RISK, urgency=urgency)
    asked = _question("question", "ask_human", args, description=description, risk=risk)
    decision = ask_person(asked)
    if decision["type"] == "respond":
        answer = decision["message"]
        detail = {"decision": "respond", "question": question, "answer": answer, **risk}
        await _note(ANSWERED, detail)
        return ToolResult(message=answer)
    reason = (decision.get("message") if decision["type"] == "reject" else None) or None
    await _note(DECLINED, {"decision": "reject", "question": question, "reason": reason, **risk})
    message = f"{DECLINED_TO_ANSWER}: {reason}" if reason else DECLINED_TO_ANSWER
    raise ToolError(message, code="declined", recoverable=False)


class AuthorizationArgs(BaseModel):
    tool_name: str = Field(
        min_length=1, max_length=200, description="The tool, or the kind of action, to authorize."
    )
    reason: str = Field(
        min_length=1,
        max_length=MAX_QUESTION_CHARS,
        description="What you mean to do with it and why, for the user to judge.",
    )
    risk_level: RiskLevel = Field(
        default=DEFAULT_RISK,
        description="What could go wrong if it is granted: low, medium, high or critical.",
    )
    urgency: Urgency = Field(
        default=DEFAULT_URGENCY, description="How soon you need the answer: low, normal or high."
    )


async def _request_authorization(
    tool_name: str,
    reason: str,
    risk_level: RiskLevel = DEFAULT_RISK,
    urgency: Urgency = DEFAULT_URGENCY,
) -> ToolResult:
    """Ask the user's permission before something they may not want done (spending money,
    acting in their name, changing their data); returns whether they granted it, and why not."""
    args: dict[str, object] = {"tool_name": tool_name, "reason": reason}
    risk = Risk(risk_level=risk_level, urgency=urgency)
    asked = _question(
        "authorization", "request_authorization", args, description=reason, risk=risk
    )
    decision = ask_person(asked)
    granted = decision["type"] == "approve"
    said = (decision.get("message") if decision["type"] == "reject" else None) or None
    detail: dict[str, object] = {
        "decision": decision["type"], "tool_name": tool_name, "reason": reason, "answer": said,
        **risk,
    }
    await _note(GRANTED if granted else REFUSED, detail)
    if granted:
        message = GRANTED_MESSAGE.format(tool_name=tool_name)
    else:
        refused = REFUSED_MESSAGE.format(tool_name=tool_name)
        message = f"{refused}: {said}" if said else f"{refused}."
    data: dict[str, JsonValue] = {
        "decision": "granted" if granted else "refused", "tool_name": tool_name, "reason": said
    }
    return ToolResult(message=message, data=data)


def _question(
    kind: QuestionKind, name: str, args: dict[str, object], *, description: str, risk: Risk
) -> Question:
    """The question of the call running now (its request id, the agents it runs under)."""
    if not can_ask():
        raise ToolError(NOT_IN_A_CONVERSATION.format(name=name), recoverable=False)
    context = current_context()
    return Question(
        kind=kind,
        request_id=(context.request_id if context is not None else None) or "",
        agent_path=list(context.agent_path) if context is not None else [],
        action={"name": name, "args": args, "description": description},
        allowed=list(ALLOWED[kind]),
        **risk,
    )


async def _note(outcome: str, detail: dict[str, object]) -> None:
    """Record the answer under the call running now (its request id is the context's)."""
    context = current_context()
    if context is None or context.observer is None or context.request_id is None:
        return
    await safely(
        context.observer.decided(
            context.request_id, user_id=context.user_id, outcome=outcome, detail=detail
        )
    )


def _asking(
    func: Callable[..., Awaitable[ToolResult]], *, name: str, args_schema: type[BaseModel]
) -> BaseTool:
    """A tool that asks the person: it runs only awaited, inside a graph run that can pause."""
    description = " ".join((inspect.getdoc(func) or "").split())  # one paragraph
    return StructuredTool.from_function(
        coroutine=func, name=name, args_schema=args_schema, description=description,
        metadata={INTERACTIVE: True},
    )


ask_human = _asking(_ask_human, name="ask_human", args_schema=AskHumanArgs)
request_authorization = _asking(
    _request_authorization, name="request_authorization", args_schema=AuthorizationArgs
)


def human_tools() -> list[BaseTool]:
    """The tools that ask the person: every level of agents offers them."""
    return [ask_human, request_authorization]


def builtin_tools() -> list[BaseTool]:
    """The built-in tools, in the order they are offered to the model."""
    return [current_time, calculator, *human_tools()]
