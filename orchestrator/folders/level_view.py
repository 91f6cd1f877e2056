"""A folder's level as people see it: each value with the level that set it (`tools show`).

Builds nothing: it reads the settings and the folders' `tool_config.yaml`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from orchestrator.levels import LIMIT_NAMES, Limits

if TYPE_CHECKING:
    from orchestrator.folders.tool_config import ToolConfig
    from orchestrator.level_overrides import DatabaseOverride, ModelOverride
    from orchestrator.settings import Settings

ORCHESTRATOR = "orchestrator"  # who set what the settings give, for people
T = TypeVar("T")


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """A resolved value and who set it: a folder's name, or ORCHESTRATOR for the settings."""

    value: T
    origin: str


@dataclass(frozen=True)
class LevelView:
    """A folder's level as configured, each value with the level that set it.

    `model` and `database` are None where the orchestrator's own (from the
    settings) serve; `limits` are by `Limits` field name.
    """

    model: Sourced[ModelOverride | None]
    database: Sourced[DatabaseOverride | None]
    limits: dict[str, Sourced[float | int | None]]
    log_level: Sourced[str | None]
    # The window when the model's profile gives none (`llm: {context_tokens: N}`).
    context_tokens: Sourced[int] | None = None
    # The model of the rounds after tool results (`llm: {tool_result_model}`); None: the model.
    tool_result_model: Sourced[str | None] | None = None


def describe_level(settings: Settings, chain: Sequence[ToolConfig]) -> LevelView:
    """The level of the last folder of `chain`, the folders from the top level down to it."""
    root = Limits.from_settings(settings)
    model: Sourced[ModelOverride | None] = Sourced(None, ORCHESTRATOR)
    database: Sourced[DatabaseOverride | None] = Sourced(None, ORCHESTRATOR)
    limits: dict[str, Sourced[float | int | None]] = {
        name: Sourced(getattr(root, name), ORCHESTRATOR) for name in LIMIT_NAMES
    }
    log_level: Sourced[str | None] = Sourced(settings.log_level, ORCHESTRATOR)
    window = Sourced(settings.context_tokens, ORCHESTRATOR)
    after_tools: Sourced[str | None] = Sourced(settings.tool_result_model, ORCHESTRATOR)
    for config in chain:
        if config.llm.context_tokens is not None:
            window = Sourced(config.llm.context_tokens, config.name)
        if config.llm.tool_result_model is not None or config.llm.local:
            # An own model without one of its own answers every round itself.
            after_tools = Sourced(config.llm.tool_result_model, config.name)
        if config.llm.local:
            model = Sourced(config.llm, config.name)
        if config.db.local:
            database = Sourced(config.db, config.name)
        for name, value in config.limits.model_dump(exclude_none=True).items():
            limits[name] = Sourced(value, config.name)
        if config.log_level is not None:
            log_level = Sourced(config.log_level, config.name)
    return LevelView(
        model=model,
        database=database,
        limits=limits,
        log_level=log_level,
        context_tokens=window,
        tool_result_model=after_tools,
    )
