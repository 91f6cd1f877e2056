"""What each level of the agent tree runs with, resolved from its parent down.

The orchestrator's level comes from the settings; a tool folder's level is its
parent's, with what its `tool_config.yaml` sets locally (`llm`, `db`, `limits`,
`log_level`, `instructions`). `inherit` is the default for each, and each limit
is inherited on its own.

This module stays light (it is read by `tools show`, which builds nothing):
models and databases are built by `LevelResolver`, which imports what builds
them only when a folder asks for its own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Generic, TypeVar

from orchestrator.errors import ConfigError, ToolLoadError
from orchestrator.redact import remember
from orchestrator.settings import OFFLINE_MODEL, env_file, env_name, hide_passwords

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from orchestrator.settings import Settings
    from orchestrator.store.engine import Database
    from orchestrator.folders.tool_config import (
        DatabaseOverride,
        LimitsOverride,
        ModelOverride,
        ToolConfig,
    )

ORCHESTRATOR = "orchestrator"  # who set what the settings give, for people
T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """The four limits of a level: tool rounds per turn, result size, call timeout, inline budget."""

    max_iterations: int
    max_result_chars: int
    timeout_seconds: float
    inline_budget_seconds: float | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The orchestrator's own limits."""
        return cls(
            max_iterations=settings.max_tool_iterations,
            max_result_chars=settings.max_tool_result_chars,
            timeout_seconds=settings.tool_timeout_seconds,
            inline_budget_seconds=settings.inline_budget_seconds,
        )

    def overridden(self, local: LimitsOverride) -> Limits:
        """These limits, with each one `local` sets replaced (the others inherited)."""
        return replace(self, **local.model_dump(exclude_none=True))


LIMIT_NAMES = tuple(f.name for f in fields(Limits))


@dataclass(frozen=True)
class LevelConfig:
    """What one level of the tree runs with; a child starts from its parent's.

    `system_prompt` is the prompt of the agent whose level this is (the
    orchestrator's, or an agent folder's formatted instructions); `path` the
    agent names from the top (`()` for the orchestrator).
    """

    model: BaseChatModel
    limits: Limits
    database: Database | None = None
    log_level: str | None = None
    system_prompt: str | None = None
    path: tuple[str, ...] = ()


class LevelResolver:
    """Resolves each tool folder's level from its parent's, building what a folder sets locally.

    A folder's own model is built only for an agent (only agents run one). Its
    own database is opened once per URL and migrated (the product's schema, so
    tools like `task_agent` find their tables) before any tool can use it;
    `close` releases every database it opened.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._databases: dict[tuple[str, str | None], Database] = {}

    def child(self, parent: LevelConfig, config: ToolConfig, *, agent: bool) -> LevelConfig:
        """The level of the folder `config` below `parent` (`agent`: it runs a model).

        A value that cannot be used raises ToolLoadError or ConfigError: the
        folder is skipped, the rest loads.
        """
        return LevelConfig(
            model=self._model(config.llm, parent=parent.model) if agent else parent.model,
            limits=parent.limits.overridden(config.limits),
            database=self._database(config.db) if config.db.local else parent.database,
            log_level=config.log_level or parent.log_level,
            path=(*parent.path, config.name),
        )

    async def close(self) -> None:
        """Close the databases folders asked for (a failure to close is not raised)."""
        databases, self._databases = list(self._databases.values()), {}
        for database in databases:
            try:
                await database.close()
            except Exception:  # on the way out: nothing to tell the person
                continue

    def _model(self, override: ModelOverride, *, parent: BaseChatModel) -> BaseChatModel:
        if not override.local:
            return parent
        from orchestrator.llm.providers import build_agent_model

        return build_agent_model(override, parent=parent, settings=self.settings)

    def _database(self, override: DatabaseOverride) -> Database:
        url = override.url or required_env(str(override.url_env), setting="db.url_env")
        app_name = override.app_url_env
        app_url = required_env(app_name, setting="db.app_url_env") if app_name else None
        key = (url, app_url)
        if key not in self._databases:
            self._databases[key] = open_local_database(url, app_url=app_url)
        return self._databases[key]


def open_local_database(url: str, *, app_url: str | None = None) -> Database:
    """A folder's own database, with the product's migrations applied (else ToolLoadError).

    Migrated now, on a thread of its own with its own event loop and
    connections: the caller may be synchronous or inside a running loop, and
    the returned Database has touched no loop yet.
    """
    from orchestrator.store.engine import Database
    from orchestrator.store.migrations import upgrade

    remember(*(password_of(u) for u in (url, app_url)))  # errors shown later hide them
    try:
        database = Database(url, app_url=app_url)
    except ConfigError:  # its message names DATABASE_URL, which is not what the person set
        raise ToolLoadError("db: not a postgresql:// database URL") from None

    async def migrate() -> None:
        migrating = Database(url, app_url=app_url)
        try:
            await upgrade(migrating)
        finally:
            await migrating.close()

    try:
        _run_apart(migrate())
    except Exception as error:
        detail = hide_passwords(_first_line(error), url, *([app_url] if app_url else []))
        where = database.where
        raise ToolLoadError(f"db: cannot prepare the database at {where}: {detail}") from None
    return database


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _run_apart(work: Coroutine[object, object, None]) -> None:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="level-database") as pool:
        pool.submit(asyncio.run, work).result()


def required_env(name: str, *, setting: str) -> str:
    """The value of the variable `name` (see `env_value`); ToolLoadError when it is not set."""
    value = env_value(name)
    if not value:
        raise ToolLoadError(f"{setting} names {name}, which is not set")
    return value


def env_value(name: str) -> str | None:
    """A variable from the environment, else from the home's `.env` (as the settings read them)."""
    value = os.environ.get(name)
    if value:
        return value
    from dotenv import dotenv_values

    path = env_file()
    return dotenv_values(path).get(name) if path.is_file() else None


