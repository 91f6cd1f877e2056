"""document_analysis_agent: PDF, DOCX, HTML and Markdown in the user's own table, cited by file and page."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from sqlalchemy import text

from orchestrator.errors import ToolError
from orchestrator.store import Database
from orchestrator.store.embeddings import Embedder
from orchestrator.testing import KeywordEmbeddings, load_tool_folder
from orchestrator.tools import Tool, ToolRequest
from tests.integrations.documents import (
    write_docx,
    write_docx_with_table,
    write_pdf,
    write_pptx,
    write_xlsx,
)
from tests.integrations.web_server import Reply, SearxngSite, serving
from tests.tool_folders import SHIPPED, copy_shipped

DOCS = SHIPPED / "research_agent" / "src" / "sub_graphs" / "document_analysis_agent"
DOCS_KEY = "research_agent/document_analysis_agent"
REPORT = [
    ["Annual report 2025", "Our company sold bicycles in six countries."],
    ["Finances", "Revenue grew by 12 percent to 40 million euros.", "Costs stayed flat."],
    ["Outlook", "The board expects steady growth and opens a shop in Oslo."],
]


def request(action: str, user: str = "ada", **parameters: object) -> ToolRequest:
    return ToolRequest(request_id="r1", action=action, parameters=parameters, user_id=user)


@pytest.fixture
def documents(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    monkeypatch.setenv("DOCUMENT_ANALYSIS_AGENT_DOCUMENTS_DIR", str(folder))
    return folder


def analysis(database: Database, *, embedder: Embedder | None = None) -> Tool:
    return load_tool_folder(DOCS, database=database, embedder=embedder)


async def test_an_ingested_pdf_answers_with_file_and_page(database: Database, documents: Path):
    write_pdf(documents / "report.pdf", REPORT)
    tool = analysis(database, embedder=Embedder(KeywordEmbeddings(), "keywords"))

    ingested = await tool.execute(request("ingest", path="report.pdf"))
    answer = await tool.execute(request("ask", question="How much did revenue grow?", max_passages=1))

    assert ingested.message == "Read report.pdf: 3 pages, 3 passages (embedded with keywords)."
    assert answer.data["citations"] == ["report.pdf, page 2"]
    [passage] = answer.data["passages"]
    assert passage["document"] == "report.pdf" and passage["page"] == 2
    assert "Revenue grew by 12 percent" in passage["text"]
    assert answer.message.startswith("From your documents:\n\n[report.pdf, page 2] Finances Revenue grew")
    assert answer.message.endswith("Sources: report.pdf, page 2")


async def test_never_another_users_document(database: Database, documents: Path):
    write_pdf(documents / "secret.pdf", [["Bob's salary is 90000 euros."]])
    tool = analysis(database, embedder=Embedder(KeywordEmbeddings(), "keywords"))
    await tool.execute(request("ingest", user="bob", path="secret.pdf"))

    with pytest.raises(ToolError, match="Nothing in your documents matches") as nothing:
        await tool.execute(request("ask", user="carol", question="What is Bob's salary?"))
    listed = await tool.execute(request("list_documents", user="carol"))
    with pytest.raises(ToolError, match="There is no document 'secret.pdf'"):
        await tool.execute(request("forget", user="carol", document="secret.pdf"))
    mine = await tool.execute(request("ask", user="bob", question="What is Bob's salary?"))

    assert nothing.value.code == "not_found"
    assert listed.message == "No documents yet." and listed.data == []
    assert mine.data["citations"] == ["secret.pdf, page 1"]
    # PostgreSQL itself keeps them apart: carol's transaction sees no row, whatever the query says.
    async with database.user_transaction("carol") as connection:
        seen = (await connection.execute(text("SELECT count(*) FROM document_chunks"))).scalar()
    assert seen == 0


async def test_docx_html_and_markdown_are_read_too(database: Database, documents: Path):
    write_docx(documents / "plan.docx", [["Plan", "Hire two mechanics."], ["Later", "Open in Bergen."]])
    (documents / "page.html").write_text(
        "<html><head><title>T</title><script>var hidden = 1</script></head>"
        "<body><h1>Repairs</h1><p>Repairs take <b>three days</b>.</p></body></html>"
    )
    (documents / "notes.md").write_text("# Notes\n\nThe warranty lasts five years.\n")
    tool = analysis(database)  # no embedder: PostgreSQL's full-text search

    for name in ("plan.docx", "page.html", "notes.md"):
        await tool.execute(request("ingest", user="dora", path=name))
    bergen = await tool.execute(request("ask", user="dora", question="Where do we open later?"))
    repairs = await tool.execute(request("ask", user="dora", question="how long do repairs take"))
    warranty = await tool.execute(request("ask", user="dora", question="warranty years"))
    listed = await tool.execute(request("list_documents", user="dora"))

    assert bergen.data["citations"][0] == "plan.docx, page 2"
    assert repairs.data["citations"] == ["page.html"]
    assert "# Repairs Repairs take **three days**." in repairs.data["passages"][0]["text"]
    assert "hidden" not in repairs.message
    assert warranty.data["citations"] == ["notes.md"]
    assert listed.message == "notes.md\npage.html\nplan.docx (2 pages)"


async def test_a_docx_table_is_read_in_its_place_between_the_paragraphs(database: Database, documents: Path):
    write_docx_with_table(
        documents / "stores.docx", "Our stores and their staff:",
        [["City", "Staff"], ["Oslo", "12"], ["Bergen", "7"]], "Both open at nine.",
    )
    tool = analysis(database)

    await tool.execute(request("ingest", user="gus", path="stores.docx"))
    answer = await tool.execute(request("ask", user="gus", question="Bergen staff"))

    assert answer.data["citations"] == ["stores.docx, page 1"]
    assert answer.data["passages"][0]["text"] == (
        "Our stores and their staff: | City | Staff | | Oslo | 12 | | Bergen | 7 | Both open at nine."
    )


async def test_xlsx_csv_and_pptx_are_read_with_sheets_and_slides_cited(
    database: Database, documents: Path
):
    write_xlsx(documents / "sales.xlsx", {
        "Summary": [["Year", "Total"], [2025, 52], ["Sum", "=SUM(B2:B2)"]],
        "Regions": [["Region", "Revenue"], ["Nordland", 31.5], ["Finnmark", None]],
    })
    (documents / "prices.csv").write_text("item;price\nhelmet;49,90\n\"tyre; tubeless\";35\n")
    write_pptx(
        documents / "deck.pptx",
        [("Welcome", "The plan for 2026", "say hello"),
         ("Expansion", "Two new shops", "mention the Tromsø lease")],
        table=[["Shop", "Opens"], ["Tromsø", "March"]],
    )
    tool = analysis(database)

    ingested = [await tool.execute(request("ingest", user="hal", path=name))
                for name in ("sales.xlsx", "prices.csv", "deck.pptx")]
    revenue = await tool.execute(request("ask", user="hal", question="Nordland revenue", max_passages=1))
    tyre = await tool.execute(request("ask", user="hal", question="tubeless tyre price", max_passages=1))
    lease = await tool.execute(request("ask", user="hal", question="Tromsø lease", max_passages=1))
    listed = await tool.execute(request("list_documents", user="hal"))

    assert [r.message for r in ingested] == [
        "Read sales.xlsx: 2 sheets, 2 passages (text search only (no embedder)).",
        "Read prices.csv: 1 passages (text search only (no embedder)).",
        "Read deck.pptx: 2 slides, 2 passages (text search only (no embedder)).",
    ]
    assert revenue.data["citations"] == ["sales.xlsx, sheet 2"]
    assert revenue.data["passages"][0]["text"] == (
        "## Regions | Region | Revenue | | Nordland | 31.5 | | Finnmark |"
    )
    summary = await tool.execute(request("ask", user="hal", question="summary sum", max_passages=1))
    assert summary.data["passages"][0]["text"] == "## Summary | Year | Total | | 2025 | 52 | | Sum |", (
        "a formula never saved by a spreadsheet program has no value to read, and is not its text"
    )
    assert tyre.data["citations"] == ["prices.csv"]
    assert tyre.data["passages"][0]["text"] == "| item | price | | helmet | 49,90 | | tyre; tubeless | 35 |"
    assert lease.data["citations"] == ["deck.pptx, slide 2"]
    assert lease.data["passages"][0]["text"] == (
        "# Expansion Two new shops | Shop | Opens | | Tromsø | March | Notes: mention the Tromsø lease"
    )
    assert listed.message == "deck.pptx (2 slides)\nprices.csv\nsales.xlsx (2 sheets)"


class SubwordBlind(KeywordEmbeddings):
    """Vectors blind to the digits in a word, as a subword model's are: `zebra250` is near
    every `zebraN`."""

    def embed_query(self, text: str) -> list[float]:
        return super().embed_query(re.sub(r"[0-9]+", "", text))


async def test_an_exact_token_on_page_251_of_300_is_found_beside_the_vectors(
    database: Database, documents: Path
):
    write_pdf(documents / "inventory.pdf",
              [[f"Inventory page {n}", f"Crate zebra{n - 1} holds spare parts."] for n in range(1, 301)])
    tool = analysis(database, embedder=Embedder(SubwordBlind(), "subwords"))
    await tool.execute(request("ingest", user="ivy", path="inventory.pdf"))

    found = await tool.execute(request("ask", user="ivy", question="zebra250", max_passages=1))
    asked = await tool.execute(request("ask", user="ivy", question="Which crate is zebra250?"))

    assert found.data["citations"] == ["inventory.pdf, page 251"]
    assert "Crate zebra250 holds spare parts." in found.data["passages"][0]["text"]
    assert "inventory.pdf, page 251" in asked.data["citations"], "among the passages cited"


async def test_a_pdf_on_the_web_is_read_and_cited_by_its_address(
    database: Database, documents: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    monkeypatch.setenv("DOCUMENT_ANALYSIS_AGENT_ALLOW_PRIVATE_ADDRESSES", "true")  # the site is local
    pdf = write_pdf(tmp_path / "report.pdf", REPORT).read_bytes()
    deck = write_pptx(tmp_path / "d.pptx", [("Plans", "A shop in Tromsø", "")], table=[["x"]]).read_bytes()
    tool = analysis(database)
    with serving(SearxngSite()) as site:
        site.pages["/files/report.pdf"] = Reply(200, pdf, "application/pdf")
        site.pages["/latest"] = Reply(302, b"", headers={"Location": "/files/report.pdf"})
        site.pages["/download/deck.pptx"] = Reply(200, deck, "application/octet-stream")
        site.pages["/logo.png"] = Reply(200, b"\x89PNG", "image/png")
        url = site.page("/files/report.pdf")

        ingested = await tool.execute(request("ingest", user="jo", path=site.page("/latest")))
        await tool.execute(request("ingest", user="jo", path=site.page("/download/deck.pptx")))
        with pytest.raises(ToolError) as image:
            await tool.execute(request("ingest", user="jo", path=site.page("/logo.png")))
        with pytest.raises(ToolError) as missing:
            await tool.execute(request("ingest", user="jo", path=site.page("/nowhere.pdf")))
        monkeypatch.setenv("DOCUMENT_ANALYSIS_AGENT_MAX_FILE_BYTES", str(len(pdf) - 1))
        with pytest.raises(ToolError) as large:
            await tool.execute(request("ingest", user="jo", path=url))
        monkeypatch.setenv("DOCUMENT_ANALYSIS_AGENT_ALLOW_PRIVATE_ADDRESSES", "false")
        with pytest.raises(ToolError) as private:
            await tool.execute(request("ingest", user="jo", path=url))
    revenue = await tool.execute(request("ask", user="jo", question="revenue grow", max_passages=1))
    shop = await tool.execute(request("ask", user="jo", question="Tromsø shop", max_passages=1))

    assert ingested.message == f"Read {url}: 3 pages, 3 passages (text search only (no embedder))."
    assert revenue.data["citations"] == [f"{url}, page 2"]
    assert shop.data["citations"] == [f"{site.url}/download/deck.pptx, slide 1"]
    assert image.value.code == "unsupported_content" and "image/png" in str(image.value)
    assert missing.value.code == "not_found"
    assert large.value.code == "too_large" and f"larger than {len(pdf) - 1:,} bytes" in str(large.value)
    assert private.value.code == "refused" and "private or local address" in str(private.value)
    assert [path for path, _ in site.requests].count("/files/report.pdf") == 2, "refused before it asked"


async def test_a_web_document_keeps_to_max_redirects_and_timeout_seconds(
    database: Database, documents: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("DOCUMENT_ANALYSIS_AGENT_ALLOW_PRIVATE_ADDRESSES", "true")  # the site is local
    monkeypatch.setenv("DOCUMENT_ANALYSIS_AGENT_MAX_REDIRECTS", "1")
    monkeypatch.setenv("DOCUMENT_ANALYSIS_AGENT_TIMEOUT_SECONDS", "0.2")
    tool = analysis(database)
    with serving(SearxngSite()) as site, socket.socket() as silent:
        site.pages["/a"] = Reply(302, b"", headers={"Location": "/b"})
        site.pages["/b"] = Reply(302, b"", headers={"Location": "/c.md"})
        site.pages["/c.md"] = Reply(200, b"# C", "text/markdown")
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # connections are made, never answered
        with pytest.raises(ToolError) as redirects:
            await tool.execute(request("ingest", user="kim", path=site.page("/a")))
        one_hop = await tool.execute(request("ingest", user="kim", path=site.page("/b")))
        with pytest.raises(ToolError) as timeout:
            await tool.execute(request("ingest", user="kim", path=f"http://127.0.0.1:{silent.getsockname()[1]}/x.pdf"))

    assert redirects.value.code == "too_many_redirects" and "more than 1 redirects" in str(redirects.value)
    assert one_hop.data["document"] == site.page("/c.md")
    assert timeout.value.code == "timeout" and timeout.value.recoverable


async def test_ingesting_again_replaces_the_document(database: Database, documents: Path):
    tool = analysis(database)
    write_pdf(documents / "memo.pdf", [["The meeting is on Monday."]])
    await tool.execute(request("ingest", user="erin", path="memo.pdf"))
    write_pdf(documents / "memo.pdf", [["Moved:", "the meeting is on Friday."]])
    await tool.execute(request("ingest", user="erin", path="memo.pdf"))

    answer = await tool.execute(request("ask", user="erin", question="meeting"))

    assert [p["text"] for p in answer.data["passages"]] == ["Moved: the meeting is on Friday."]


async def test_failures_are_clear_tool_errors(database: Database, documents: Path, tmp_path: Path):
    (tmp_path / "outside.md").write_text("not yours to read")
    (documents / "broken.pdf").write_bytes(b"%PDF-1.4 this is no PDF")
    (documents / "image.png").write_bytes(b"\x89PNG")
    (documents / "broken.xlsx").write_bytes(b"PK not a workbook")
    (documents / "broken.pptx").write_bytes(b"PK not a deck")
    tool = analysis(database)

    async def error_of(**parameters: object) -> ToolError:
        with pytest.raises(ToolError) as caught:
            await tool.execute(request("ingest", **parameters))
        return caught.value

    outside = await error_of(path="../outside.md")
    missing = await error_of(path="nowhere.pdf")
    broken = await error_of(path="broken.pdf")
    image = await error_of(path="image.png")
    sheet = await error_of(path="broken.xlsx")
    deck = await error_of(path="broken.pptx")
    with pytest.raises(ToolError, match="needs the database") as no_database:
        await load_tool_folder(DOCS).execute(request("list_documents"))

    assert outside.code == "refused" and "outside the documents folder" in str(outside)
    assert missing.code == "not_found"
    assert broken.code == "unreadable" and str(broken).startswith("broken.pdf cannot be read")
    assert image.code == "unsupported_content"
    assert sheet.code == deck.code == "unreadable"
    assert str(sheet).startswith("broken.xlsx cannot be read") and str(deck).startswith("broken.pptx")
    assert not no_database.value.recoverable


async def test_a_file_past_max_file_bytes_is_not_read(
    database: Database, documents: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("DOCUMENT_ANALYSIS_AGENT_MAX_FILE_BYTES", "100")
    (documents / "small.md").write_text("# Small\n" + "word " * 10)
    (documents / "large.md").write_text("# Large\n" + "word " * 40)
    tool = analysis(database)

    read = await tool.execute(request("ingest", user="fay", path="small.md"))
    with pytest.raises(ToolError, match="large.md is larger than 100 bytes") as refused:
        await tool.execute(request("ingest", user="fay", path="large.md"))

    assert read.status == "success"
    assert refused.value.code == "too_large" and not refused.value.recoverable


def test_ingest_and_ask_structured_and_in_words_through_orchestrator_run(cli, tmp_path: Path):
    copy_shipped(tmp_path)
    for name in ("research_agent", "research_agent/src/sub_graphs/document_analysis_agent"):
        assert cli("tools", "approve", name, cwd=tmp_path).returncode == 0, name
    write_pdf(tmp_path / "report.pdf", REPORT)
    user = f"fay-{tmp_path.name[-6:]}"

    ingested = cli("run", DOCS_KEY, "ingest", "--json", '{"path": "report.pdf"}', "-u", user, cwd=tmp_path)
    words = cli("run", DOCS_KEY, "ask", "Where does the board open a shop?", "-u", user, cwd=tmp_path)
    other = cli("run", DOCS_KEY, "ask", "--json", '{"question": "shop"}', "-u", "someone-else", cwd=tmp_path)
    forget = cli("run", DOCS_KEY, "forget", "document: report.pdf", "-u", user, cwd=tmp_path)

    assert ingested.returncode == 0, ingested.stderr
    envelope = json.loads(ingested.stdout)
    assert envelope["success"] and envelope["data"]["pages"] == 3
    assert words.returncode == 0, words.stderr
    assert "[report.pdf, page 3]" in words.stdout and "opens a shop in Oslo" in words.stdout
    assert other.returncode == 1 and json.loads(other.stdout)["error"]["code"] == "not_found"
    assert forget.returncode == 1, "a sensitive action: at the end of piped input, rejected"
