"""`cache:` of a `tool_config.yaml`: how long an idempotent folder's results may be reused.

    cache:
      ttl_seconds: 300          # every action of the folder
      actions:                  # or some, each with its own time
        lookup: {ttl_seconds: 3600}

A folder-wide `ttl_seconds` covers every action not named under `actions`;
without it, only the actions named there are cached. Which folders may
declare a cache at all is `ToolConfig`'s rule (idempotent, nothing needing
approval); the dispatch stage that keeps the results is `dispatch.result_cache`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, model_validator

# A week: a longer-lived answer belongs in the folder's own storage, not in a cache.
MAX_TTL_SECONDS = 7 * 24 * 3600


class ActionCache(BaseModel):
    """One action's cache time."""

    model_config = ConfigDict(extra="forbid")

    ttl_seconds: int = Field(gt=0, le=MAX_TTL_SECONDS, description="How long a result is reused.")


class CacheConfig(BaseModel):
    """A folder's result cache: its time for every action, and per action."""

    model_config = ConfigDict(extra="forbid")

    ttl_seconds: int | None = Field(
        default=None,
        gt=0,
        le=MAX_TTL_SECONDS,
        description="How long a result of any of its actions is reused (per user, per arguments).",
    )
    actions: dict[str, ActionCache] = Field(
        default_factory=dict, description="Per action (by name): its own `ttl_seconds`."
    )

    @model_validator(mode="after")
    def _says_how_long(self) -> CacheConfig:
        if self.ttl_seconds is None and not self.actions:
            raise ValueError("cache: give `ttl_seconds`, or `actions` each with its `ttl_seconds`")
        return self


def ttl_of(cache: object, action: str | None) -> int | None:
    """Seconds a result of `action` may be reused, from a tool's `cache` metadata; None: never.

    `cache` is `CacheConfig`'s JSON form, as the tool's metadata carries it.
    """
    if not isinstance(cache, Mapping):
        return None
    actions = cache.get("actions")
    own = actions.get(action) if isinstance(actions, Mapping) and action is not None else None
    ttl = own.get("ttl_seconds") if isinstance(own, Mapping) else cache.get("ttl_seconds")
    return ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else None
