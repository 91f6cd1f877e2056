"""Web search through a SearXNG server's JSON API (or Brave, Tavily, Serper: see
`search_providers`), and web pages read as Markdown."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

import httpx
from pydantic import AliasChoices, BaseModel, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from orchestrator.tools import NotAI, Tool, ToolError, ToolRequest, ToolResult, ToolSettings, action
from orchestrator.tools.web_fetch import unreachable, web_client

from .pages import fetch
from .search_providers import HOSTED, Provider, Query, hosted_search

NO_SERVER = "{tool} is not configured: searxng_url is not set ({how})"
CUT_NOTE = "\n\n[cut: the page goes on past {limit} characters]"


class WebSettings(ToolSettings):
    """`config:` of tool_config.yaml, overridden by the folder's .env and the environment."""

    model_config = SettingsConfigDict(env_prefix="WEB_SEARCH_AGENT_")

    provider: Provider = "searxng"
    searxng_url: str | None = Field(  # needed by search only
        default=None,
        validation_alias=AliasChoices("SEARXNG_URL", "WEB_SEARCH_AGENT_SEARXNG_URL", "searxng_url"),
    )
    # The hosted providers' keys, by their own variables: aliases, so config: cannot set them.
    brave_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("BRAVE_API_KEY", "WEB_SEARCH_AGENT_BRAVE_API_KEY")
    )
    tavily_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("TAVILY_API_KEY", "WEB_SEARCH_AGENT_TAVILY_API_KEY")
    )
    serper_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("SERPER_API_KEY", "WEB_SEARCH_AGENT_SERPER_API_KEY")
    )
    provider_url: str | None = None  # a hosted provider's endpoint instead of its own (a proxy)
    language: str | None = None
    timeout_seconds: float = Field(default=20, gt=0)
    max_page_bytes: int = Field(default=2_000_000, ge=1024)
    max_page_chars: int = Field(default=20_000, ge=200)
    max_redirects: int = Field(default=5, ge=0, le=20)
    allow_private_addresses: bool = False
    user_agent: str = "orchestrator-web-search-agent/1.0"


class Search(BaseModel):
    query: str = Field(min_length=1, max_length=500, description="What to search the web for.")
    max_results: int = Field(default=5, ge=1, le=20, description="How many results, at most.")
    language: str | None = Field(
        default=None, description="Language of the results, e.g. en or de (optional)."
    )
    safesearch: Annotated[Literal[0, 1, 2], NotAI] = Field(
        default=1, description="0 off, 1 moderate, 2 strict (fixed by the deployment)."
    )


class FetchPage(BaseModel):
    url: str = Field(min_length=8, max_length=2000, description="The page's http(s) address.")


