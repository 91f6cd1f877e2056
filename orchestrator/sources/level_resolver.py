"""Each tool folder's level, resolved from its parent's: its own model and database built on demand.

Models and databases are built only when a folder asks for its own, importing
what builds them then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING

from orchestrator.errors import ConfigError, ToolLoadError
from orchestrator.levels import Closure, LevelConfig, Limits, Planning
from orchestrator.redact import remember
from orchestrator.settings import hide_passwords, password_of, required_env

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from orchestrator.folders.tool_config import ToolConfig
    from orchestrator.level_overrides import DatabaseOverride, ModelOverride
    from orchestrator.settings import Settings
    from orchestrator.store.engine import Database


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
            limits=_with_tool_data(parent.limits.overridden(config.limits), config.include_tool_data),
            database=self._database(config.db) if config.db.local else parent.database,
            log_level=config.log_level or parent.log_level,
            path=(*parent.path, config.name),
            context_tokens=config.llm.context_tokens or parent.context_tokens,
            max_output_tokens=config.llm.max_output_tokens or parent.max_output_tokens,
            planning=Planning.below(
                parent.planning, self.settings, on=config.planning, approve=config.approve_plans
            ),
            closure=Closure(config.closure.max_rounds) if config.closure and config.closure.judge else None,
            tool_result_model=(
                self._tool_result_model(config.llm, parent=parent)
                if agent
                else parent.tool_result_model
            ),
            operator=config.operator and agent,  # never inherited: each operator is named
        )

    async def close(self) -> None:
        """Close the databases folders asked for (a failure to close is not raised)."""
        databases, self._databases = list(self._databases.values()), {}
        for database in databases:
            try:
                await database.close()
            except Exception:  # on the way out: nothing to tell the person
                continue

    def _model(
        self, override: ModelOverride, *, parent: BaseChatModel, setting: str = "llm.model"
    ) -> BaseChatModel:
        if not override.local:
            return parent
        from orchestrator.llm.providers import build_agent_model

        return build_agent_model(override, parent=parent, settings=self.settings, setting=setting)

    def _tool_result_model(
        self, override: ModelOverride, *, parent: LevelConfig
    ) -> BaseChatModel | None:
        """The folder's `llm.tool_result_model`, served as an own `model` of that name would be;
        unset, its parent's, or none with an own model (that model answers every round)."""
        name = override.tool_result_model
        if name is None:
            return None if override.local else parent.tool_result_model
        served = override.model_copy(update={"inherit": "local", "model": name})
        return self._model(served, parent=parent.model, setting="llm.tool_result_model")

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


def _with_tool_data(limits: Limits, include: bool | None) -> Limits:
    """`limits`, with the folder's `include_tool_data` when it says one (else its parent's)."""
    return limits if include is None else replace(limits, include_tool_data=include)
