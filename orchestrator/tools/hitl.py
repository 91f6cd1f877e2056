"""Questions for the person, asked with LangGraph's `interrupt()`.

A question pauses the whole turn (at any depth of the tree); the person's
answer resumes it, keyed by the interrupt's id. Answers take the shape of
LangChain v1's human-in-the-loop decisions:

- `{"type": "approve"}`: run the call as it is (or: grant an authorization);
- `{"type": "edit", "edited_action": {"name": ..., "args": {...}}}`: run it with these arguments;
- `{"type": "reject", "message": "why"}`: do not run it (or: refuse an authorization);
- `{"type": "respond", "message": "..."}`: the answer to an `ask_human` question.

Nothing is ever approved silently: an answer that cannot be read is a rejection.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from langgraph.config import get_config
from langgraph.types import interrupt
from pydantic import TypeAdapter, ValidationError

from orchestrator.tools.context import current_context
from orchestrator.tools.decisions import (
    ActionRequest,
    ApproveDecision,
    Decision,
    EditDecision,
    RejectDecision,
    RespondDecision,
)
from orchestrator.tools.risk import DEFAULT_RISK, DEFAULT_URGENCY, Risk, RiskLevel, Urgency

QuestionKind = Literal["approval", "question", "authorization"]

# What each kind of question may be answered with.
ALLOWED: dict[QuestionKind, tuple[str, ...]] = {
    "approval": ("approve", "edit", "reject"),
    "question": ("respond", "reject"),
    "authorization": ("approve", "reject"),
}
INTERACTIVE = "interactive"  # in a tool's metadata: it asks the person, so it never runs detached
UNREADABLE = "the answer could not be read ({problem}): taken as a rejection"


class Question(TypedDict):
    """What a paused call asks the person; the interrupt's value.

    `action` is the call in question (its name, arguments and a description
    for the person); `agent_path` who asks, from the top (empty for the
    orchestrator's own calls); `args_schema` the JSON schema an edit must
    match; `why` why the call needs a decision; `problem` what was wrong
    with an earlier edit, when the question is asked again; `risk_level` and
    `urgency` how risky the call is and how soon it wants an answer (see
    `risk`; a question from before they were asked has neither: `risk_of`).
    """

    kind: QuestionKind
    request_id: str
    agent_path: list[str]
    action: ActionRequest
    allowed: list[str]
    args_schema: NotRequired[dict[str, object]]
    why: NotRequired[str]
    problem: NotRequired[str]
    risk_level: NotRequired[RiskLevel]
    urgency: NotRequired[Urgency]


def question_risk(question: Question) -> Risk:
    """The question's risk level and urgency (the defaults when it says none)."""
    return Risk(
        risk_level=question.get("risk_level", DEFAULT_RISK),
        urgency=question.get("urgency", DEFAULT_URGENCY),
    )


DECISION: TypeAdapter[Decision] = TypeAdapter(Decision)
DECISION_SCHEMA = DECISION.json_schema()


def can_ask() -> bool:
    """Whether a question can be asked here: inside a graph run, which an answer resumes.

    Outside one (a call recovery runs again after a crash, a tool invoked
    directly), or inside a job a worker runs (however deep), there is no one
    to ask, and `interrupt()` cannot pause anything.
    """
    context = current_context()
    if context is not None and context.job is not None:
        return False
    try:
        get_config()
    except RuntimeError:
        return False
    return True


def ask_person(question: Question) -> Decision:
    """Pause the turn with `question`; once resumed, the person's decision.

    The first call raises LangGraph's `GraphInterrupt` (which must pass
    through everything up to the graph); the resumed task calls it again
    and gets the answer. An answer of the wrong shape, or one the question
    does not allow, is a rejection.
    """
    value = interrupt(question, response_schema=DECISION_SCHEMA)
    try:
        decision = DECISION.validate_python(value)
    except ValidationError as error:
        return RejectDecision(type="reject", message=UNREADABLE.format(problem=error.errors()[0]["msg"]))
    if decision["type"] not in question["allowed"]:
        problem = f"{decision['type']} is not an answer to this question"
        return RejectDecision(type="reject", message=UNREADABLE.format(problem=problem))
    return decision


__all__ = [
    "ALLOWED",
    "ApproveDecision",
    "Decision",
    "EditDecision",
    "Question",
    "QuestionKind",
    "RejectDecision",
    "RespondDecision",
    "ask_person",
    "can_ask",
    "question_risk",
]