class WebSearchAgent(Tool):
    """Searches the web and reads pages."""

    @action(Search)
    async def search(self, params: Search, request: ToolRequest) -> ToolResult:
        """Search the web; each result has a title, a snippet, its url and its position."""
        settings = self.settings(WebSettings)
        language = params.language or settings.language
        if settings.provider == "searxng":
            found = await self._searxng(settings, params, language)
        else:
            query = Query(params.query, params.max_results, language, params.safesearch)
            async with _client(settings) as client:
                found = await hosted_search(
                    client, settings.provider, key=self._key(settings), query=query,
                    url=settings.provider_url,
                )
        results = [
            {**item, "position": position}
            for position, item in enumerate(found[: params.max_results], start=1)
        ]
        return request.result(
            _listing(params.query, results),
            data={
                "query": params.query,
                "provider": settings.provider,
                "results": results,
                "total_results": len(results),
                "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
            },
            metadata={"provider": settings.provider},
        )

    @action(FetchPage)
    async def fetch_page(self, params: FetchPage, request: ToolRequest) -> ToolResult:
        """Read a web page and return its text as Markdown (cut at the configured size)."""
        settings = self.settings(WebSettings)
        async with _client(settings) as client:
            page = await fetch(
                client,
                params.url,
                allow_private=settings.allow_private_addresses,
                max_bytes=settings.max_page_bytes,
                max_redirects=settings.max_redirects,
            )
        markdown, cut = page.markdown, page.cut_at_bytes
        if len(markdown) > settings.max_page_chars:
            markdown, cut = markdown[: settings.max_page_chars], True
        note = CUT_NOTE.format(limit=settings.max_page_chars) if cut else ""
        heading = f"# {page.title}\n\nSource: {page.url}\n\n" if page.title else f"Source: {page.url}\n\n"
        return request.result(
            heading + markdown + note,
            data={
                "url": page.url,
                "title": page.title,
                "markdown": markdown,
                "truncated": cut,
                "bytes_read": page.bytes_read,
            },
            metadata={"provider": "web"},
        )

    async def _searxng(
        self, settings: WebSettings, params: Search, language: str | None
    ) -> list[dict[str, str]]:
        query: dict[str, str | int] = {
            "q": params.query,
            "format": "json",
            "pageno": 1,
            "safesearch": params.safesearch,
        }
        if language:
            query["language"] = language
        answer = await self._search(settings, query)
        return [
            {
                "title": str(item.get("title") or item.get("url")),
                "snippet": str(item.get("content") or ""),
                "url": str(item["url"]),
            }
            for item in _listed(answer.get("results"))
            if isinstance(item, dict) and item.get("url")
        ]

    def _key(self, settings: WebSettings) -> SecretStr:
        """The hosted provider's key; `not_configured`, naming its variable, without one."""
        field = f"{settings.provider}_api_key"
        key = getattr(settings, field)
        if not isinstance(key, SecretStr):
            raise ToolError(
                f"{self.name} searches through {HOSTED[settings.provider].name}, which needs its "
                f"API key: {settings.how_to_set_these(field)}",
                code="not_configured",
                recoverable=False,
            )
        return key

    async def _search(self, settings: WebSettings, query: dict[str, str | int]) -> dict[str, object]:
        if not settings.searxng_url:
            how = settings.how_to_set_these("searxng_url")
            raise ToolError(NO_SERVER.format(tool=self.name, how=how), code="not_configured",
                            recoverable=False)
        endpoint = settings.searxng_url.rstrip("/") + "/search"
        async with _client(settings) as client:
            try:
                response = await client.get(endpoint, params=query)
            except httpx.HTTPError as error:
                raise unreachable(settings.searxng_url, error) from None
        _check_search(response, settings.searxng_url)
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise ToolError(
                f"{settings.searxng_url} did not answer with SearXNG's JSON "
                f"(content type {response.headers.get('content-type')!r}): is it a SearXNG server?",
                code="bad_response",
                recoverable=False,
            )
        return answer


def _client(settings: WebSettings) -> httpx.AsyncClient:
    return web_client(timeout_seconds=settings.timeout_seconds, user_agent=settings.user_agent,
                      accept="text/html, text/plain, */*;q=0.5")


def _check_search(response: httpx.Response, server: str) -> None:
    status = response.status_code
    if status in (401, 407):
        raise ToolError(
            f"{server} refused the credentials (HTTP {status})", code="bad_credentials",
            recoverable=False,
        )
    if status == 403:
        raise ToolError(
            f"{server} refused the search (HTTP 403): SearXNG answers so when its JSON format "
            "is off; add json to search.formats in its settings.yml",
            code="refused",
            recoverable=False,
        )
    if status == 404:
        raise ToolError(
            f"{server} has no /search (HTTP 404): is SEARXNG_URL the server's base URL?",
            code="not_found",
            recoverable=False,
        )
    if status == 429:
        raise ToolError(f"{server} asks to slow down (HTTP 429)", code="rate_limited")
    if status >= 400:
        raise ToolError(f"{server} answered HTTP {status}", code="server_error")


def _listed(value: object) -> list[object]:
    """A list the server sent, or none (a missing or odd `results`)."""
    return value if isinstance(value, list) else []


def _listing(query: str, results: list[dict[str, object]]) -> str:
    if not results:
        return f"No results for {query!r}."
    return "\n\n".join(
        f"{r['position']}. {r['title']}\n   {r['snippet']}\n   {r['url']}".replace("\n   \n", "\n")
        for r in results
    )
