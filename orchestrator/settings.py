"""Settings read from the environment and `.env` (see `.env.example` for each one)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.errors import ConfigError

ENV_PREFIX = "ORCHESTRATOR_"
OFFLINE_MODEL = "offline"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class Settings(BaseSettings):
    """Everything the orchestrator can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
    )

    model: str = Field(
        default="openai:gpt-4o-mini",
        description="`provider:model` for init_chat_model, or `offline`.",
    )
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL")
    )
    model_timeout_seconds: float = Field(default=60.0, gt=0)
    model_max_retries: int = Field(default=2, ge=0, le=10)
    data_dir: Path = Path("./data")
    sub_graphs_dir: Path = Path("./sub_graphs")
    max_tool_iterations: int = Field(default=5, ge=1, le=100)
    max_tool_result_chars: int = Field(default=4000, ge=200)
    tool_timeout_seconds: float = Field(
        default=60.0, gt=0, description="For tools whose tool_config.yaml sets none (built-ins)."
    )
    inline_budget_seconds: float = Field(
        default=20.0, ge=0, description="An inline call running longer moves to the background."
    )
    log_level: LogLevel = "WARNING"
    database_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_URL"),
        description="External PostgreSQL with pgvector; unset runs the embedded server.",
    )
    database_app_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DATABASE_APP_URL"),
        description="The application role's own login on the external server (recommended).",
    )
    embeddings: str = Field(
        default="auto",
        description="`auto` (local if installed), `local`, `none`, or `openai:<model>`.",
    )
    rag_match_count: int = Field(default=5, ge=0, le=50)
    rag_threshold: float = Field(default=0.5, ge=-1, le=1)
    rag_max_chars: int = Field(default=2000, ge=0)

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @property
    def provider(self) -> str:
        """The provider part of `model` (`openai` when the model names none)."""
        provider, sep, _ = self.model.partition(":")
        return provider if sep else "openai"

    @property
    def uses_offline_model(self) -> bool:
        """True when no real model is configured, so the built-in offline model runs."""
        if self.model == OFFLINE_MODEL:
            return True
        no_openai_endpoint = self.openai_api_key is None and self.openai_base_url is None
        return self.provider == "openai" and no_openai_endpoint


def env_name(field: str) -> str:
    """The environment variable that sets `field`."""
    info = Settings.model_fields[field]
    if isinstance(info.validation_alias, AliasChoices):
        return str(info.validation_alias.choices[0])
    return f"{ENV_PREFIX}{field.upper()}"


def load_settings(**overrides: object) -> Settings:
    """Read the settings, turning a bad value into one `ConfigError` line that names it."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "?"
        name = env_name(field) if field in Settings.model_fields else field
        raise ConfigError(
            f"Invalid setting {name}={error.get('input')!r}: {error['msg']}"
        ) from None
