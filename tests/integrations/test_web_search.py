"""web_search_agent against a local server speaking SearXNG's JSON API and serving pages (issue 33)."""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator

import pytest

from orchestrator.errors import ToolError
from orchestrator.testing import load_tool_folder
from orchestrator.tools import Tool, ToolRequest
from tests.integrations.web_server import Reply, SearxngSite, serving
from tests.tool_folders import SHIPPED, copy_shipped

WEB = SHIPPED / "research_agent" / "src" / "sub_graphs" / "web_search_agent"
WEB_KEY = "research_agent/web_search_agent"


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[SearxngSite]:
    with serving(SearxngSite()) as site:
        site.results = [
            {"title": "Checkpoints explained", "content": "How the state is saved.",
             "url": site.page("/pages/checkpoints.html"), "engine": "duckduckgo"},
            {"title": "Persistence", "content": "LangGraph's persistence layer.",
             "url": "https://langchain-ai.github.io/langgraph/concepts/persistence/"},
            {"title": "no url, left out"},
        ]
        monkeypatch.setenv("SEARXNG_URL", site.url)
        yield site


@pytest.fixture
def local_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's pages are on 127.0.0.1: allowed here, as a deployment's config may allow them."""
    monkeypatch.setenv("WEB_SEARCH_AGENT_ALLOW_PRIVATE_ADDRESSES", "true")


def request(action: str, **parameters: object) -> ToolRequest:
    return ToolRequest(request_id="r1", action=action, parameters=parameters, user_id="ada")


def web() -> Tool:
    return load_tool_folder(WEB)


async def test_search_gives_title_snippet_url_and_position(site: SearxngSite):
    result = await web().execute(request("search", query="langgraph checkpoints", max_results=5))

    assert result.status == "success"
    data = result.data
    assert data["provider"] == "searxng" and data["total_results"] == 2
    assert data["results"] == [
        {"title": "Checkpoints explained", "snippet": "How the state is saved.",
         "url": site.page("/pages/checkpoints.html"), "position": 1},
        {"title": "Persistence", "snippet": "LangGraph's persistence layer.",
         "url": "https://langchain-ai.github.io/langgraph/concepts/persistence/", "position": 2},
    ]
    assert result.message.startswith("1. Checkpoints explained\n   How the state is saved.\n")
    [(path, query)] = site.requests
    assert path == "/search"
    assert query == {"q": ["langgraph checkpoints"], "format": ["json"], "pageno": ["1"],
                     "safesearch": ["1"]}


async def test_search_keeps_to_max_results_and_passes_the_language(site: SearxngSite):
    result = await web().execute(request("search", query="x", max_results=1, language="de"))

    assert [r["position"] for r in result.data["results"]] == [1]
    assert site.requests[0][1]["language"] == ["de"]


async def test_fetch_page_is_markdown_without_scripts_or_styles(site: SearxngSite, local_pages):
    result = await web().execute(request("fetch_page", url=site.page("/pages/checkpoints.html")))

    page = result.data
    assert page["title"] == "LangGraph checkpoints explained" and page["truncated"] is False
    assert page["markdown"].startswith("# Checkpoints\n\nA **checkpointer** saves the graph's state")
    assert "- PostgreSQL\n- SQLite" in page["markdown"]
    assert f"[the other page]({site.page('/pages/other.html')})" in page["markdown"]
    assert "alert" not in page["markdown"] and "color: red" not in page["markdown"]
    assert result.message.startswith(
        f"# LangGraph checkpoints explained\n\nSource: {site.page('/pages/checkpoints.html')}\n\n"
    )


async def test_relative_links_and_images_are_resolved_against_the_page_and_its_base(
    site: SearxngSite, local_pages
):
    site.pages["/guide/intro.html"] = Reply(200, b"""<html><body>
        <a href="setup.html">Setup</a> <a href="../faq.html#install">FAQ</a>
        <a href="//cdn.example.org/x.js">CDN</a> <a href="#top">Top</a>
        <a href="https://example.org/abs">Absolute</a> <img src="img/logo.png" alt="logo">
        </body></html>""")
    site.pages["/guide/based.html"] = Reply(
        200, b'<html><head><base href="https://docs.example.org/v2/"></head><body>'
        b'<a href="api.html">API</a> <img src="/logo.png" alt="logo"></body></html>'
    )

    intro = (await web().execute(request("fetch_page", url=site.page("/guide/intro.html")))).data
    based = (await web().execute(request("fetch_page", url=site.page("/guide/based.html")))).data

    here = site.page("/guide/intro.html")
    assert intro["markdown"] == (
        f"[Setup]({site.page('/guide/setup.html')}) [FAQ]({site.page('/faq.html#install')})\n"
        f"[CDN](http://cdn.example.org/x.js) [Top]({here}#top)\n"
        f"[Absolute](https://example.org/abs) ![logo]({site.page('/guide/img/logo.png')})"
    )
    assert based["markdown"] == (
        "[API](https://docs.example.org/v2/api.html) ![logo](https://docs.example.org/logo.png)"
    )


async def test_fetch_page_is_bounded_in_bytes_read_and_in_characters(
    site: SearxngSite, local_pages, monkeypatch: pytest.MonkeyPatch
):
    site.pages["/big.html"] = Reply(200, b"<p>" + b"word " * 400_000 + b"</p>")  # 2 MB
    monkeypatch.setenv("WEB_SEARCH_AGENT_MAX_PAGE_BYTES", "10000")
    monkeypatch.setenv("WEB_SEARCH_AGENT_MAX_PAGE_CHARS", "500")

    result = await web().execute(request("fetch_page", url=site.page("/big.html")))

    assert result.data["bytes_read"] == 10000 and result.data["truncated"] is True
    assert len(result.data["markdown"]) == 500
    assert result.message.endswith("[cut: the page goes on past 500 characters]")


async def test_fetch_page_follows_redirects_checking_each_hop(site: SearxngSite, local_pages):
    site.pages["/moved"] = Reply(302, b"", headers={"Location": "/pages/checkpoints.html"})
    site.pages["/away"] = Reply(302, b"", headers={"Location": "file:///etc/passwd"})

    moved = await web().execute(request("fetch_page", url=site.page("/moved")))

    assert moved.data["url"] == site.page("/pages/checkpoints.html")
    with pytest.raises(ToolError, match="Only http and https pages"):
        await web().execute(request("fetch_page", url=site.page("/away")))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/", "http://localhost:9/", "http://[::1]:9/", "http://10.1.2.3/",
        "http://192.168.0.1/admin", "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/", "http://100.64.0.1/", "http://0.0.0.0/",
    ],
)
async def test_private_and_loopback_addresses_are_refused_unless_the_config_allows_them(url: str):
    with pytest.raises(ToolError, match="private or local address") as refused:
        await web().execute(request("fetch_page", url=url))
    assert refused.value.code == "refused" and not refused.value.recoverable


async def test_a_redirect_to_a_private_address_is_refused(site: SearxngSite, monkeypatch):
    # The first hop is allowed by name only: the check runs on every hop, so it is re-checked.
    site.pages["/inside"] = Reply(302, b"", headers={"Location": "http://10.0.0.1/"})
    monkeypatch.setenv("WEB_SEARCH_AGENT_ALLOW_PRIVATE_ADDRESSES", "false")
    with pytest.raises(ToolError, match="127.0.0.1 is a private or local address"):
        await web().execute(request("fetch_page", url=site.page("/inside")))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def test_failures_are_clear_tool_errors(site: SearxngSite, local_pages, monkeypatch):
    site.pages["/report.pdf"] = Reply(200, b"%PDF-1.4", "application/pdf")

    async def error_of(action: str, **parameters: object) -> ToolError:
        with pytest.raises(ToolError) as caught:
            await web().execute(request(action, **parameters))
        return caught.value

    missing = await error_of("fetch_page", url=site.page("/nowhere.html"))
    pdf = await error_of("fetch_page", url=site.page("/report.pdf"))
    site.search_reply = Reply(403, b"Forbidden")
    json_off = await error_of("search", query="x")
    site.search_reply = Reply(401, b"")
    credentials = await error_of("search", query="x")
    site.search_reply = Reply(200, b"<html>not json</html>")
    not_json = await error_of("search", query="x")
    monkeypatch.setenv("SEARXNG_URL", f"http://127.0.0.1:{free_port()}")
    down = await error_of("search", query="x")
    monkeypatch.delenv("SEARXNG_URL")
    unset = await error_of("search", query="x")

    assert (missing.code, pdf.code) == ("not_found", "unsupported_content")
    assert json_off.code == "refused" and "add json to search.formats" in str(json_off)
    assert credentials.code == "bad_credentials" and not credentials.recoverable
    assert not_json.code == "bad_response" and "is it a SearXNG server?" in str(not_json)
    assert down.code == "server_unreachable" and down.recoverable
    assert str(down).startswith("Could not reach http://127.0.0.1:")
    assert unset.code == "not_configured" and "searxng_url" in str(unset)


async def test_the_folders_own_env_file_feeds_its_settings(site: SearxngSite, monkeypatch, tmp_path):
    folder = tmp_path / "web_search_agent"
    shutil.copytree(WEB, folder)
    monkeypatch.delenv("SEARXNG_URL")
    (folder / ".env").write_text(f"SEARXNG_URL={site.url}\n")
    (tmp_path / ".env").write_text("SEARXNG_URL=http://127.0.0.1:9\n")  # the orchestrator's: outranked

    result = await load_tool_folder(folder).execute(request("search", query="from the folder's .env"))

    assert result.status == "success" and site.requests[0][1]["q"] == ["from the folder's .env"]


def test_search_structured_and_in_words_through_orchestrator_run(cli, site: SearxngSite, tmp_path):
    copy_shipped(tmp_path)
    for name in ("research_agent", "research_agent/src/sub_graphs/web_search_agent"):
        assert cli("tools", "approve", name, cwd=tmp_path).returncode == 0, name
    env = {"SEARXNG_URL": site.url}

    structured = cli("run", WEB_KEY, "search", "--json", '{"query": "checkpoints", "max_results": 1}',
                     cwd=tmp_path, env_extra=env)
    words = cli("run", WEB_KEY, "search", "langgraph checkpoints", cwd=tmp_path, env_extra=env)
    refused = cli("run", WEB_KEY, "fetch_page", "url: http://127.0.0.1:9/", cwd=tmp_path, env_extra=env)
    fixed = cli("run", WEB_KEY, "search", "--json", '{"query": "x", "safesearch": 0}', cwd=tmp_path,
                env_extra=env)

    assert structured.returncode == 0, structured.stderr
    envelope = json.loads(structured.stdout)
    assert envelope["success"] and envelope["metadata"]["provider"] == "searxng"
    assert [r["title"] for r in envelope["data"]["results"]] == ["Checkpoints explained"]
    assert words.returncode == 0, words.stderr
    assert words.stdout.startswith("1. Checkpoints explained")
    assert [q["q"] for path, q in site.requests] == [["checkpoints"], ["langgraph checkpoints"]]
    assert refused.returncode == 1 and "private or local address" in refused.stdout + refused.stderr
    assert fixed.returncode == 1 and "safesearch" in fixed.stdout + fixed.stderr


async def test_fetch_page_follows_at_most_max_redirects(site: SearxngSite, local_pages, monkeypatch):
    monkeypatch.setenv("WEB_SEARCH_AGENT_MAX_REDIRECTS", "2")
    site.pages["/loop"] = Reply(302, b"", headers={"Location": "/loop"})

    with pytest.raises(ToolError, match="more than 2 redirects") as looped:
        await web().execute(request("fetch_page", url=site.page("/loop")))

    assert looped.value.code == "too_many_redirects"
    assert [path for path, _ in site.requests].count("/loop") == 3, "the first request and 2 hops"
