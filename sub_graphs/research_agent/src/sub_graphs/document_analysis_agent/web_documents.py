"""A document at a web address (a PDF the research agent found): read through the orchestrator's
web fetch, as web_search_agent reads pages, then converted like a file of its kind."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from orchestrator.tools import ToolError
from orchestrator.tools.web_fetch import fetch, web_client

from .converters import CONVERTERS, Pages, convert

# What each content type is read as; any other (application/octet-stream, say) by the
# address's own suffix.
KINDS = {
    "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "text/csv": ".csv",
    "text/tab-separated-values": ".tsv",
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "text/markdown": ".md",
    "text/plain": ".txt",
}
ACCEPT = ", ".join([*KINDS, "*/*;q=0.5"])


def is_address(given: str) -> bool:
    """Whether `given` is a web address rather than a file's path."""
    return given.lower().startswith(("http://", "https://"))


async def web_pages(
    url: str, *, allow_private: bool, max_bytes: int, max_redirects: int, timeout_seconds: float,
    user_agent: str,
) -> tuple[str, Pages]:
    """The address the redirects led to, and its document's pages."""
    async with web_client(timeout_seconds=timeout_seconds, user_agent=user_agent, accept=ACCEPT) as client:
        # One byte past the limit: a document cut short cannot be read, so it is refused whole.
        fetched = await fetch(client, url, allow_private=allow_private, max_bytes=max_bytes + 1,
                              max_redirects=max_redirects)
    if fetched.cut:
        raise ToolError(f"{fetched.url} is larger than {max_bytes:,} bytes", code="too_large",
                        recoverable=False)
    name = _file_name(fetched.url, fetched.content_type)
    return fetched.url, await asyncio.to_thread(_converted, name, fetched.body)


def _file_name(url: str, content_type: str) -> str:
    """A file name for the document: the address's last segment, with its kind's suffix."""
    path = PurePosixPath(unquote(urlsplit(url).path))
    stem = path.stem or "document"
    suffix = KINDS.get(content_type) or path.suffix.lower()
    if suffix not in CONVERTERS:
        kinds = ", ".join(sorted(CONVERTERS))
        raise ToolError(f"{url} is {content_type or 'of no stated type'}: not a document it reads "
                        f"({kinds})", code="unsupported_content", recoverable=False)
    return stem.replace("/", "_")[:100] + suffix


def _converted(name: str, body: bytes) -> Pages:
    with tempfile.TemporaryDirectory(prefix="orchestrator-document-") as directory:
        path = Path(directory) / name
        path.write_bytes(body)
        return convert(path)
