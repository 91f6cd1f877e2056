"""A turn streamed from an `orchestrator serve`, as the terminal shows a local one.

The server streams the run's parts (`messages` for the model's tokens,
`custom` for the orchestrator's own turn events, `updates` for what each step
added: the replies, and the questions a paused turn waits on);
`RemoteTurn` makes of them the same `TurnEvent`s a local session hands its
`on_event` handler, and, from the last event (`turn_result`: what
`TurnResult.to_json` gives), the same `TurnResult`: so the same renderer,
question asker and cost line serve `chat --server` as `chat`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from langchain_core.messages import AIMessage, AIMessageChunk
from pydantic import ValidationError

from orchestrator.conversation.turns import (
    PendingQuestion,
    TokenEvent,
    ToolCallRecord,
    TurnEvent,
    TurnResult,
)
from orchestrator.errors import UserError
from orchestrator.events import PlanEvent, Stage, ToolEvent, ToolPhase
from orchestrator.graph.node_support import MODEL_NODE
from orchestrator.plans import PlanView
from orchestrator.tools.decisions import ActionRequest
from orchestrator.tools.hitl import ALLOWED, Question, QuestionKind
from orchestrator.usage.budget import BudgetStop
from orchestrator.usage.meter import ModelTotals, ToolTotals, Totals
from orchestrator.usage.tokens import TokenCount

TURN_RESULT = "turn_result"  # the `kind` of the custom event the server ends a turn with
NO_RESULT = "the server ended the turn without its result (a server of another version?)"
STOPPED = (
    "the turn was stopped on the server (cancelled there, or the server shut down): what it did is "
    "kept in the session; send the message again to go on"
)
GONE = "the server ended the turn without its result and no longer answers (did it stop?)"
NOT_ANSWERED = "not answered"  # the status of a run the server was asked about and did not say
# The keys each kind of event has (a status event's `round` and `messages` are optional).
_KEYS: dict[object, frozenset[str]] = {
    "status": frozenset({"kind", "stage", "detail", "at"}),
    "tool": ToolEvent.__required_keys__,
    "plan": PlanEvent.__required_keys__,
}
JsonMap = Mapping[str, object]


@dataclass
class RemoteTurn:
    """Reads one run's stream: the events to show, then the turn's result.

    `run_id` is the run's (to cancel it), once the server made it; `body`
    the turn's `ask --json` keys as the server sent them.
    """

    run_id: str | None = None
    body: dict[str, object] | None = None
    status: str | None = None  # the run's, asked when its stream ended without a result
    _interrupts: list[JsonMap] = field(default_factory=list[JsonMap])
    _last_reply: str | None = None  # the id of the run's last model reply

    def started(self, run_id: str) -> None:
        """The server made the run `run_id` (before its first event is read)."""
        self.run_id = run_id

    def feed(self, event: str, data: object) -> TurnEvent | None:
        """The turn event one streamed part makes, if any (the rest is kept for the result)."""
        if event == "metadata" and isinstance(data, dict):
            run_id = cast(JsonMap, data).get("run_id")
            self.run_id = run_id if isinstance(run_id, str) else self.run_id
        elif event == "messages" and isinstance(data, list) and len(cast(list[object], data)) == 2:
            chunk, metadata = cast(list[object], data)
            return _token(chunk, metadata)
        elif event == "custom" and isinstance(data, dict):
            return self._custom(cast(JsonMap, data))
        elif event == "updates" and isinstance(data, dict):
            self._update(cast(JsonMap, data))
        return None

    def _custom(self, data: JsonMap) -> TurnEvent | None:
        if data.get("kind") == TURN_RESULT:
            self.body = {key: value for key, value in data.items() if key != "kind"}
            return None
        return _event(data)

    def _update(self, update: JsonMap) -> None:
        """A step's update: the questions it paused on, or each node's new messages."""
        for node, written in update.items():
            if node == "__interrupt__" and isinstance(written, list):
                self._interrupts = [cast(JsonMap, i) for i in cast(list[object], written) if isinstance(i, dict)]
                continue
            messages = _object(written).get("messages")
            replies = [_id_of(m) for m in _list(messages) if _is_reply(m)]
            if replies:
                self._last_reply = replies[-1]

    def result(self) -> TurnResult:
        """The turn's result; a stream that ended without one is a one-line error, saying why
        from the run's `status` (see `streamed`)."""
        if self.body is None:
            raise UserError({"interrupted": STOPPED, NOT_ANSWERED: GONE}.get(self.status or "", NO_RESULT))
        return turn_result(self.body, interrupts=self._interrupts, answer_id=self._last_reply)


def _event(data: JsonMap) -> TurnEvent | None:
    """The orchestrator's own event, if it is one this terminal knows (a newer server's: none)."""
    keys = _KEYS.get(data.get("kind"))
    if keys is None or not keys <= data.keys():
        return None
    event = dict(data)
    try:
        if "stage" in event:
            event["stage"] = Stage(event["stage"])
        if "phase" in event:
            event["phase"] = ToolPhase(event["phase"])
    except ValueError:
        return None
    return cast(TurnEvent, event)


