"""Hosted web search behind the same `search` action: Brave, Tavily and Serper, each as its
documentation shows its API, its results in the agent's one shape (title, snippet, url).

Each key is read from the provider's own variable (`BRAVE_API_KEY`, `TAVILY_API_KEY`,
`SERPER_API_KEY`), in the environment or a `.env`: never from tool_config.yaml, which is
shared with the folder. Failures are the agent's codes: a key refused `bad_credentials`,
a plan's credits spent `quota_exceeded`, its rate limit `rate_limited` (retryable).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import httpx
from pydantic import SecretStr

from orchestrator.tools import ToolError

Provider = Literal["searxng", "brave", "tavily", "serper"]
SAFESEARCH = {0: "off", 1: "moderate", 2: "strict"}  # Brave's words for SearXNG's levels


@dataclass(frozen=True)
class Hosted:
    """A hosted provider: its documented endpoint, its key's variable and the request it takes."""

    name: str
    url: str
    key_variable: str


HOSTED: Mapping[str, Hosted] = {
    "brave": Hosted("Brave Search", "https://api.search.brave.com/res/v1/web/search", "BRAVE_API_KEY"),
    "tavily": Hosted("Tavily", "https://api.tavily.com/search", "TAVILY_API_KEY"),
    "serper": Hosted("Serper", "https://google.serper.dev/search", "SERPER_API_KEY"),
}


@dataclass(frozen=True)
class Query:
    """One search as the action was asked it."""

    text: str
    count: int
    language: str | None
    safesearch: int


async def hosted_search(
    client: httpx.AsyncClient,
    provider: str,
    *,
    key: SecretStr,
    query: Query,
    url: str | None = None,
) -> list[dict[str, str]]:
    """The results of `query` from a hosted `provider` (title, snippet, url each), best first."""
    hosted = HOSTED[provider]
    endpoint = url or hosted.url
    secret = key.get_secret_value()
    try:
        if provider == "brave":
            headers = {"Accept": "application/json", "X-Subscription-Token": secret}
            response = await client.get(endpoint, params=_brave(query), headers=headers)
        elif provider == "tavily":
            body: dict[str, str | int] = {
                "query": query.text, "max_results": query.count, "search_depth": "basic",
            }
            response = await client.post(
                endpoint, json=body, headers={"Authorization": f"Bearer {secret}"}
            )
        else:
            body = {"q": query.text, "num": query.count}
            if query.language:
                body["hl"] = query.language
            response = await client.post(endpoint, json=body, headers={"X-API-KEY": secret})
    except httpx.TimeoutException:
        raise ToolError(f"{hosted.name} did not answer in time", code="timeout") from None
    except httpx.HTTPError as error:
        raise ToolError(
            f"Could not reach {hosted.name} at {endpoint}: {error or type(error).__name__}",
            code="server_unreachable",
        ) from None
    _check(response, hosted)
    return _results(provider, response.json())


def _brave(query: Query) -> dict[str, str | int]:
    params: dict[str, str | int] = {
        "q": query.text, "count": query.count, "safesearch": SAFESEARCH[query.safesearch],
    }
    if query.language:
        params["search_lang"] = query.language
    return params


# Where each provider's answer holds its title, snippet and url.
FIELDS = {"brave": ("title", "description", "url"), "tavily": ("title", "content", "url"),
          "serper": ("title", "snippet", "link")}


def _results(provider: str, answer: object) -> list[dict[str, str]]:
    """Each provider's list, in the agent's shape; what is not a result with a url is left out."""
    title, snippet, url = FIELDS[provider]
    return [
        {"title": str(item.get(title) or item[url]), "snippet": str(item.get(snippet) or ""),
         "url": str(item[url])}
        for item in _items(provider, answer)
        if isinstance(item, dict) and item.get(url)
    ]


def _items(provider: str, answer: object) -> list[object]:
    if not isinstance(answer, dict):
        return []
    if provider == "brave":  # {"web": {"results": [...]}}
        web = answer.get("web")
        found = web.get("results") if isinstance(web, dict) else None
    else:  # Tavily's {"results": [...]}, Serper's {"organic": [...]}
        found = answer.get("results" if provider == "tavily" else "organic")
    return found if isinstance(found, list) else []


def _check(response: httpx.Response, hosted: Hosted) -> None:
    status = response.status_code
    if response.is_success:
        return
    said = _said(response)
    where = f"{hosted.name} answered HTTP {status}" + (f": {said}" if said else "")
    refused_key = status in (401, 403) or "SUBSCRIPTION_TOKEN_INVALID" in said
    if refused_key:
        raise ToolError(
            f"{where}. Check {hosted.key_variable}", code="bad_credentials", recoverable=False
        )
    if status in (402, 432, 433) or "credits" in said.lower() or "quota" in said.lower():
        raise ToolError(where, code="quota_exceeded", recoverable=False)
    if status == 429:
        raise ToolError(where, code="rate_limited")
    if status >= 500:
        raise ToolError(where, code="server_error")
    raise ToolError(where, code="refused", recoverable=False)


def _said(response: httpx.Response) -> str:
    """The provider's own words on a failure, from the shapes their APIs answer with."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if not isinstance(body, dict):
        return ""
    error = body.get("error") or body.get("detail") or body.get("message")
    if isinstance(error, dict):
        parts = [error.get("code"), error.get("detail") or error.get("error") or error.get("message")]
        return ": ".join(str(p) for p in parts if p)
    return str(error or "")
