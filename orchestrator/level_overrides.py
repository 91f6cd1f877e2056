"""What a folder's `tool_config.yaml` may set for its level: its model, database and limits.

Each is its parent's unless the folder says otherwise (`inherit: local` with its
own values, or a limit of its own). Kept below `llm` and `levels`, which read
them, so that their type-only imports point down too (see `folders.tool_config`,
the whole file's validation).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.settings import MAX_OUTPUT_TOKENS, http_url_problem

MAX_TIMEOUT_SECONDS = 24 * 3600.0  # a call that may take longer belongs in a job queue
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


Inherit = Literal["inherit", "local"]
# What the parent's choice may be called: `inherit`, or `parent` (the older spelling).
INHERIT_WORDS = {"inherit": "inherit", "parent": "inherit", "local": "local"}


class _Override(BaseModel):
    """`inherit` (the parent's, the default) or `{inherit: local, ...}` (this folder's own)."""

    model_config = ConfigDict(extra="forbid")

    inherit: Inherit = "inherit"

    @model_validator(mode="before")
    @classmethod
    def _plain_word(cls, value: object) -> object:
        # `llm: inherit` as well as `llm: {inherit: inherit}`; `parent` is a synonym.
        if isinstance(value, str):
            value = {"inherit": value}
        if isinstance(value, dict) and isinstance(value.get("inherit"), str):
            word = value["inherit"]
            value = {**value, "inherit": INHERIT_WORDS.get(word, word)}
        return value

    @property
    def local(self) -> bool:
        """True when the folder sets its own value instead of its parent's."""
        return self.inherit == "local"

    def _only_when_local(self, *names: str) -> None:
        given = [name for name in names if getattr(self, name) is not None]
        if given and not self.local:
            raise ValueError(f"`{given[0]}` is used only with `inherit: local`")


class ModelOverride(_Override):
    """Which chat model an agent-type tool runs: its parent's, or one of its own."""

    model: str | None = Field(default=None, description="`provider:model`, as ORCHESTRATOR_MODEL.")
    base_url: str | None = None
    api_key_env: str | None = Field(
        default=None,
        pattern=ENV_NAME,
        description="Name of the environment variable holding the API key.",
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    streaming: bool | None = Field(
        default=None,
        description="false: whole replies, for servers that cannot stream tool calls "
        "(default: as ORCHESTRATOR_MODEL_STREAMING).",
    )
    context_tokens: int | None = Field(
        default=None,
        ge=1000,
        description="The model's input limit when its profile gives none (default: the "
        "parent's, ORCHESTRATOR_CONTEXT_TOKENS at the top); with `inherit` too.",
    )
    max_output_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_OUTPUT_TOKENS,
        description="The most tokens one reply of this level's model may have (default: the "
        "parent's, ORCHESTRATOR_MAX_OUTPUT_TOKENS at the top); with `inherit` too.",
    )

    tool_result_model: str | None = Field(
        default=None,
        min_length=1,
        description="`provider:model` for the rounds after tool results (a cheaper one), "
        "served as an own `model` would be; with `inherit` too (default: the parent's, "
        "ORCHESTRATOR_TOOL_RESULT_MODEL at the top; with an own model, that model).",
    )

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        if value is not None and (problem := http_url_problem(value)):
            raise ValueError(problem)
        return value.strip() if value is not None else None

    @model_validator(mode="after")
    def _local_names_a_model(self) -> ModelOverride:
        if self.local and not self.model:
            raise ValueError("`model` is required when inherit is local")
        self._only_when_local("model", "base_url", "api_key_env", "temperature", "streaming")
        return self


class DatabaseOverride(_Override):
    """Which database a folder's tools (and those below it) use: its parent's, or their own.

    The URL is given directly (`url`) or by the name of an environment variable
    holding it (`url_env`: keeps a password out of the file); `app_url_env` may
    name the application role's login, as `DATABASE_APP_URL` does.
    """

    url: str | None = Field(default=None, description="postgresql://USER:PASSWORD@HOST/DATABASE")
    url_env: str | None = Field(default=None, pattern=ENV_NAME)
    app_url_env: str | None = Field(default=None, pattern=ENV_NAME)

    @field_validator("url")
    @classmethod
    def _postgresql(cls, value: str | None) -> str | None:
        scheme = (value or "").partition("://")[0].partition("+")[0]
        if value is not None and scheme not in ("postgresql", "postgres"):
            raise ValueError("must be a postgresql:// URL")  # not echoed: it may hold a password
        return value

    @model_validator(mode="after")
    def _local_names_a_database(self) -> DatabaseOverride:
        if self.local and (self.url is None) == (self.url_env is None):
            raise ValueError("inherit: local needs one of `url` and `url_env`")
        self._only_when_local("url", "url_env", "app_url_env")
        return self


class LimitsOverride(BaseModel):
    """The limits a folder sets for its own level and those below; each unset one is inherited."""

    model_config = ConfigDict(extra="forbid")

    max_iterations: int | None = Field(default=None, ge=1, le=100)
    max_result_chars: int | None = Field(default=None, ge=200)
    timeout_seconds: float | None = Field(
        default=None, gt=0, le=MAX_TIMEOUT_SECONDS, allow_inf_nan=False
    )
    inline_budget_seconds: float | None = Field(
        default=None, ge=0, le=MAX_TIMEOUT_SECONDS, allow_inf_nan=False
    )
