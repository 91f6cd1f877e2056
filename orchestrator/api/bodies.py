"""What clients of `orchestrator serve` send, validated: a bad body is a 422 naming the field.

The fields are the LangGraph Agent Server's, as `langgraph-sdk` sends them. Those
this server does not do (checkpoints to fork from, breakpoints, webhooks,
scheduled runs) are refused by name when set, never silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue

from orchestrator.api.stream_events import Mode

UNSUPPORTED_RUN_FIELDS = (
    "checkpoint",
    "checkpoint_id",
    "interrupt_before",
    "interrupt_after",
    "webhook",
    "after_seconds",
    "feedback_keys",
)
MAX_PAGE = 1000


def _or(default: object) -> BeforeValidator:
    """The SDK sends every field, unset ones as null: null means the default."""
    return BeforeValidator(lambda value: default if value is None else value)


Metadata = Annotated[dict[str, JsonValue], _or({})]


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")  # the SDK sends every field, most of them None


class ThreadCreate(_Body):
    """`POST /threads`."""

    thread_id: str | None = Field(default=None, min_length=1, max_length=200)
    metadata: Metadata = Field(default_factory=dict)
    if_exists: Annotated[Literal["raise", "do_nothing"], _or("raise")] = "raise"


class ThreadSearch(_Body):
    """`POST /threads/search`."""

    metadata: Metadata = Field(default_factory=dict)
    limit: Annotated[int, _or(10)] = Field(default=10, ge=1, le=MAX_PAGE)
    offset: Annotated[int, _or(0)] = Field(default=0, ge=0)


class ThreadPatch(_Body):
    """`PATCH /threads/{thread_id}`."""

    metadata: dict[str, JsonValue]


class HistoryRequest(_Body):
    """`POST /threads/{thread_id}/history`."""

    limit: Annotated[int, _or(10)] = Field(default=10, ge=1, le=MAX_PAGE)


class Resume(_Body):
    """`command` of a run: answers to the questions a paused turn waits on."""

    resume: JsonValue = None


def _listed(value: object) -> object:
    """One stream mode may come alone; none means `values`."""
    return [value] if isinstance(value, str) else ["values"] if value is None else value


class RunCreate(_Body):
    """`POST /threads/{thread_id}/runs` (and `/stream`, `/wait`)."""

    model_config = ConfigDict(extra="allow")  # read for the fields refused by name

    assistant_id: str = Field(min_length=1, max_length=200)
    input: dict[str, JsonValue] | None = None
    command: Resume | None = None
    stream_mode: Annotated[list[Mode], BeforeValidator(_listed)] = Field(default_factory=lambda: ["values"])
    metadata: Metadata = Field(default_factory=dict)
    multitask_strategy: Annotated[Literal["reject", "enqueue", "interrupt"], _or("reject")] = "reject"
    if_not_exists: Annotated[Literal["reject", "create"], _or("reject")] = "reject"
    on_disconnect: Annotated[Literal["cancel", "continue"], _or("continue")] = "continue"

    def refused(self) -> str | None:
        """The first field set that this server does not do, or None."""
        extra = self.model_extra or {}
        return next((name for name in UNSUPPORTED_RUN_FIELDS if extra.get(name)), None)


class StoreSearch(_Body):
    """`POST /store/items/search`: the user's own memory."""

    namespace_prefix: Annotated[list[str], _or([])] = Field(default_factory=list)
    query: str | None = None
    limit: Annotated[int, _or(10)] = Field(default=10, ge=1, le=100)
    offset: Annotated[int, _or(0)] = Field(default=0, ge=0)
