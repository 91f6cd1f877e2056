"""A web page as Markdown: read up to a size, redirects checked hop by hop, HTML converted."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin

import httpx
from bs4 import BeautifulSoup, Tag
from markdownify import MarkdownConverter

from orchestrator.tools import ToolError

from .addresses import check_url

TEXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown")
HTML_TYPES = ("text/html", "application/xhtml+xml")
NOISE = ("script", "style", "noscript", "template", "iframe", "svg")
REDIRECTS = (301, 302, 303, 307, 308)
LINKS = (("a", "href"), ("img", "src"))  # what the Markdown keeps of a page's addresses


@dataclass(frozen=True)
class Page:
    """What was read: where the redirects led, its title, its text as Markdown."""

    url: str
    status: int
    title: str | None
    markdown: str
    bytes_read: int
    cut_at_bytes: bool


async def fetch(
    client: httpx.AsyncClient, url: str, *, allow_private: bool, max_bytes: int, max_redirects: int
) -> Page:
    """GET `url`, following at most `max_redirects` redirects, each checked like the first."""
    for _ in range(max_redirects + 1):
        await check_url(url, allow_private=allow_private)
        async with client.stream("GET", url) as response:
            if response.status_code in REDIRECTS and "location" in response.headers:
                url = urljoin(url, response.headers["location"])
                continue
            _check_status(response, url)
            body, cut = await _read(response, max_bytes)
            return _page(response, url, body, cut)
    raise ToolError(f"{url}: more than {max_redirects} redirects", code="too_many_redirects")


def _check_status(response: httpx.Response, url: str) -> None:
    status = response.status_code
    if status in (404, 410):
        raise ToolError(f"{url}: not found (HTTP {status})", code="not_found", recoverable=False)
    if status in (401, 403):
        raise ToolError(f"{url}: access refused (HTTP {status})", code="refused", recoverable=False)
    if status >= 400:
        raise ToolError(f"{url}: the server answered HTTP {status}", code="http_error")


async def _read(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """At most `max_bytes` of the body; the rest is never downloaded."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= max_bytes:
            return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False


def _page(response: httpx.Response, url: str, body: bytes, cut: bool) -> Page:
    kind = response.headers.get("content-type", "text/html").split(";")[0].strip().lower()
    text = body.decode(response.encoding or "utf-8", errors="replace")
    if kind in HTML_TYPES:
        title, markdown = html_to_markdown(text, url=url)
    elif kind in TEXT_TYPES:
        title, markdown = None, text
    else:
        raise ToolError(
            f"{url} is {kind}, not a web page (HTML or text); use document_analysis_agent "
            "for documents",
            code="unsupported_content",
            recoverable=False,
        )
    return Page(str(url), response.status_code, title, markdown, len(body), cut)


def html_to_markdown(html: str, *, url: str) -> tuple[str | None, str]:
    """The page's title and its body as Markdown, without scripts, styles and such; its links
    and images absolute, resolved against `url` (and the page's `<base href>`)."""
    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    _absolute_links(soup, url)
    for tag in soup(NOISE):
        tag.decompose()
    if soup.head is not None:
        soup.head.decompose()
    markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    lines = [line.rstrip() for line in markdown.splitlines()]
    return title, "\n".join(_squeezed(lines)).strip()


def _absolute_links(soup: BeautifulSoup, url: str) -> None:
    base = soup.find("base", href=True)
    if isinstance(base, Tag):
        url = urljoin(url, str(base["href"]))
    for name, attribute in LINKS:
        for tag in soup.find_all(name, attrs={attribute: True}):
            if isinstance(tag, Tag):
                tag[attribute] = urljoin(url, str(tag[attribute]).strip())


def _squeezed(lines: list[str]) -> list[str]:
    """No more than one blank line in a row."""
    kept: list[str] = []
    for line in lines:
        if line or (kept and kept[-1]):
            kept.append(line)
    return kept
