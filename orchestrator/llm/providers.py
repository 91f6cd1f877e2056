"""Builds the chat models the settings name."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypedDict, Unpack

from langchain_core.language_models import BaseChatModel

from orchestrator.errors import ConfigError
from orchestrator.install import install_extra, with_this_pip
from orchestrator.llm.endpoints import model_endpoint
from orchestrator.llm.offline import OfflineChatModel
from orchestrator.llm.openai_client import openai_client
from orchestrator.llm.response_ids import with_response_ids
from orchestrator.redact import remember
from orchestrator.settings import Settings, env_name, env_value
from orchestrator.usage.prices import warm as warm_prices

if TYPE_CHECKING:
    from orchestrator.level_overrides import ModelOverride

# Local OpenAI-compatible servers (Ollama, vLLM, LM Studio) accept any key, but the client needs one.
PLACEHOLDER_API_KEY = "not-needed"
NO_PROVIDER = (
    "{setting}={model!r} names no provider LangChain knows: write it as `openai:{model}` for an "
    "OpenAI-compatible server (or `anthropic:NAME`, `ollama:NAME`, ... for another provider)"
)
# The variables a provider's client reads its key and its server from (the first set wins):
# read here too, so that the home's `.env` sets them as it sets OPENAI_API_KEY.
PROVIDER_VARIABLES = {
    "anthropic": (("ANTHROPIC_API_KEY",), ("ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL")),
}
# Providers whose LangChain package is one of this package's extras: provider -> extra.
PROVIDER_EXTRAS = {"anthropic": "anthropic"}
NEEDS_EXTRA = "{setting}={model!r} needs the `{extra}` extra ({package}): {command}"
# The field each provider's chat model takes its replies' token limit in: OpenAI's,
# Anthropic's, Mistral's, Bedrock's `max_tokens`, Google's `max_output_tokens`,
# Ollama's `num_predict`, Hugging Face's `max_new_tokens`.
OUTPUT_CAP_FIELDS = ("max_tokens", "max_output_tokens", "num_predict", "max_new_tokens")
UNKNOWN_PROVIDER = (
    "{setting}={model!r}: `{provider}` is no provider LangChain knows: write `openai:NAME` for "
    "an OpenAI-compatible server (or `anthropic:NAME`, `ollama:NAME`, ... for another provider)"
)


class _ModelOptions(TypedDict, total=False):
    """What this module hands `init_chat_model` beside the model's name and limits."""

    base_url: str | None
    api_key: str | None
    temperature: float
    disable_streaming: bool


def build_chat_model(settings: Settings, *, setting: str | None = None) -> BaseChatModel:
    """The configured model, or the offline model when none is configured.

    `setting` names where the model's name came from in errors (default:
    ORCHESTRATOR_MODEL; ORCHESTRATOR_TOOL_RESULT_MODEL's model is built from
    the settings with its name as the model's).
    """
    if settings.uses_offline_model:
        return OfflineChatModel()
    options: _ModelOptions = {}
    if settings.provider == "openai":
        key = settings.openai_api_key
        options["api_key"] = key.get_secret_value() if key else PLACEHOLDER_API_KEY
        options["base_url"] = settings.openai_base_url
    elif settings.provider in PROVIDER_VARIABLES:
        options.update(_provider_variables(settings.provider))
    return _init(
        settings.model_name,
        settings=settings,
        setting=setting or env_name("model"),
        streaming=settings.model_streaming,
        **options,
    )


def _provider_variables(provider: str) -> _ModelOptions:
    """The key and server `provider`'s variables give, from the environment or `.env`."""
    keys, urls = PROVIDER_VARIABLES[provider]
    key = next(filter(None, map(env_value, keys)), None)
    url = next(filter(None, map(env_value, urls)), None)
    remember(key)  # hidden from errors shown later, as the settings' keys are
    options: _ModelOptions = {}
    if key:
        options["api_key"] = key
    if url:
        options["base_url"] = url
    return options


def deferred_chat_model(settings: Settings, *, setting: str | None = None) -> BaseChatModel:
    """The configured model, built at its first use (see `llm.deferred`); the offline model now."""
    if settings.uses_offline_model:
        return OfflineChatModel()
    from orchestrator.llm.deferred import DeferredChatModel

    return DeferredChatModel(build=lambda: build_chat_model(settings, setting=setting))


