"""Settings of a tool folder: its `config:`, overridden by the `.env` files and the environment."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path, PurePath
from typing import Self, get_args
from urllib.parse import urlsplit

from pydantic import AliasChoices, PrivateAttr, SecretStr, ValidationError
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from orchestrator.errors import ToolError, validation_problems
from orchestrator.redact import show_paths
from orchestrator.settings import env_file

NOT_CONFIGURED = "{tool} is not configured: {problems} ({how})"
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
    _folder: Path | None = PrivateAttr(default=None)  # the folder `load` read them for

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
        dotenv = DotEnvSettingsSource(settings_cls, env_file=_env_files(_FOLDER.get()))
        return env_settings, dotenv, init_settings

    @classmethod
    def load(cls, config: Mapping[str, object], *, tool: str, folder: Path | None = None) -> Self:
        """The settings from `config`, the `.env` files and the environment.

        `folder` is the tool's folder, whose own `.env` is read (`Tool.settings` passes it).
        A ToolError says what is missing.
        """
        show_paths(*_env_files(folder))  # named by the errors: the user's own files
        try:
            with _reading(folder):
                loaded = cls(**{key: value for key, value in config.items() if value is not None})
        except ValidationError as error:
            fields = [str(problem["loc"][0]) for problem in error.errors() if problem["loc"]]
            raise ToolError(
                NOT_CONFIGURED.format(
                    tool=tool,
                    problems=validation_problems(error),
                    how=cls.how_to_set(fields, folder=folder),
                ),
                code="not_configured",
                recoverable=False,
            ) from None
        loaded._folder = folder
        show_paths(*loaded.configured_paths())
        return loaded

    def how_to_set_these(self, *fields: str) -> str:
        """`how_to_set` for these settings' folder: for an error about an optional field."""
        return type(self).how_to_set(list(fields), folder=self._folder)

    @classmethod
    def how_to_set(cls, fields: list[str], *, folder: Path | None = None) -> str:
        """Where `fields` are set, naming each variable and file: `set A_B in the environment ...`.

        A secret's field is not offered tool_config.yaml (it is shared with the folder).
        """
        fields = list(dict.fromkeys(field for field in fields if field in cls.model_fields))
        variables = " and ".join(cls.variable(field) for field in fields) or "the variables"
        files = " or ".join(str(path) for path in reversed(_env_files(folder)))
        line = f"set {variables} in the environment or in {files}"
        plain = [field for field in fields if not _secret(cls.model_fields[field].annotation)]
        if plain:
            yaml = folder / "tool_config.yaml" if folder is not None else "its tool_config.yaml"
            line += f", or {' and '.join(plain)} under config: in {yaml}"
        return line

    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable of `field`: `SLACK_AGENT_TOKEN` (its first alias if it has some)."""
        alias = cls.model_fields[field].validation_alias
        if isinstance(alias, AliasChoices):
            alias = next((choice for choice in alias.choices if isinstance(choice, str)), None)
        if isinstance(alias, str):
            return alias.upper()
        return f"{cls.model_config.get('env_prefix', '')}{field}".upper()

    def configured_paths(self) -> list[str]:
        """The local paths these settings name: a path, or the file of a URL without a host
        (`sqlite:////data/app.db`)."""
        found: list[str] = []
        for name in type(self).model_fields:
            value = getattr(self, name)
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            if isinstance(value, PurePath):
                found.append(str(value))
            elif isinstance(text, str) and text.startswith(("/", "~/")):
                found.append(text)
            elif isinstance(text, str) and "://" in text:
                parts = urlsplit(text)
                if not parts.netloc and parts.path.startswith("/"):
                    found.append("/" + parts.path.lstrip("/"))
        return found


def _secret(annotation: object) -> bool:
    """A `SecretStr` field, optional or not (`SecretStr | None`)."""
    return annotation is SecretStr or SecretStr in get_args(annotation)


def _env_files(folder: Path | None) -> tuple[Path, ...]:
    """The `.env` files read, the one whose values win last."""
    return (env_file(),) if folder is None else (env_file(), folder / ".env")


@contextmanager
def _reading(folder: Path | None) -> Generator[None]:
    token = _FOLDER.set(folder)
    try:
        yield
    finally:
        _FOLDER.reset(token)
