"""The built-in offline model: no language model at all, and honest about it.

It picks the tool whose name and description share the most words with the
request, fills the arguments it can recognise, and summarises tool results as
plain text. Numbers, time zones and enum values are read anywhere in the request;
an arithmetic `expression` only if all of the request past its lead-in ("what is",
"compute"...) is arithmetic, else it says so rather than answer part of it. One
free-text parameter (title, text, query, message...) or, failing one, a lone
required string no rule reads (the `who` of "greet Ada") gets the *rest* of the
request: past its leading words naming the tool (its name, action verb and
description), stopwords and separators, so "add a task: buy milk" stores "buy
milk". A parameter handed on to another model (the `request` of an agent's `ask`,
prompt, question, input) gets the whole request, every word of which the agent
below needs to choose its own tool. An empty rest fills nothing: the reply names
the missing argument.
"""

from __future__ import annotations

import ast
import json
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from orchestrator.llm.summary import extractive_summary, is_summary_request
from orchestrator.notes import is_note, is_persons
from orchestrator.plans import PLAN_TOOL

NO_MATCH = (
    "I am the built-in offline model, not a language model: I can only run a tool whose "
    "description matches your request. Tools: {tools}."
)
MISSING_ARGUMENT = (
    "I am the offline model: {tool} looks right, but I could not find its {names} in your request."
)
NOT_ARITHMETIC = (
    "I am the offline model: I cannot read your request as arithmetic, so I did not run {tool}. "
    "Ask with numbers, + - * / // % ** and parentheses only, e.g. 'what is (2+3)*4'."
)

JsonSchema = dict[str, Any]  # a JSON schema is free-form by nature

_STOPWORDS = frozenset(
    ["the", "a", "an", "and", "or", "of", "to", "in", "on", "at", "for", "is", "are", "be", "it", "its", "me", "my", "i", "you", "your", "what", "whats", "which", "who", "how", "can", "could", "would", "please", "tell", "give", "show", "with", "from", "this", "that", "do", "does"]
)
_REST_TEXT = frozenset(["query", "text", "message", "title", "task", "content", "note"])
_WHOLE_TEXT = frozenset(["request", "prompt", "question", "input", "instruction", "instructions"])
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
# Arithmetic-looking text; signs the calculator lacks still show that arithmetic was meant.
_EXPRESSION = re.compile(r"[-+(]*\d[\d.\s()+\-*/%^×÷]*[\d)]")
_ARITHMETIC = re.compile(r"[\d.\s()+\-*/%]+")
_ARITHMETIC_REQUEST = re.compile(  # what a request for arithmetic wraps the expression in
    r"(?:\s*(?:what\s+is|what's|whats|how\s+much\s+is|calculate|compute|evaluate|please"
    r"|the\s+(?:value|result)\s+of)\b)*(?P<body>.*?)(?:\s+(?:calculated|computed|please))*[\s?=]*",
    re.IGNORECASE | re.DOTALL,
)
# The session's notice when a background job ends (FOLLOW_UP; "task" in older conversations).
_BACKGROUND_NOTICE = re.compile(
    r"Background (?:job|task) (\S+) \((.+?)\) has \w+(?: \([^)]*\))?\. Its result: (.*)"
)
_TIMEZONE = re.compile(r"\b(?:UTC|[A-Z][A-Za-z]+/[A-Za-z_]+(?:/[A-Za-z_]+)?)\b")
_LEAD_TOKEN = re.compile(r"\s*(?:([A-Za-z_'][\w'-]*)|([:,\-]+))")  # "to-do" is one word


