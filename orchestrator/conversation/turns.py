"""What a turn led to: its answer, its tool calls, and the questions it waits on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypedDict, TypeGuard

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import StateSnapshot, StreamPart

from orchestrator.events import PlanEvent, StatusEvent, ToolEvent
from orchestrator.plans import Plan, PlanView, nested_plan, plan_view
from orchestrator.tools.hitl import ALLOWED, Decision, Question, question_risk
from orchestrator.usage.budget import BudgetStop
from orchestrator.usage.meter import Totals


class TokenEvent(TypedDict):
    """A piece of the model's reply as it is generated."""

    kind: Literal["token"]
    text: str
    message_id: str | None


TurnEvent = StatusEvent | ToolEvent | PlanEvent | TokenEvent
EventHandler = Callable[[TurnEvent], None]
# Every part of the top-level graph's stream as LangGraph gives it (values, updates, messages,
# custom): what a client of `orchestrator serve` asks for by `stream_mode`.
PartHandler = Callable[[StreamPart], None]


class Watchers(TypedDict, total=False):
    """Who watches a turn as it runs: its events (`chat`), the graph's own stream (`serve`)."""

    on_event: EventHandler | None
    on_part: PartHandler | None


@dataclass(frozen=True)
class ToolCallRecord:
    """One tool call the model made during a turn, and how it ended."""

    name: str
    arguments: dict[str, object]
    status: str
    request_id: str | None = None
    plan: PlanView | None = None  # the plan of the agent it called, if that made one


@dataclass(frozen=True)
class PendingQuestion:
    """A question a paused turn waits on: the interrupt's id (answers are keyed by it) and the question."""

    id: str
    question: Question

    def to_json(self, decision: Decision | None = None) -> dict[str, object]:
        """One entry of `ask --json`'s `questions`: the question and, once answered, its decision."""
        action = self.question["action"]
        edited = decision["edited_action"]["args"] if decision and decision["type"] == "edit" else None
        return {
            "id": self.id,
            "kind": self.question["kind"],
            "agent_path": list(self.question["agent_path"]),
            "tool": action["name"],
            "arguments": action["args"],
            **question_risk(self.question),
            "decision": decision["type"] if decision else None,
            "edited_arguments": edited,
            "message": decision.get("message") if decision else None,
        }


@dataclass(frozen=True)
class AnsweredQuestion:
    """A question of the turn and the person's decision on it."""

    asked: PendingQuestion
    decision: Decision


@dataclass(frozen=True)
class TurnResult:
    """What one user message led to: the answer, or the questions the turn waits on.

    `questions` are the open questions when the turn paused (then `answer` is
    empty); `answered` the questions of this turn answered in this process.
    `usage` is what the turn's model and tool calls used, at every level;
    `budget_stop` the budget that ended it, if one did; `compacted` what the
    turn's compaction of the orchestrator's history did, if it compacted
    (`saved_tokens`, `failed`); `plan` the plan the orchestrator made in the
    turn, if it made one (the plans of agents below are under its tasks, or
    under their calls in `tool_calls`).
    """

    answer: str
    answer_id: str | None
    iterations: int
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    questions: list[PendingQuestion] = field(default_factory=list)
    answered: list[AnsweredQuestion] = field(default_factory=list)
    usage: Totals = field(default_factory=Totals)
    budget_stop: BudgetStop | None = None
    compacted: dict[str, object] | None = None
    plan: PlanView | None = None

    @property
    def cost_usd(self) -> float | None:
        """What the turn cost, when the price of every call is known (else None)."""
        return self.usage.cost_usd if self.usage.priced else None

    def to_json(self) -> dict[str, object]:
        """The shape `orchestrator ask --json` prints."""
        return {
            "answer": self.answer,
            "iterations": self.iterations,
            "tool_calls": [_call_json(c) for c in self.tool_calls],
            "questions": [
                *(a.asked.to_json(a.decision) for a in self.answered),
                *(q.to_json() for q in self.questions),
            ],
            "usage": self.usage.to_json(),
            "cost_usd": self.cost_usd,
            "budget_stop": self.budget_stop.to_json() if self.budget_stop else None,
            "compacted": self.compacted,
            "plan": self.plan,
        }


def _call_json(call: ToolCallRecord) -> dict[str, object]:
    shown: dict[str, object] = {
        "name": call.name,
        "arguments": call.arguments,
        "status": call.status,
        "request_id": call.request_id,
    }
    if call.plan is not None:
        shown["plan"] = call.plan
    return shown


def turn_plan(plan: Plan | None, *, start: str | None) -> PlanView | None:
    """The plan of the turn that began with message `start`, as shown (None: it made none)."""
    if not plan or start is None or plan["turn"] != start:
        return None
    return plan_view(plan)


def messages_of(state: StateSnapshot) -> list[BaseMessage]:
    return list(state.values.get("messages", []))


def questions_of(state: StateSnapshot) -> list[PendingQuestion]:
    return [PendingQuestion(found.id, _as_question(found.value)) for found in state.interrupts]


def _is_question(value: object) -> TypeGuard[Question]:
    """Whether an interrupt's value is `ask_person`'s question (of a kind it asks, with its action)."""
    return isinstance(value, dict) and value.get("kind") in ALLOWED and "action" in value


def _as_question(value: object) -> Question:
    """The interrupt's value as a question; a bare `interrupt(value)` becomes a free question."""
    if _is_question(value):
        return value
    return Question(
        kind="question",
        request_id="",
        agent_path=[],
        action={"name": "interrupt", "args": {}, "description": str(value)},
        allowed=list(ALLOWED["question"]),
    )


def collect_turn(
    messages: list[BaseMessage], *, after: str | None, waiting: list[PendingQuestion]
) -> TurnResult:
    start = next((i + 1 for i, m in enumerate(messages) if m.id == after), len(messages))
    turn = messages[start:]
    replies = [m for m in turn if isinstance(m, AIMessage)]
    outcomes = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
    unanswered = "paused" if waiting else "not_run"
    calls = [
        _record(call["name"], call["args"], outcomes.get(call["id"] or ""), unanswered=unanswered)
        for reply in replies
        for call in reply.tool_calls
    ]
    # A paused turn has no answer yet: its last reply is the one whose calls wait.
    final = replies[-1] if replies and not waiting else None
    return TurnResult(
        answer=final.text if final else "",
        answer_id=final.id if final else None,
        iterations=len(replies),
        tool_calls=calls,
        questions=waiting,
    )


def _record(
    name: str, args: dict[str, object], outcome: ToolMessage | None, *, unanswered: str
) -> ToolCallRecord:
    if outcome is None:
        return ToolCallRecord(name=name, arguments=args, status=unanswered)
    artifact = outcome.artifact if isinstance(outcome.artifact, dict) else {}
    return ToolCallRecord(
        name=name,
        arguments=args,
        status=str(artifact.get("status", outcome.status)),
        request_id=artifact.get("request_id"),
        plan=nested_plan(artifact),
    )
