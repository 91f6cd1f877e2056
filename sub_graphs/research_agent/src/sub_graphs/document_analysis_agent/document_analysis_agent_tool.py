"""The user's documents: ingested in chunks with their pages, found again by meaning, cited."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_settings import SettingsConfigDict

from orchestrator.tools import Tool, ToolError, ToolRequest, ToolResult, ToolSettings, action

from .converters import CONVERTERS, chunks, convert, page_word
from .library import Library, Passage, citation
from .web_documents import is_address, web_pages


class DocumentSettings(ToolSettings):
    """`config:` of tool_config.yaml, overridden by the folder's .env and the environment."""

    model_config = SettingsConfigDict(env_prefix="DOCUMENT_ANALYSIS_AGENT_")

    documents_dir: Path = Path(".")
    max_file_bytes: int = Field(default=50_000_000, ge=1)
    chunk_words: int = Field(default=180, ge=20, le=2000)
    overlap_words: int = Field(default=30, ge=0)
    # A document at a web address is read as web_search_agent reads pages, with these bounds.
    allow_private_addresses: bool = False
    timeout_seconds: float = Field(default=60, gt=0)
    max_redirects: int = Field(default=5, ge=0, le=20)
    user_agent: str = "orchestrator-document-analysis-agent/1.0"


class Ingest(BaseModel):
    path: str = Field(
        min_length=1,
        max_length=2000,
        description="The file to read (PDF, DOCX, XLSX, PPTX, CSV, HTML or Markdown), below the "
        "documents folder; or a document's http(s) address (a PDF found on the web).",
    )


class Ask(BaseModel):
    question: str = Field(min_length=1, max_length=2000, description="What to find in the documents.")
    max_passages: int = Field(default=4, ge=1, le=20, description="How many passages to cite, at most.")


class ListDocuments(BaseModel):
    pass


class Forget(BaseModel):
    document: str = Field(min_length=1, description="The document's name, as list_documents gives it.")


class DocumentAnalysisAgent(Tool):
    """Reads the user's documents and answers from them with citations."""

    @action(Ingest)
    async def ingest(self, params: Ingest, request: ToolRequest) -> ToolResult:
        """Read a document (a file, or a web address) into the user's library (again, if it was
        read before)."""
        settings = self.settings(DocumentSettings)
        if is_address(params.path):  # cited by the address the redirects led to
            name, pages = await web_pages(
                params.path, allow_private=settings.allow_private_addresses,
                max_bytes=settings.max_file_bytes, max_redirects=settings.max_redirects,
                timeout_seconds=settings.timeout_seconds, user_agent=settings.user_agent,
            )
            source = name
        else:
            path = _inside(settings, params.path)
            name, source, pages = path.name, str(path), await asyncio.to_thread(convert, path)
        pieces = chunks(pages, words=settings.chunk_words, overlap=settings.overlap_words)
        if not pieces:
            raise ToolError(f"{name} has no text to read (a scan without text?)",
                            code="no_text", recoverable=False)
        stored = await self._library(request).store(name, source, pieces)
        numbered = sorted({page for page, _ in pages if page is not None})
        pages_said = f"{len(numbered)} {page_word(name)}s, " if numbered else ""
        how = f"embedded with {stored.model}" if stored.model else "text search only (no embedder)"
        return request.result(
            f"Read {name}: {pages_said}{len(pieces)} passages ({how}).",
            data={"document": name, "pages": len(numbered) or None, "chunks": len(pieces),
                  "embedding_model": stored.model},
        )

    @action(Ask)
    async def ask(self, params: Ask, request: ToolRequest) -> ToolResult:
        """Answer a question from the user's documents: the passages that answer it, each cited
        with its file and page."""
        found = await self._library(request).search(params.question, limit=params.max_passages)
        if not found:
            raise ToolError(
                "Nothing in your documents matches that; ingest a document first, or ask in other words.",
                code="not_found",
            )
        return request.result(
            _answer(found),
            data={
                "question": params.question,
                "passages": [p.as_json() for p in found],
                "citations": list(dict.fromkeys(citation(p) for p in found)),
            },
        )

    @action(ListDocuments)
    async def list_documents(self, params: ListDocuments, request: ToolRequest) -> ToolResult:
        """List the documents in the user's library."""
        documents = await self._library(request).documents()
        lines = [
            f"{d['document']}" + (f" ({d['pages']} {page_word(str(d['document']))}s)" if d["pages"] else "")
            for d in documents
        ]
        return request.result("\n".join(lines) or "No documents yet.", data=documents)

    @action(Forget, sensitive=True)
    async def forget(self, params: Forget, request: ToolRequest) -> ToolResult:
        """Remove a document from the user's library."""
        removed = await self._library(request).forget(params.document)
        if not removed:
            raise ToolError(f"There is no document {params.document!r}; list_documents shows them.",
                            code="not_found", recoverable=False)
        return request.result(f"Forgot {params.document} ({removed} passages).",
                              data={"document": params.document, "chunks": removed})

    def _library(self, request: ToolRequest) -> Library:
        database = self.context.require_database(self.name)
        return Library(database, request.user_id or "anonymous", embedder=self.context.embedder)


def _inside(settings: DocumentSettings, given: str) -> Path:
    """The file `given` names, if it is a readable document below the documents folder."""
    root = settings.documents_dir.expanduser().resolve()
    path = (root / Path(given).expanduser()).resolve()
    if not path.is_relative_to(root):
        raise ToolError(f"{given} is outside the documents folder ({root}): refused", code="refused",
                        recoverable=False)
    if not path.is_file():
        raise ToolError(f"There is no file {given} in {root}.", code="not_found", recoverable=False)
    if path.suffix.lower() not in CONVERTERS:
        kinds = ", ".join(sorted(CONVERTERS))
        raise ToolError(f"{path.name}: not a document it reads ({kinds})",
                        code="unsupported_content", recoverable=False)
    if path.stat().st_size > settings.max_file_bytes:
        raise ToolError(f"{path.name} is larger than {settings.max_file_bytes:,} bytes",
                        code="too_large", recoverable=False)
    return path


def _answer(found: list[Passage]) -> str:
    quoted = "\n\n".join(f"[{citation(p)}] {p.text}" for p in found)
    sources = "; ".join(dict.fromkeys(citation(p) for p in found))
    return f"From your documents:\n\n{quoted}\n\nSources: {sources}"