class OfflineChatModel(BaseChatModel):
    """A rule-based stand-in used when no chat model is configured."""

    tool_schemas: list[JsonSchema] = []

    @property
    def _llm_type(self) -> str:
        return "orchestrator-offline"

    def bind_tools(
        self,
        tools: Sequence[dict[str, object] | type | Callable[..., object] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: object,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        schemas = [convert_to_openai_tool(t) for t in tools]
        # It cannot lay out a plan: matching words, it would only ever pick the plan tool wrongly.
        schemas = [schema for schema in schemas if schema["function"]["name"] != PLAN_TOOL]
        return self.model_copy(update={"tool_schemas": schemas})

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: object,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[0], SystemMessage) and is_summary_request(messages[0].text):
            return AIMessage(content=extractive_summary(messages[-1].text))
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content=_summarise(_trailing_tool_messages(messages)))
        if is_note(messages[-1]):  # a background task's report: pass it on
            return AIMessage(content=_report(messages[-1].text))
        request = next((m.text for m in reversed(messages) if is_persons(m)), "")
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
        if best.missing and best.not_arithmetic:
            return AIMessage(content=NOT_ARITHMETIC.format(tool=best.name))
        if best.missing:
            return AIMessage(
                content=MISSING_ARGUMENT.format(tool=best.name, names=", ".join(best.missing))
            )
        call_id = f"call_{uuid.uuid4().hex[:24]}"  # never an earlier call's
        return AIMessage(
            content="", tool_calls=[{"name": best.name, "args": best.args, "id": call_id}]
        )


@dataclass(frozen=True)
class _Candidate:
    name: str
    score: int
    args: dict[str, object]
    missing: list[str]
    guessed: bool  # a parameter was filled with text rather than a recognised value
    not_arithmetic: bool  # it wants an expression; the request holds arithmetic and more

    @classmethod
    def of(cls, function: JsonSchema, request: str) -> _Candidate:
        parameters: JsonSchema = function.get("parameters", {})
        named = _words(function["name"].replace("_", " "))
        described = _words(function.get("description", ""))
        args, text = _fill_arguments(parameters, request, tool_words=named | described)
        missing = [name for name in sorted(parameters.get("required", [])) if name not in args]
        # Arithmetic it could not wholly read still points here: the reply then says why
        # it did not run, rather than that no tool matches.
        not_arithmetic = any(_is_expression(n) for n in missing) and (
            _without_arithmetic(request) != request
        )
        # Words of the tool's own name count twice: descriptions share context words.
        wanted = _words(request)
        overlap = 2 * len(wanted & named) + len(wanted & described)
        read = [name for name in args if name != text]
        # A number alone is no evidence: "what is 12" must not complete task 12.
        types = {name: spec.get("type") for name, spec in parameters.get("properties", {}).items()}
        telling = not_arithmetic or any(types[n] not in ("number", "integer") for n in read)
        score = overlap + 2 * (len(read) + not_arithmetic) if overlap or telling else 0
        return cls(function["name"], score, args, missing, text in args, not_arithmetic)


def _words(text: str) -> set[str]:
    # Two letters at least: the "s" of "user's" would otherwise match every "what's".
    return {w.rstrip("s") for w in re.findall(r"[a-z]{2,}", text.lower()) if w not in _STOPWORDS}


def _is_expression(name: str) -> bool:
    return "expression" in name or "formula" in name


def _is_zone(name: str) -> bool:
    return "zone" in name or name == "tz"


def _has_rule(name: str, spec: JsonSchema) -> bool:
    """Whether a string parameter has a reader of its own, so it never takes free text."""
    return "enum" in spec or _is_expression(name) or _is_zone(name)


def _recognise(name: str, spec: JsonSchema, request: str) -> object | None:
    """A value for one parameter read from the request, or None."""
    if "enum" in spec:
        return next((v for v in spec["enum"] if str(v).lower() in request.lower()), None)
    if spec.get("type") in ("number", "integer"):
        # A number inside arithmetic is an operand, not a value: the 2 of "2**10 + ½".
        match = _NUMBER.search(_without_arithmetic(request))
        if match is None:
            return None
        return int(float(match.group())) if spec["type"] == "integer" else float(match.group())
    if _is_expression(name):
        return _arithmetic(request)
    if _is_zone(name):
        match = _TIMEZONE.search(request)
        return match.group() if match else None
    return None


