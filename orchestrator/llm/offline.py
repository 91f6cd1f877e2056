"""The built-in offline model: no language model at all, and honest about it.

It picks the tool whose name and description share the most words with the
request, fills the arguments it can recognise (numbers, arithmetic, time
zones, enum values, or the whole request for a single free-text parameter),
and summarises tool results as plain text.
"""

from __future__ import annotations

import json
import re
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
        scored = [(_score(schema, request), schema) for schema in self.tool_schemas]
        scored = [(score, schema) for score, schema in scored if score > 0]
        if not scored:
            names = ", ".join(s["function"]["name"] for s in self.tool_schemas) or "none"
            return AIMessage(content=NO_MATCH.format(tools=names))
        _, best = max(scored, key=lambda pair: pair[0])
        function = best["function"]
        args, missing = _fill_arguments(function.get("parameters", {}), request)
        if missing:
            return AIMessage(
                content=MISSING_ARGUMENT.format(tool=function["name"], names=", ".join(missing))
            )
        return AIMessage(
            content="", tool_calls=[{"name": function["name"], "args": args, "id": "offline_1"}]
        )


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOPWORDS}


def _score(schema: JsonSchema, request: str) -> int:
    function = schema["function"]
    described = _words(function["name"].replace("_", " ") + " " + function.get("description", ""))
    overlap = len(_words(request) & described)
    recognised = sum(
        2
        for name, spec in function.get("parameters", {}).get("properties", {}).items()
        if _recognise(name, spec, request) is not None
    )
    return overlap + recognised if overlap or recognised else 0


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


def _fill_arguments(parameters: JsonSchema, request: str) -> tuple[dict[str, object], list[str]]:
    properties: dict[str, JsonSchema] = parameters.get("properties", {})
    required = set(parameters.get("required", []))
    args = {
        name: value
        for name, spec in properties.items()
        if (value := _recognise(name, spec, request)) is not None
    }
    missing = [name for name in sorted(required) if name not in args]
    free_text = [n for n in missing if properties[n].get("type", "string") == "string"]
    if len(missing) == 1 and free_text:  # a lone free-text parameter takes the whole request
        args[missing.pop()] = request
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
    parts = [body.get("message") or ""]
    if isinstance(body.get("data"), dict):
        parts.append(", ".join(f"{k}: {v}" for k, v in body["data"].items()))
    elif body.get("data") is not None:
        parts.append(str(body["data"]))
    detail = "; ".join(p for p in parts if p) or "(nothing)"
    return f"- {message.name} {verdict}: {detail}"
