"""The orchestrator's own level from a URL (`ORCHESTRATOR_REMOTE_CONFIG_URL`), over its settings.

The document there is a mapping of setting variables, as `.env` holds them
(`ORCHESTRATOR_MODEL: openai:gpt-4o`), fetched, cached and falling back as a
folder's remote configuration does (see `folders.remote_config`). No approval
covers the orchestrator's own level, so a remote copy may set only how it thinks
(`REMOTE_SETTINGS`): never where its keys go, what its tools may touch, what it
may spend or where its data is; a document naming another setting is not used.
"""

from __future__ import annotations

from pydantic import JsonValue, ValidationError

from orchestrator.errors import ConfigError, RemoteConfigError, ToolConfigError
from orchestrator.folders.remote_config import RemoteConfigs, RemoteState
from orchestrator.folders.remote_fetch import HTTPS_ONLY, RemoteConfigRef
from orchestrator.folders.tool_config import read_config_mapping
from orchestrator.settings import Settings, env_name, load_settings

ROOT_KEY = "."  # the orchestrator's own level among the cached copies: no folder's key
NAME = "orchestrator"
REMOTE_SETTINGS = (
    "model",
    "max_output_tokens",
    "model_streaming",
    "max_tool_iterations",
    "max_tool_result_chars",
    "include_tool_data",
    "context_tokens",
    "summary_model",
    "closure_judge",
    "closure_max_rounds",
    "system_prompt",
    "tool_result_model",
    "tool_timeout_seconds",
    "inline_budget_seconds",
    "log_level",
    "planning",
    "max_plan_tasks",
    "max_replans",
    "max_follow_ups",
)


def with_remote(
    settings: Settings, overrides: dict[str, object]
) -> tuple[Settings, RemoteState | None]:
    """`settings` with its remote copy over them (the command's `overrides` over all), and whence.

    A URL that is not HTTPS (but to this machine) is a `ConfigError`.
    """
    if settings.remote_config_url is None:
        return settings, None
    try:
        ref = RemoteConfigRef(
            url=settings.remote_config_url, refresh_seconds=settings.remote_config_refresh_seconds
        )
    except ValidationError:
        name = env_name("remote_config_url")
        raise ConfigError(
            f"Invalid setting {name}={settings.remote_config_url!r}: {HTTPS_ONLY}"
        ) from None

    def parse(body: bytes) -> tuple[Settings, dict[str, JsonValue]]:
        try:
            return load_settings(**{**_fields(body), **overrides}), {}
        except ConfigError as error:
            raise RemoteConfigError(str(error)) from None

    return RemoteConfigs.of(settings).resolve_with(ROOT_KEY, ref, parse, settings)


def _fields(body: bytes) -> dict[str, object]:
    """The document's variables as the settings' fields, or why it cannot be used."""
    try:
        document = read_config_mapping(body, source="the document")
    except ToolConfigError as error:
        raise RemoteConfigError(str(error)) from None
    allowed = {env_name(field): field for field in REMOTE_SETTINGS}
    for name in document:
        if name.upper() not in allowed:
            raise RemoteConfigError(
                f"the document sets {name}, which only your own settings may set"
            )
    return {allowed[name.upper()]: value for name, value in document.items()}
