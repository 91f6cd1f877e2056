"""What a model call cost: a price you set, else genai-prices' bundled table, else unknown.

genai-prices ships its price table inside the package: nothing is fetched from
the network (its updater is never started here). A model served from this
machine or the local network is free or priced by you, so the table is not
asked about it unless `ORCHESTRATOR_PRICE_PROVIDER` says which provider it
bills like (a local proxy in front of a hosted API, say). A model no price
is known for costs None: "price unknown", never a guess.
"""

from __future__ import annotations

import importlib
import ipaddress
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, TypedDict
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.usage.tokens import TokenCount

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel, LangSmithParams

logger = logging.getLogger(__name__)

PER_MILLION = 1_000_000
# LangChain's `ls_provider` names -> genai-prices' provider ids, where they differ.
PROVIDER_IDS = {
    "google_genai": "google",
    "google_vertexai": "google",
    "google_anthropic_vertex": "google",
    "mistralai": "mistral",
    "xai": "x-ai",
    "amazon_bedrock": "aws",
    "bedrock": "aws",
    "bedrock_converse": "aws",
    "azure_openai": "azure",
    "azure": "azure",
    "huggingface": "huggingface",
}
LOCAL_NAMES = ("localhost", "host.docker.internal")
# Models that run inside this process and cost nothing, whatever they read or write.
FREE_MODELS = frozenset({"orchestrator-offline"})


class ModelPrice(BaseModel):
    """Your price for a model, in US dollars per million tokens.

    Cached input tokens and cache writes cost as much as input unless said.
    """

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, allow_inf_nan=False)
    output: float = Field(ge=0, allow_inf_nan=False)
    cached_input: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    cache_write: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    def cost(self, tokens: TokenCount) -> float:
        """The price of `tokens`, in dollars."""
        cached = self.input if self.cached_input is None else self.cached_input
        write = self.input if self.cache_write is None else self.cache_write
        plain = max(tokens.input - tokens.cached_input - tokens.cache_write, 0)
        dollars = (
            plain * self.input
            + tokens.cached_input * cached
            + tokens.cache_write * write
            + tokens.output * self.output
        )
        return dollars / PER_MILLION


@dataclass(frozen=True)
class ModelIdentity:
    """Which model a level runs, as priced: its name, LangChain's provider, its server."""

    name: str
    provider: str | None = None
    base_url: str | None = None

    @classmethod
    def of(cls, model: BaseChatModel) -> ModelIdentity:
        """The identity of a LangChain chat model, from its LangSmith parameters and endpoint."""
        params: LangSmithParams
        try:
            # LangChain says a model's LangSmith parameters (its name, its provider) only here.
            params = model._get_ls_params()  # pyright: ignore[reportPrivateUsage]  # see above
        except Exception:  # a model that cannot say: named by its type
            params = {}
        name = str(
            params.get("ls_model_name")
            or getattr(model, "model_name", "")
            or model._llm_type  # pyright: ignore[reportPrivateUsage]  # LangChain's only type name
        )
        base_url = (
            getattr(model, "openai_api_base", None)
            or getattr(model, "anthropic_api_url", None)  # ChatAnthropic's, `base_url` its alias
            or getattr(model, "base_url", None)
        )
        provider = params.get("ls_provider")
        return cls(
            name=name, provider=str(provider) if provider else None, base_url=_text(base_url)
        )

    @property
    def local(self) -> bool:
        """Whether the model is served from this machine or the local network."""
        return self.base_url is not None and is_local_url(self.base_url)


class PriceTable:
    """Prices model calls: your prices first, then genai-prices' bundled table.

    `provider` names the genai-prices provider every hosted or local server
    bills like (`ORCHESTRATOR_PRICE_PROVIDER`); unset, it comes from the
    server's URL or the model's LangChain provider.
    """

    def __init__(
        self, custom: Mapping[str, ModelPrice] | None = None, *, provider: str | None = None
    ) -> None:
        self.custom = dict(custom or {})
        self.provider = provider

    def cost(
        self, identity: ModelIdentity, tokens: TokenCount, *, model: str | None = None
    ) -> float | None:
        """What `tokens` cost on `model` (the reply's name, else the identity's); None: unknown."""
        if self.free(identity):
            return 0.0
        names = [n for n in (model, identity.name) if n]
        for name in names:
            custom = self._custom(name)
            if custom is not None:
                return custom.cost(tokens)
        if identity.local and self.provider is None:
            return None
        for name in names:
            price = _table_price(tokens, name, **self._where(identity))
            if price is not None:
                return price
        return None

    def free(self, identity: ModelIdentity) -> bool:
        """Whether the model costs nothing (the built-in offline model), reported usage or not."""
        return identity.name in FREE_MODELS and identity.base_url is None

    def _custom(self, name: str) -> ModelPrice | None:
        bare = name.partition(":")[2] if ":" in name else name
        return self.custom.get(name) or self.custom.get(bare)

    def _where(self, identity: ModelIdentity) -> _Where:
        if self.provider is not None:
            return {"provider_id": self.provider}
        if identity.base_url is not None and not _is_openai(identity.base_url):
            return {"provider_api_url": identity.base_url}
        provider = identity.provider or "openai"
        return {"provider_id": PROVIDER_IDS.get(provider, provider)}


class _Where(TypedDict, total=False):
    """Which genai-prices provider prices a model: by its id, or by its server's URL."""

    provider_id: str
    provider_api_url: str


@cache
def warm() -> None:
    """Load the price table on a thread of its own, so that the first priced call does not wait."""
    threading.Thread(target=_genai_prices, name="prices", daemon=True).start()


@cache
def _genai_prices() -> bool:
    """Whether genai-prices imports (once: its table loads with it)."""
    try:
        importlib.import_module("genai_prices")  # its table loads with it
    except ImportError:  # pragma: no cover - a dependency; a broken install prices nothing
        logger.warning("genai-prices is not installed: model prices are unknown")
        return False
    return True


def _table_price(
    tokens: TokenCount,
    model: str,
    *,
    provider_id: str | None = None,
    provider_api_url: str | None = None,
) -> float | None:
    if not _genai_prices():
        return None
    import genai_prices

    usage = genai_prices.Usage(
        input_tokens=tokens.input,
        cache_read_tokens=tokens.cached_input,
        cache_write_tokens=tokens.cache_write,
        output_tokens=tokens.output,
    )
    try:
        if provider_api_url is not None:
            found = genai_prices.calc_price(usage, model, provider_api_url=provider_api_url)
        else:
            found = genai_prices.calc_price(usage, model, provider_id=provider_id)
    except LookupError:
        return None
    return float(found.total_price)


def is_local_url(url: str) -> bool:
    """Whether `url`'s host is this machine or a private network's."""
    host = (urlsplit(url if "//" in url else f"//{url}").hostname or "").lower()
    if host in LOCAL_NAMES or host.endswith((".local", ".localhost", ".internal")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def _is_openai(url: str) -> bool:
    return (urlsplit(url).hostname or "").lower() == "api.openai.com"


def _text(value: object) -> str | None:
    return None if value is None else str(value)
