"""Documents as text page by page: PDF (pypdf), DOCX (python-docx), HTML (markdownify), Markdown.

Each converter gives `(page, text)` pairs: PDF pages as the file numbers them (from 1);
a DOCX's pages as its explicit page breaks mark them; HTML and Markdown have no pages
(None).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from orchestrator.tools import ToolError

Pages = list[tuple[int | None, str]]
NOISE = ("script", "style", "noscript", "template", "iframe", "svg")
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def pdf_pages(path: Path) -> Pages:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted:
            raise ToolError(f"{path.name} is encrypted: it cannot be read", code="refused",
                            recoverable=False)
        return [(number, page.extract_text() or "") for number, page in enumerate(reader.pages, 1)]
    except PdfReadError as error:
        raise _unreadable(path, error) from None


def docx_pages(path: Path) -> Pages:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, KeyError, ValueError) as error:
        raise _unreadable(path, error) from None
    pages: Pages = []
    page, lines = 1, []
    for paragraph in document.paragraphs:
        for run in paragraph.runs:
            breaks = run._element.findall(f"{W}br")
            if any(b.get(f"{W}type") == "page" for b in breaks):
                pages.append((page, "\n".join(lines)))
                page, lines = page + 1, []
        level = _heading_level((paragraph.style.name if paragraph.style is not None else None) or "")
        if paragraph.text.strip():
            lines.append(("#" * level + " " if level else "") + paragraph.text)
    pages.append((page, "\n".join(lines)))
    return pages


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    name, _, number = style.partition(" ")
    return int(number) if name == "Heading" and number.isdigit() else 0


def html_pages(path: Path) -> Pages:
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    for tag in soup(NOISE):
        tag.decompose()
    if soup.head is not None:
        soup.head.decompose()
    return [(None, MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup))]


def text_pages(path: Path) -> Pages:
    return [(None, path.read_text(encoding="utf-8", errors="replace"))]


CONVERTERS: dict[str, Callable[[Path], Pages]] = {
    ".pdf": pdf_pages,
    ".docx": docx_pages,
    ".html": html_pages,
    ".htm": html_pages,
    ".md": text_pages,
    ".markdown": text_pages,
    ".txt": text_pages,
}


def convert(path: Path) -> Pages:
    """The document's pages; a ToolError for a kind of file it does not read."""
    converter = CONVERTERS.get(path.suffix.lower())
    if converter is None:
        kinds = ", ".join(sorted(CONVERTERS))
        raise ToolError(f"{path.name}: not a document it reads ({kinds})", code="unsupported_content",
                        recoverable=False)
    return converter(path)


def _unreadable(path: Path, error: Exception) -> ToolError:
    return ToolError(f"{path.name} cannot be read: {error}", code="unreadable", recoverable=False)


def chunks(pages: Pages, *, words: int, overlap: int) -> list[tuple[int | None, str]]:
    """Each page's text in windows of `words` words, each sharing `overlap` with the one before."""
    step = max(1, words - overlap)
    found: list[tuple[int | None, str]] = []
    for page, text in pages:
        tokens = text.split()
        for start in range(0, max(len(tokens) - overlap, 1), step):
            window = tokens[start : start + words]
            if window:
                found.append((page, " ".join(window)))
    return found
