"""The person's decisions on a paused call, in the shape of LangChain v1's human in the loop.

The same TypedDicts as `langchain.agents.middleware.human_in_the_loop` (their
JSON schema is the same; a test holds them to it), defined here because
importing that module first imports `langchain.agents`, whose factory loads
`init_chat_model` and its providers' registry: most of a second for every
command that can ask the person anything.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict  # pydantic reads TypedDicts of typing_extensions on 3.11


class Action(TypedDict):
    """Represents an action with a name and args."""

    name: str
    args: dict[str, Any]  # a tool's arguments: any JSON


class ActionRequest(TypedDict):
    """Represents an action request with a name, args, and description."""

    name: str
    args: dict[str, Any]  # a tool's arguments: any JSON
    description: NotRequired[str]


class ApproveDecision(TypedDict):
    """Response when a human approves the action."""

    type: Literal["approve"]


class EditDecision(TypedDict):
    """Response when a human edits the action."""

    type: Literal["edit"]
    edited_action: Action


class RejectDecision(TypedDict):
    """Response when a human rejects the action."""

    type: Literal["reject"]
    message: NotRequired[str]


class RespondDecision(TypedDict):
    """Response when a human answers on behalf of the tool, skipping execution.

    Used for "ask user" style tools whose real implementation is the human's
    response. The tool is not executed; instead, a synthetic `ToolMessage` with
    `status="success"` and the provided `message` is returned to the model.
    """

    type: Literal["respond"]
    message: str


Decision = ApproveDecision | EditDecision | RejectDecision | RespondDecision
