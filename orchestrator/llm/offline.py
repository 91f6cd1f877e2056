"""The built-in offline model: no language model at all, and honest about it.

It picks the tool whose name and description share the most words with the
request, fills the arguments it can recognise (numbers, arithmetic, time
zones, enum values, or the whole request for a single free-text parameter),
and summarises tool results as plain text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

OFFLINE_NOTICE = (
    "No model configured (set OPENAI_API_KEY or OPENAI_BASE_URL, or ORCHESTRATOR_MODEL): "
    "using the built-in offline model, which only matches requests to tools."
)
NO_MATCH = (
    "I am the built-in offline model, not a language model: I can only run a tool whose "
    "description matches your request. Tools: {tools}."
)
MISSING_ARGUMENT = (
    "I am the offline model: {tool} looks right, but I could not find its {names} in your request."
)

JsonSchema = dict[str, Any]  # a JSON schema is free-form by nature

_STOPWORDS = frozenset(
    "the a an and or of to in on at for is are be it its me my i you your what whats "
    "which who how can could would please tell give show with from this that do does".split()
)
_FREE_TEXT = frozenset(
    "request query question text prompt message input title task instruction instructions".split()
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_EXPRESSION = re.compile(r"[-+(]*\d[\d.\s()+\-*/%]*[\d)]")
_TIMEZONE = re.compile(r"\b(?:UTC|[A-Z][A-Za-z]+/[A-Za-z_]+(?:/[A-Za-z_]+)?)\b")


class OfflineChatModel(BaseChatModel):
    """A rule-based stand-in used when no chat model is configured."""

    tool_schemas: list[JsonSchema] = []

    @property
    def _llm_type(self) -> str:
        return "orchestrator-offline"

    def bind_tools(
        self, tools: Sequence[BaseTool | JsonSchema], **kwargs: object
    ) -> Runnable[Any, AIMessage]:
        return self.model_copy(update={"tool_schemas": [convert_to_openai_tool(t) for t in tools]})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: object,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content=_summarise(_trailing_tool_messages(messages)))
        request = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        return self._pick_tool(request)

    def _pick_tool(self, request: str) -> AIMessage:
        candidates = [_Candidate.of(schema["function"], request) for schema in self.tool_schemas]
        candidates = [c for c in candidates if c.score > 0]
        if not candidates:
            names = ", ".join(s["function"]["name"] for s in self.tool_schemas) or "none"
            return AIMessage(content=NO_MATCH.format(tools=names))
        # A tool whose arguments can all be filled beats a better-worded one that cannot
        # run; on a tie, the one that needs no guess at free text.
        best = max(candidates, key=lambda c: (not c.missing, c.score, not c.guessed))
        if best.missing:
            return AIMessage(
                content=MISSING_ARGUMENT.format(tool=best.name, names=", ".join(best.missing))
            )
        return AIMessage(
            content="", tool_calls=[{"name": best.name, "args": best.args, "id": "offline_1"}]
        )


@dataclass(frozen=True)
class _Candidate:
    name: str
    score: int
    args: dict[str, object]
    missing: list[str]
    guessed: bool  # a free-text parameter was given the whole request

    @classmethod
    def of(cls, function: JsonSchema, request: str) -> _Candidate:
        parameters: JsonSchema = function.get("parameters", {})
        args, missing = _fill_arguments(parameters, request)
        # Words of the tool's own name count twice: descriptions share context words.
        wanted = _words(request)
        named = _words(function["name"].replace("_", " "))
        overlap = 2 * len(wanted & named) + len(wanted & _words(function.get("description", "")))
        free = _free_text(parameters)
        recognised = 2 * sum(1 for name in args if name not in free)
        score = overlap + recognised if overlap or recognised else 0
        guessed = any(name in free for name in args)
        return cls(function["name"], score, args, missing, guessed)


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOPWORDS}


def _recognise(name: str, spec: JsonSchema, request: str) -> object | None:
    """A value for one parameter read from the request, or None."""
    if "enum" in spec:
        return next((v for v in spec["enum"] if str(v).lower() in request.lower()), None)
    if spec.get("type") in ("number", "integer"):
        match = _NUMBER.search(request)
        if match is None:
            return None
        return int(float(match.group())) if spec["type"] == "integer" else float(match.group())
    if "expression" in name or "formula" in name:
        found = [m.group().strip() for m in _EXPRESSION.finditer(request)]
        found = [f for f in found if re.search(r"[-+*/%]", f.lstrip("-+"))]
        return max(found, key=len) if found else None
    if "zone" in name or name == "tz":
        match = _TIMEZONE.search(request)
        return match.group() if match else None
    return None


def _free_text(parameters: JsonSchema) -> set[str]:
    properties: dict[str, JsonSchema] = parameters.get("properties", {})
    return {
        name
        for name, spec in properties.items()
        if name in _FREE_TEXT and spec.get("type", "string") == "string"
    }


def _fill_arguments(parameters: JsonSchema, request: str) -> tuple[dict[str, object], list[str]]:
    properties: dict[str, JsonSchema] = parameters.get("properties", {})
    args: dict[str, object] = {
        name: value
        for name, spec in properties.items()
        if (value := _recognise(name, spec, request)) is not None
    }
    # Only a parameter meant for free text takes the whole request, and only one of them.
    free = sorted(_free_text(parameters) - set(args))
    if free:
        args[free[0]] = request
    missing = [name for name in sorted(parameters.get("required", [])) if name not in args]
    return args, missing


def _trailing_tool_messages(messages: list[BaseMessage]) -> list[ToolMessage]:
    trailing: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        trailing.insert(0, message)
    return trailing


def _summarise(results: list[ToolMessage]) -> str:
    lines = [_summarise_one(message) for message in results]
    return "(offline model) Here is what the tools returned:\n" + "\n".join(lines)


def _summarise_one(message: ToolMessage) -> str:
    try:
        body = json.loads(message.text)
    except json.JSONDecodeError:
        return f"- {message.name}: {message.text}"
    verdict = "failed" if body.get("status") == "failure" else "returned"
    data = body.get("data")
    if body.get("message"):
        detail = body["message"]  # the tool's own summary
    elif isinstance(data, dict):
        detail = ", ".join(f"{k}: {v}" for k, v in data.items())
    else:
        detail = "(nothing)" if data is None else str(data)
    return f"- {message.name} {verdict}: {detail}"