def _arithmetic(request: str) -> str | None:
    """The request as an expression, if all of it past the lead-in is arithmetic."""
    wrapped = _ARITHMETIC_REQUEST.fullmatch(request)
    body = wrapped["body"].strip() if wrapped else ""
    # Answering the part it could read would answer a question nobody asked.
    if not _ARITHMETIC.fullmatch(body) or not _has_operator(body):
        return None
    try:
        ast.parse(body, mode="eval")  # the calculator's own parser: "2 +" is no expression
    except SyntaxError:
        return None
    return body


def _without_arithmetic(request: str) -> str:
    return _EXPRESSION.sub(lambda m: " " if _has_operator(m.group()) else m.group(), request)


def _has_operator(text: str) -> bool:
    return re.search(r"[-+*/%^×÷]", text.lstrip("-+")) is not None


def _rest(request: str, *, tool_words: set[str]) -> str:
    """The request past its lead-in of words naming the tool, stopwords and a separator."""
    position = 0
    while match := _LEAD_TOKEN.match(request, position):
        word, separator = match.groups()
        if separator:  # it marks where the value starts: what follows is kept as written
            position = match.end()
            break
        parts = re.split(r"[_-]", word.lower().replace("'", ""))
        if not all(p in _STOPWORDS or p.rstrip("s") in tool_words for p in parts if p):
            break
        position = match.end()
    return request[position:].lstrip(" \t\n:,-").rstrip(" .?!")


def _fill_arguments(
    parameters: JsonSchema, request: str, *, tool_words: set[str]
) -> tuple[dict[str, object], str | None]:
    """The arguments read from the request, and which one (if any) took free text."""
    properties: dict[str, JsonSchema] = parameters.get("properties", {})
    args: dict[str, object] = {
        name: value
        for name, spec in properties.items()
        if (value := _recognise(name, spec, request)) is not None
    }
    strings = {n for n, s in properties.items() if s.get("type", "string") == "string"} - set(args)
    # Only one parameter takes free text: the same words cannot mean two things.
    free = sorted(strings & (_REST_TEXT | _WHOLE_TEXT))
    # Failing one, a lone required string no rule reads can only be what the request names.
    required = parameters.get("required", [])
    unread = [n for n in required if n in strings and not _has_rule(n, properties[n])]
    text = free[0] if free else unread[0] if len(unread) == 1 else None
    if text is None:
        return args, None
    value = request if text in _WHOLE_TEXT else _rest(request, tool_words=tool_words)
    if value:
        args[text] = value
    return args, text


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


def _report(notice: str) -> str:
    """A background job's result, from the notice the session writes when the job ends.

    Never the notice itself: its instructions are for a model, not for the person.
    """
    found = _BACKGROUND_NOTICE.search(notice)  # past the note's own lead-in
    if found is None:
        return "(offline model) A background job has ended."
    job, tool, result = found.groups()
    return f"(offline model) Background job {job} has ended:\n{_describe(tool, result)}"


def _summarise_one(message: ToolMessage) -> str:
    return _describe(message.name or "tool", message.text)


def _describe(name: str, text: str) -> str:
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        return f"- {name}: {text}"
    if not isinstance(body, dict):
        return f"- {name} returned: {text}"
    verdict = "failed" if body.get("status") == "failure" else "returned"
    data = body.get("data")
    if isinstance(data, dict) and data.get("status") == "acknowledged":
        # The acknowledgement's message tells the model what to do: the person reads what it means.
        return f"- {name} goes on in the background as job {data.get('job_id')}"
    if body.get("message"):
        detail = body["message"]  # the tool's own summary
    elif isinstance(data, dict):
        detail = ", ".join(f"{k}: {v}" for k, v in data.items())
    else:
        detail = "(nothing)" if data is None else str(data)
    return f"- {name} {verdict}: {detail}"
