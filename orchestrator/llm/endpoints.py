"""Which model a level runs and where it is served, from the settings and a folder's `llm`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.settings import OFFLINE_MODEL, env_name

if TYPE_CHECKING:
    from orchestrator.level_overrides import ModelOverride
    from orchestrator.settings import Settings


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