def build_agent_model(
    override: ModelOverride,
    *,
    parent: BaseChatModel,
    settings: Settings,
    setting: str = "llm.model",
) -> BaseChatModel:
    """An agent's model: its parent's, unless its `tool_config.yaml` says `inherit: local`.

    Its own OpenAI model with neither `base_url` nor `api_key_env` is served by
    the orchestrator's OpenAI endpoint, with its key; one with a `base_url` and
    no key gets a placeholder key (local servers take any). It streams as its
    `streaming` says, else as `ORCHESTRATOR_MODEL_STREAMING` does. `setting`
    names the model's key in errors (`llm.tool_result_model` for that one).
    """
    if not override.local or override.model is None:
        return parent
    endpoint = model_endpoint(override, settings)
    if endpoint.offline:
        return OfflineChatModel()
    options: _ModelOptions = {}
    if endpoint.base_url:
        options["base_url"] = endpoint.base_url
        options["api_key"] = PLACEHOLDER_API_KEY
    if endpoint.shared and settings.openai_api_key is not None:
        options["api_key"] = settings.openai_api_key.get_secret_value()
    elif endpoint.api_key_env and not endpoint.shared:
        options["api_key"] = env_value(endpoint.api_key_env)
        if not options["api_key"]:
            raise ConfigError(f"llm.api_key_env names {endpoint.api_key_env}, which is not set")
    if endpoint.temperature is not None:
        options["temperature"] = endpoint.temperature
    streaming = settings.model_streaming if endpoint.streaming is None else endpoint.streaming
    return _init(
        endpoint.model, settings=settings, setting=setting, streaming=streaming, **options
    )


def _init(
    model: str, *, settings: Settings, setting: str, streaming: bool, **options: Unpack[_ModelOptions]
) -> BaseChatModel:
    """`model` built by LangChain; `streaming` False: one whole reply per request.

    Streaming is turned off through `disable_streaming` (every chat model has
    it), so `astream` asks for the whole reply and yields it as one message.
    """
    from langchain.chat_models import init_chat_model  # a second of imports: real models only

    if not streaming:
        options["disable_streaming"] = True
    try:
        built = init_chat_model(
            model,
            timeout=settings.model_timeout_seconds,
            max_retries=settings.model_max_retries,
            **options,
        )
    except (ImportError, ValueError) as error:
        raise ConfigError(_unusable(model, setting=setting, error=error)) from None
    warm_prices()  # a real model's calls are priced: the table loads while the model answers
    return _streaming_usage(with_response_ids(built))


def _unusable(model: str, *, setting: str, error: ImportError | ValueError) -> str:
    """One line on why LangChain cannot build `model`, with what to do about it."""
    text = str(error).strip()
    provider = model.partition(":")[0]
    if isinstance(error, ImportError) and provider in PROVIDER_EXTRAS:
        extra = PROVIDER_EXTRAS[provider]
        package = f"langchain-{provider}"
        command = install_extra(extra)
        return NEEDS_EXTRA.format(
            setting=setting, model=model, extra=extra, package=package, command=command
        )
    if isinstance(error, ValueError) and "infer model provider" in text:
        provider, colon, _ = model.partition(":")
        # `nosuch:x` meant a provider; `qwen2.5:7b` is a model's name and tag (Ollama's way).
        if colon and re.fullmatch(r"[a-z_-]+", provider):
            return UNKNOWN_PROVIDER.format(setting=setting, model=model, provider=provider)
        return NO_PROVIDER.format(setting=setting, model=model)
    # LangChain's messages run to many lines (every provider it knows): keep the first.
    first = text.splitlines()[0] if text else type(error).__name__
    return f"{setting}={model!r}: {with_this_pip(first)}"


def _streaming_usage(model: BaseChatModel) -> BaseChatModel:
    """`model`, asking for token usage at the end of each stream when it is an OpenAI client.

    LangChain asks only the OpenAI API itself; OpenAI-compatible servers (vLLM,
    llama.cpp, Ollama, LiteLLM) report it too when asked, and every call is counted.
    """
    client = openai_client(model)
    if client is not None and client.stream_usage is None:
        client.stream_usage = True
    return model


def with_output_cap(model: BaseChatModel, tokens: int | None) -> BaseChatModel:
    """`model`, asking its provider for at most `tokens` tokens a reply (None: as it is).

    A copy: a level's cap never changes the model its parent shares with it. A
    model that takes no such limit (the offline model) is returned as it is;
    the reply is held to the cap as it streams in either way (`llm.reply`).
    """
    if tokens is None:
        return model
    field = next((name for name in OUTPUT_CAP_FIELDS if name in type(model).model_fields), None)
    return model if field is None else model.model_copy(update={field: tokens})


def reports_finish_reason(model: BaseChatModel) -> bool:
    """Whether every whole reply of `model` says why it ended (OpenAI's chat completions do).

    For such a model, a reply without a finish reason was cut off.
    """
    client = openai_client(model)
    # The Responses API reports a status instead.
    return client is not None and not client.use_responses_api
