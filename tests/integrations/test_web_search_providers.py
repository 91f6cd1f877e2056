"""web_search_agent's `search` through Brave, Tavily and Serper (`WEB_SEARCH_AGENT_PROVIDER`),
against a local server speaking each one's documented API: the same results' shape as
SearXNG's, and each error code with whether it is marked retryable."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import JsonValue

from orchestrator.errors import ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import ToolRequest, ToolResult
from tests.integrations.folders import free_port
from tests.integrations.search_services import KEYS, SearchServices
from tests.tool_folders import SHIPPED

FOLDER = SHIPPED / "research_agent" / "src" / "sub_graphs" / "web_search_agent"
VARIABLES = {"brave": "BRAVE_API_KEY", "tavily": "TAVILY_API_KEY", "serper": "SERPER_API_KEY"}
PROVIDERS = list(VARIABLES)


@pytest.fixture
def services() -> Iterator[SearchServices]:
    with SearchServices() as running:
        yield running


def use(monkeypatch: pytest.MonkeyPatch, services: SearchServices, provider: str) -> None:
    monkeypatch.setenv("WEB_SEARCH_AGENT_PROVIDER", provider)
    monkeypatch.setenv("WEB_SEARCH_AGENT_PROVIDER_URL", services.url(provider))
    monkeypatch.setenv(VARIABLES[provider], KEYS[provider])
    monkeypatch.delenv("SEARXNG_URL", raising=False)


async def search(**parameters: JsonValue) -> ToolResult:
    agent = load_tool_folder(FOLDER)
    asked = {"query": "zebra"} | parameters
    return await agent.execute(ToolRequest(request_id="r1", action="search", parameters=asked))


async def failure(**parameters: JsonValue) -> ToolError:
    with pytest.raises(ToolError) as caught:
        await search(**parameters)
    return caught.value


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_each_provider_gives_the_agents_results(
    provider: str, services: SearchServices, monkeypatch: pytest.MonkeyPatch
):
    use(monkeypatch, services, provider)

    found = await search(max_results=2, language="en")

    assert found.data["provider"] == provider and found.metadata["provider"] == provider
    assert found.data["results"] == [
        {"title": "Zebra crossings", "snippet": "Where people cross the road.",
         "url": "https://example.com/zebra", "position": 1},
        {"title": "Zebras", "snippet": "Striped horses of Africa.",
         "url": "https://example.org/animals/zebra", "position": 2},
    ]
    assert found.message.startswith("1. Zebra crossings\n   Where people cross the road.")
    ((served, asked, _),) = services.requests
    query, count = {"brave": ("q", "count"), "tavily": ("query", "max_results"), "serper": ("q", "num")}[provider]
    assert served == provider and asked[query] == "zebra" and int(str(asked[count])) == 2


async def test_brave_is_given_the_fixed_safesearch_and_the_language(
    services: SearchServices, monkeypatch: pytest.MonkeyPatch
):
    use(monkeypatch, services, "brave")

    await search(language="de")

    ((_, asked, headers),) = services.requests
    assert asked["safesearch"] == "moderate" and asked["search_lang"] == "de"
    assert headers["accept"] == "application/json"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_no_key_is_not_configured_naming_the_providers_variable(
    provider: str, services: SearchServices, monkeypatch: pytest.MonkeyPatch
):
    use(monkeypatch, services, provider)
    monkeypatch.delenv(VARIABLES[provider])

    error = await failure()

    assert (error.code, error.recoverable) == ("not_configured", False)
    assert VARIABLES[provider] in str(error) and "tool_config.yaml" not in str(error)
    assert services.requests == []


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_wrong_key_is_bad_credentials(
    provider: str, services: SearchServices, monkeypatch: pytest.MonkeyPatch
):
    use(monkeypatch, services, provider)
    monkeypatch.setenv(VARIABLES[provider], "wrong")

    error = await failure()

    assert (error.code, error.recoverable) == ("bad_credentials", False)
    assert VARIABLES[provider] in str(error)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_rate_limit_and_the_providers_failure_are_retryable_and_spent_credits_are_not(
    provider: str, services: SearchServices, monkeypatch: pytest.MonkeyPatch
):
    use(monkeypatch, services, provider)
    services.next_status = 429

    limited = await failure()

    assert (limited.code, limited.recoverable) == ("rate_limited", True)
    services.next_status = 503
    broken = await failure()
    assert (broken.code, broken.recoverable) == ("server_error", True)
    services.out_of_credits = True
    spent = await failure()
    if provider != "brave":  # Brave's plans stop at the rate limit
        assert (spent.code, spent.recoverable) == ("quota_exceeded", False)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_provider_that_does_not_answer_is_unreachable_and_retryable(
    provider: str, services: SearchServices, monkeypatch: pytest.MonkeyPatch
):
    use(monkeypatch, services, provider)
    monkeypatch.setenv("WEB_SEARCH_AGENT_PROVIDER_URL", f"http://127.0.0.1:{free_port()}/search")

    error = await failure()

    assert (error.code, error.recoverable) == ("server_unreachable", True)
