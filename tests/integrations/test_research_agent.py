"""research_agent: an agent over web_search_agent and document_analysis_agent that cites its sources."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store import Storage
from orchestrator.testing import OpenAICompatibleServer, call_tools
from orchestrator.testing.openai_server import RawReply, RawToolCall
from tests.helpers import server_env
from tests.integrations.documents import write_pdf
from tests.integrations.web_server import Reply, SearxngSite, serving
from tests.tool_folders import copy_shipped

PAGE = "/pages/checkpoints.html"


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[SearxngSite]:
    with serving(SearxngSite()) as site:
        site.results = [{"title": "Checkpoints explained", "content": "How the state is saved.",
                         "url": site.page(PAGE)}]
        monkeypatch.setenv("SEARXNG_URL", site.url)
        monkeypatch.setenv("WEB_SEARCH_AGENT_ALLOW_PRIVATE_ADDRESSES", "true")  # the pages are local
        yield site


@pytest.mark.process  # copy_shipped asks git which files are shipped
async def test_the_answer_cites_the_page_it_fetched(scripted, site: SearxngSite, tmp_path: Path):
    settings = load_settings(sub_graphs_dir=copy_shipped(tmp_path), data_dir=tmp_path / "data")
    url = site.page(PAGE)
    cited = f"A checkpointer saves the graph's state after every step.\n\nSources: [Checkpoints explained]({url})"
    model = scripted(
        call_tools(("research_agent_ask", {"request": "How does LangGraph keep a graph's state?"})),
        call_tools(("web_search_agent_search", {"query": "langgraph state checkpoints"})),
        call_tools(("web_search_agent_fetch_page", {"url": url})),
        cited,
        f"LangGraph's checkpointer saves the state after every step ({url}).",
    )
    runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True)

    result = await runtime.session(user_id="ada").run("How does LangGraph keep a graph's state?")

    assert result.answer == f"LangGraph's checkpointer saves the state after every step ({url})."
    [research] = [a for a in runtime.sub_agents if a.folder.name == "research_agent"]
    assert {t.name for t in research.tool.tools} == {
        "web_search_agent_search", "web_search_agent_fetch_page", "document_analysis_agent_ingest",
        "document_analysis_agent_ask", "document_analysis_agent_list_documents",
        "document_analysis_agent_forget",
    }
    fetched = model.received[3][-1].text  # what the research agent's model read of the page
    assert "A **checkpointer** saves the graph's state after every step." in fetched
    handed_up = json.loads(model.received[4][-1].text)
    assert handed_up["message"] == cited, "the agent's answer, its sources cited, reaches the orchestrator"
    assert "cite every fact" in model.received[1][0].text, "the research agent is told to cite"
    assert [path for path, _ in site.requests] == ["/search", PAGE]


@pytest.mark.process  # copy_shipped asks git which files are shipped
async def test_a_pdf_found_on_the_web_is_read_and_cited_by_page(
    scripted, site: SearxngSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str
):
    monkeypatch.setenv("DOCUMENT_ANALYSIS_AGENT_ALLOW_PRIVATE_ADDRESSES", "true")  # the site is local
    pdf = write_pdf(tmp_path / "r.pdf", [["Contents"], ["Parts"], ["The zebra250 crate holds spare gears."]])
    site.pages["/files/inventory.pdf"] = Reply(200, pdf.read_bytes(), "application/pdf")
    url = site.page("/files/inventory.pdf")
    site.results = [{"title": "Inventory 2026", "content": "A PDF", "url": url}]
    settings = load_settings(sub_graphs_dir=copy_shipped(tmp_path), data_dir=tmp_path / "data",
                             database_url=database_url, embeddings="none")
    model = scripted(
        call_tools(("research_agent_ask", {"request": "What does crate zebra250 hold?"})),
        call_tools(("web_search_agent_search", {"query": "inventory zebra250"})),
        call_tools(("document_analysis_agent_ingest", {"path": url})),
        call_tools(("document_analysis_agent_ask", {"question": "zebra250", "max_passages": 1})),
        f"Spare gears [{url}, page 3].",
        "Spare gears.",
    )
    storage = await Storage.open(settings)
    runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True, storage=storage)
    try:
        await runtime.session(user_id="ada").run("What does crate zebra250 hold?")
    finally:
        await storage.close()

    read = model.received[3][-1].text
    assert f"Read {url}: 3 pages" in read
    found = json.loads(model.received[4][-1].text)
    assert found["data"]["citations"] == [f"{url}, page 3"]
    assert "The zebra250 crate holds spare gears." in found["message"]


def test_research_structured_and_in_words_through_orchestrator_run(cli, site: SearxngSite, tmp_path: Path):
    copy_shipped(tmp_path)
    for name in ("research_agent", "research_agent/src/sub_graphs/web_search_agent"):
        assert cli("tools", "approve", name, cwd=tmp_path).returncode == 0, name
    url = site.page(PAGE)
    research = [
        RawReply(tool_calls=[RawToolCall.of("web_search_agent_fetch_page", {"url": url})]),
        f"Each step's state is saved by a checkpointer. Sources: {url}",
    ]
    question = "How is a graph's state kept?"
    read = RawReply(tool_calls=[RawToolCall.of("research_agent_ask", {"request": question})])
    with OpenAICompatibleServer([*research, read, *research]) as server:
        env = {**server_env(server), "SEARXNG_URL": site.url,
               "WEB_SEARCH_AGENT_ALLOW_PRIVATE_ADDRESSES": "true"}
        structured = cli("run", "research_agent", "ask", "--json", json.dumps({"request": question}),
                         cwd=tmp_path, env_extra=env)
        words = cli("run", "research_agent", question, cwd=tmp_path, env_extra=env)

    assert structured.returncode == 0, structured.stderr
    envelope = json.loads(structured.stdout)
    assert envelope["success"] and envelope["message"].endswith(f"Sources: {url}")
    assert words.returncode == 0, words.stderr
    answer, *details = words.stdout.strip().splitlines()
    assert answer == f"Each step's state is saved by a checkpointer. Sources: {url}"
    assert details == ["tool_calls: web_search_agent_fetch_page"]
    assert [path for path, _ in site.requests] == [PAGE, PAGE]
    assert server.replies == type(server.replies)(), "every scripted reply was used"