def password_of(url: str | None) -> str | None:
    """The password in a database URL, if any (to keep it out of messages)."""
    if not url:
        return None
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).password
    except Exception:  # not a URL: then it has no password to hide either
        return None


# --- what a level is configured to be, without building anything -------------------------


@dataclass(frozen=True)
class ModelEndpoint:
    """Which model a level runs and where it is served; the API key is named, never held.

    `api_key_env` is the variable holding the key, if one is used; `shared`:
    the orchestrator's OpenAI endpoint and key (a folder's own OpenAI model
    with neither `base_url` nor `api_key_env`). `streaming` None: as the
    settings say (`ORCHESTRATOR_MODEL_STREAMING`).
    """

    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    shared: bool = False
    streaming: bool | None = None

    @property
    def offline(self) -> bool:
        return self.model == OFFLINE_MODEL


def model_endpoint(override: ModelOverride | None, settings: Settings) -> ModelEndpoint:
    """The model of a level whose `llm` is `override` (None, or inherited: the orchestrator's)."""
    openai_key = env_name("openai_api_key") if settings.openai_api_key is not None else None
    if override is None or not override.local or override.model is None:
        if settings.uses_offline_model or settings.provider != "openai":
            return ModelEndpoint(settings.model_name)
        return ModelEndpoint(settings.model_name, settings.openai_base_url, openai_key)
    if override.model == OFFLINE_MODEL:
        return ModelEndpoint(OFFLINE_MODEL)
    own = override.base_url or override.api_key_env or _provider(override.model) != "openai"
    if own or not settings.has_openai_endpoint:
        base_url, key, shared = override.base_url, override.api_key_env, False
    else:
        base_url, key, shared = settings.openai_base_url, openai_key, True
    return ModelEndpoint(
        override.model,
        base_url,
        key,
        temperature=override.temperature,
        shared=shared,
        streaming=override.streaming,
    )


def _provider(model: str) -> str:
    provider, sep, _ = model.partition(":")
    return provider if sep else "openai"


# --- for people: each value with the level that set it ------------------------------------


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


def describe_level(settings: Settings, chain: Sequence[ToolConfig]) -> LevelView:
    """The level of the last folder of `chain`, the folders from the top level down to it."""
    root = Limits.from_settings(settings)
    model: Sourced[ModelOverride | None] = Sourced(None, ORCHESTRATOR)
    database: Sourced[DatabaseOverride | None] = Sourced(None, ORCHESTRATOR)
    limits: dict[str, Sourced[float | int | None]] = {
        name: Sourced(getattr(root, name), ORCHESTRATOR) for name in LIMIT_NAMES
    }
    log_level: Sourced[str | None] = Sourced(settings.log_level, ORCHESTRATOR)
    for config in chain:
        if config.llm.local:
            model = Sourced(config.llm, config.name)
        if config.db.local:
            database = Sourced(config.db, config.name)
        for name, value in config.limits.model_dump(exclude_none=True).items():
            limits[name] = Sourced(value, config.name)
        if config.log_level is not None:
            log_level = Sourced(config.log_level, config.name)
    return LevelView(model=model, database=database, limits=limits, log_level=log_level)
