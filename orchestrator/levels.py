"""What each level of the agent tree runs with, resolved from its parent down.

The orchestrator's level comes from the settings; a tool folder's level is its
parent's, with what its `tool_config.yaml` sets locally (`llm`, `db`, `limits`,
`log_level`, `instructions`). `inherit` is the default for each, and each limit
is inherited on its own.

This module holds the level data only: the resolver that builds a folder's model
and database is `sources.level_resolver`, model endpoints are `llm.endpoints`, a
level as people see it is `folders.level_view`.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from sqlalchemy.ext.asyncio import AsyncConnection

    from orchestrator.level_overrides import LimitsOverride
    from orchestrator.settings import Settings


class LevelDatabase(Protocol):
    """A level's database (the store's `Database`, which is above this layer): where its
    folders' migrations run, and transactions under one user's row-level security."""

    @property
    def libpq_url(self) -> str:
        """The URL, as libpq (and a second connection of its own) takes it."""
        ...

    def user_transaction(self, user_id: str) -> AbstractAsyncContextManager[AsyncConnection]:
        """A transaction that sees and writes only `user_id`'s rows."""
        ...


@dataclass(frozen=True)
class Limits:
    """A level's limits: tool rounds per turn, result size, call timeout, inline budget; and
    whether a result's `data` goes to the model (`include_tool_data`: else its message alone)."""

    max_iterations: int
    max_result_chars: int
    timeout_seconds: float
    inline_budget_seconds: float | None = None
    include_tool_data: bool = True

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The orchestrator's own limits."""
        return cls(
            max_iterations=settings.max_tool_iterations,
            max_result_chars=settings.max_tool_result_chars,
            timeout_seconds=settings.tool_timeout_seconds,
            inline_budget_seconds=settings.inline_budget_seconds,
            include_tool_data=settings.include_tool_data,
        )

    def overridden(self, local: LimitsOverride) -> Limits:
        """These limits, with each one `local` sets replaced (the others inherited)."""
        return replace(self, **local.model_dump(exclude_none=True))


# The limits a folder's `limits:` sets (`include_tool_data` is a key of its own).
LIMIT_NAMES = tuple(f.name for f in fields(Limits) if f.name != "include_tool_data")


@dataclass(frozen=True)
class Planning:
    """How a level plans: at most `max_tasks` tasks a plan, `max_replans` re-plans a turn,
    and whether the person approves each plan before it runs (`approve`).

    A level with planning off has none (None in its `LevelConfig`).
    """

    max_tasks: int = 20
    max_replans: int = 2
    approve: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Planning | None:
        """The orchestrator's own planning (None: ORCHESTRATOR_PLANNING=0)."""
        if not settings.planning:
            return None
        return cls(
            max_tasks=settings.max_plan_tasks,
            max_replans=settings.max_replans,
            approve=settings.approve_plans,
        )

    @classmethod
    def below(
        cls, parent: Planning | None, settings: Settings, *, on: bool | None, approve: bool | None
    ) -> Planning | None:
        """The planning of a folder's level below one with `parent`'s.

        On unless the folder says `planning: false` (ORCHESTRATOR_PLANNING is the
        top's alone); plans are approved when the folder says `approve_plans:
        true`, or, unless it says false, when its parent's are.
        """
        if on is False:
            return None
        inherited = parent.approve if parent is not None else settings.approve_plans
        return cls(
            max_tasks=settings.max_plan_tasks,
            max_replans=settings.max_replans,
            approve=inherited if approve is None else approve,
        )


@dataclass(frozen=True)
class Closure:
    """A level's judged closure: before its agent's answer closes the request, a model
    judges whether it was fulfilled; if not, at most `max_rounds` more rounds."""

    max_rounds: int = 1

    @classmethod
    def from_settings(cls, settings: Settings) -> Closure | None:
        """The orchestrator's own (None: ORCHESTRATOR_CLOSURE_JUDGE unset)."""
        return cls(settings.closure_max_rounds) if settings.closure_judge else None


@dataclass(frozen=True)
class LevelConfig:
    """What one level of the tree runs with; a child starts from its parent's.

    `system_prompt` is the prompt of the agent whose level this is (the
    orchestrator's, or an agent folder's formatted instructions); `path` the
    agent names from the top (`()` for the orchestrator).
    """

    model: BaseChatModel
    limits: Limits
    database: LevelDatabase | None = None
    log_level: str | None = None
    system_prompt: str | None = None
    path: tuple[str, ...] = ()
    context_tokens: int | None = None  # the model's window when its profile has none
    max_output_tokens: int | None = None  # the most tokens a reply may have; None: the model's own
    planning: Planning | None = None  # None: its agent does not plan
    closure: Closure | None = None  # None: its agent's answer closes the request unjudged
    # Answers the rounds whose last message is a tool result; None: `model` does.
    tool_result_model: BaseChatModel | None = None
    operator: bool = False  # its agent lists and answers the user's pending authorization requests
