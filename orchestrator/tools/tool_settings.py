"""Settings of a tool folder: its `config:`, overridden by the `.env` files and the environment."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Self

from pydantic import ValidationError
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from orchestrator.errors import ToolError, validation_problems
from orchestrator.settings import env_file

NOT_CONFIGURED = (
    "{tool} is not configured: {problems} (set it in its tool_config.yaml, "
    "or as {prefix}<FIELD> in the environment or {env_file})"
)
# The folder whose settings are being read: its own `.env` is read too (see `load`).
_FOLDER: ContextVar[Path | None] = ContextVar("tool_settings_folder", default=None)


class ToolSettings(BaseSettings):
    """Base of a tool's typed settings; subclass it with an `env_prefix`.

    Each field is read from, in order: the environment (`PREFIX_FIELD`), the
    folder's own `.env` (when `load` is given the folder), the orchestrator's
    `.env` (the same file its own settings come from), then the folder's
    `config:` in tool_config.yaml. Secrets belong in the environment or a `.env`.

        class SmtpSettings(ToolSettings):
            model_config = SettingsConfigDict(env_prefix="EMAIL_AGENT_")
            smtp_host: str = "localhost"

        smtp = SmtpSettings.load(self.config, tool=self.name)
    """

    model_config = SettingsConfigDict(extra="ignore", env_ignore_empty=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Read where the orchestrator's own settings come from, not the current directory;
        # the folder's own file after it, so that its values win.
        folder = _FOLDER.get()
        files = (env_file(),) if folder is None else (env_file(), folder / ".env")
        dotenv = DotEnvSettingsSource(settings_cls, env_file=files)
        return env_settings, dotenv, init_settings

    @classmethod
    def load(cls, config: Mapping[str, object], *, tool: str, folder: Path | None = None) -> Self:
        """The settings from `config`, the `.env` files and the environment.

        `folder` is the tool's folder, whose own `.env` is read (`Tool.settings` passes it).
        A ToolError says what is missing.
        """
        try:
            with _reading(folder):
                return cls(**{key: value for key, value in config.items() if value is not None})
        except ValidationError as error:
            raise ToolError(
                NOT_CONFIGURED.format(
                    tool=tool,
                    problems=validation_problems(error),
                    prefix=cls.model_config.get("env_prefix", ""),
                    env_file=env_file() if folder is None else f"{folder / '.env'} or {env_file()}",
                ),
                code="not_configured",
                recoverable=False,
            ) from None


@contextmanager
def _reading(folder: Path | None) -> Iterator[None]:
    token = _FOLDER.set(folder)
    try:
        yield
    finally:
        _FOLDER.reset(token)
