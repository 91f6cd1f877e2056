"""A web page as Markdown: read through the orchestrator's web fetch (`orchestrator.tools.web_fetch`), HTML
converted."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin

import httpx
from bs4 import BeautifulSoup, Tag
from markdownify import MarkdownConverter

from orchestrator.tools import ToolError, web_fetch

TEXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown")
HTML_TYPES = ("text/html", "application/xhtml+xml")
NOISE = ("script", "style", "noscript", "template", "iframe", "svg")
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
    """GET `url` as the orchestrator's web fetch does (every hop checked), as Markdown."""
    fetched = await web_fetch.fetch(client, url, allow_private=allow_private, max_bytes=max_bytes,
                                    max_redirects=max_redirects)
    return _page(fetched)


def _page(fetched: web_fetch.Fetched) -> Page:
    kind, url = fetched.content_type or "text/html", fetched.url
    text = fetched.body.decode(fetched.encoding or "utf-8", errors="replace")
    if kind in HTML_TYPES:
        title, markdown = html_to_markdown(text, url=url)
    elif kind in TEXT_TYPES:
        title, markdown = None, text
    else:
        raise ToolError(
            f"{url} is {kind}, not a web page (HTML or text); a document (a PDF, say) is read "
            "by document_analysis_agent's ingest, with this address as its path",
            code="unsupported_content",
            recoverable=False,
        )
    return Page(url, fetched.status, title, markdown, len(fetched.body), fetched.cut)


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