def _token(chunk: object, metadata: object) -> TokenEvent | None:
    """A piece of the orchestrator's model reply (a sub-agent's, or a tool's message, is not)."""
    if not isinstance(chunk, dict) or not isinstance(metadata, dict):
        return None
    if cast(JsonMap, metadata).get("langgraph_node") != MODEL_NODE:
        return None
    kind = cast(JsonMap, chunk).get("type")
    shape = AIMessageChunk if kind == "AIMessageChunk" else AIMessage if kind == "ai" else None
    if shape is None:  # a tool's message: not the model's reply
        return None
    try:
        message = shape.model_validate(chunk)
    except ValidationError:
        return None
    return TokenEvent(kind="token", text=message.text, message_id=message.id) if message.text else None


def _is_reply(message: object) -> bool:
    return isinstance(message, dict) and cast(JsonMap, message).get("type") in ("ai", "AIMessageChunk")


def _id_of(message: object) -> str | None:
    found = cast(JsonMap, message).get("id")
    return found if isinstance(found, str) else None


def turn_result(
    body: JsonMap, *, interrupts: Sequence[JsonMap] = (), answer_id: str | None = None
) -> TurnResult:
    """A `TurnResult` from its JSON (`to_json`'s keys): the questions whole from `interrupts`.

    The open questions are those without a decision; each is the interrupt's
    own question when the server sent it (its description, schema and why),
    else what the JSON says of it.
    """
    asked = {str(i.get("id")): i.get("value") for i in interrupts}
    questions = [
        _pending(entry, asked.get(str(entry.get("id"))))
        for entry in _objects(body.get("questions"))
        if entry.get("decision") is None
    ]
    stop = body.get("budget_stop")
    return TurnResult(
        answer=str(body.get("answer") or ""),
        answer_id=answer_id,
        iterations=_int(body.get("iterations")),
        tool_calls=[_call(entry) for entry in _objects(body.get("tool_calls"))],
        questions=questions,
        usage=totals(_object(body.get("usage"))),
        budget_stop=_budget_stop(_object(stop)) if isinstance(stop, dict) else None,
        compacted=cast(dict[str, object], body["compacted"]) if isinstance(body.get("compacted"), dict) else None,
        plan=cast(PlanView, body["plan"]) if isinstance(body.get("plan"), dict) else None,
    )


def waiting_questions(interrupts: Sequence[JsonMap]) -> list[PendingQuestion]:
    """The questions a paused turn waits on, from its interrupts (`id`, `value`)."""
    return [_pending({"id": i.get("id")}, i.get("value")) for i in interrupts]


def _pending(entry: JsonMap, value: object) -> PendingQuestion:
    question_id = str(entry.get("id"))
    if isinstance(value, dict) and cast(JsonMap, value).get("kind") in ALLOWED and "action" in value:
        return PendingQuestion(question_id, cast(Question, value))
    kind = cast(QuestionKind, entry.get("kind") if entry.get("kind") in ALLOWED else "approval")
    arguments = entry.get("arguments")
    action = ActionRequest(
        name=str(entry.get("tool")),
        args=cast(dict[str, object], arguments) if isinstance(arguments, dict) else {},
        description="",
    )
    question = Question(
        kind=kind,
        request_id="",
        agent_path=[str(name) for name in _list(entry.get("agent_path"))],
        action=action,
        allowed=list(ALLOWED[kind]),
    )
    for key in ("risk_level", "urgency"):
        if isinstance(entry.get(key), str):
            question[key] = entry[key]  # pyright: ignore[reportGeneralTypeIssues]  # the server's own names
    return PendingQuestion(question_id, question)


def _call(entry: JsonMap) -> ToolCallRecord:
    arguments = entry.get("arguments")
    request_id = entry.get("request_id")
    plan = entry.get("plan")
    return ToolCallRecord(
        name=str(entry.get("name")),
        arguments=cast(dict[str, object], arguments) if isinstance(arguments, dict) else {},
        status=str(entry.get("status")),
        request_id=request_id if isinstance(request_id, str) else None,
        plan=cast(PlanView, plan) if isinstance(plan, dict) else None,
    )


def totals(body: JsonMap) -> Totals:
    """Usage totals from their JSON (`Totals.to_json`), as far as it tells them."""
    found = Totals()
    for name, model in _object(body.get("models")).items():
        figures = _object(model)
        cost = figures.get("cost_usd")
        calls = _int(figures.get("calls"))
        found.models[name] = ModelTotals(
            calls=calls,
            tokens=TokenCount(**{key: _int(figures.get(key)) for key in TokenCount().to_json()}),
            cost_usd=float(cost) if isinstance(cost, int | float) else 0.0,
            unpriced_calls=0 if isinstance(cost, int | float) else max(calls, 1),
            seconds=_float(figures.get("seconds")),
            unreported_calls=_int(figures.get("usage_unreported_calls")),
        )
    for name, tool in _object(body.get("tools")).items():
        figures = _object(tool)
        found.tools[name] = ToolTotals(
            calls=_int(figures.get("calls")),
            cost_usd=_float(figures.get("cost_usd")),
            credits=_float(figures.get("credits")),
        )
    return found


def _budget_stop(body: JsonMap) -> BudgetStop:
    return BudgetStop(
        budget=str(body.get("budget")),
        limit_usd=_float(body.get("limit_usd")),
        spent_usd=_float(body.get("spent_usd")),
        scope=str(body.get("scope")),
        estimated_usd=_float(body.get("estimated_usd")),
    )


def _object(value: object) -> dict[str, object]:
    return cast(dict[str, object], value) if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return cast(list[object], value) if isinstance(value, list) else []


def _objects(value: object) -> list[JsonMap]:
    return [cast(JsonMap, entry) for entry in _list(value) if isinstance(entry, dict)]


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
