"""Documents as text page by page: PDF (pypdf), DOCX (python-docx), XLSX (openpyxl), PPTX
(python-pptx), CSV, HTML (markdownify), Markdown.

Each converter gives `(page, text)` pairs: PDF pages as the file numbers them (from 1);
a DOCX's pages as its explicit page breaks mark them; a workbook's sheets and a deck's
slides by their number; CSV, HTML and Markdown have no pages (None). Tables, wherever
they are, become Markdown table rows (`| a | b |`) in their place in the text.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from datetime import date, datetime, time
from pathlib import Path
from typing import TYPE_CHECKING
from zipfile import BadZipFile

from orchestrator.tools import ToolError

if TYPE_CHECKING:
    from docx.table import Table as DocxTable
    from pptx.shapes.base import BaseShape

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
    from docx.table import Table

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, BadZipFile, KeyError, ValueError) as error:
        raise _unreadable(path, error) from None
    pages: Pages = []
    page, lines = 1, []
    for block in document.iter_inner_content():  # paragraphs and tables, in document order
        if isinstance(block, Table):
            lines.extend(_docx_table(block))
            continue
        for run in block.runs:
            breaks = run._element.findall(f"{W}br")
            if any(b.get(f"{W}type") == "page" for b in breaks):
                pages.append((page, "\n".join(lines)))
                page, lines = page + 1, []
        level = _heading_level((block.style.name if block.style is not None else None) or "")
        if block.text.strip():
            lines.append(("#" * level + " " if level else "") + block.text)
    pages.append((page, "\n".join(lines)))
    return pages


def _docx_table(table: DocxTable) -> list[str]:
    rows: list[list[str]] = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:  # a merged cell is listed once per grid column it spans
            if id(cell._tc) not in seen:
                seen.add(id(cell._tc))
                cells.append(cell.text)
        rows.append(cells)
    return table_rows(rows)


def table_rows(rows: Iterable[Iterable[object]]) -> list[str]:
    """Rows as Markdown table lines, empty rows left out; in a cell, `|` escaped and line
    breaks made spaces."""
    lines = []
    for row in rows:
        cells = [_cell(value) for value in row]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return " ".join(str(value).split()).replace("|", "\\|")


def xlsx_pages(path: Path) -> Pages:
    """Each sheet a page, numbered in the workbook's order, headed by the sheet's name."""
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        # data_only: a formula's value as last calculated, not the formula
        workbook = load_workbook(path, read_only=True, data_only=True)
    except (InvalidFileException, BadZipFile, KeyError, ValueError, OSError) as error:
        raise _unreadable(path, error) from None
    try:
        return [
            (number, "\n".join([f"## {sheet.title}", *table_rows(sheet.iter_rows(values_only=True))]))
            for number, sheet in enumerate(workbook.worksheets, 1)
        ]
    finally:
        workbook.close()


def csv_pages(path: Path) -> Pages:
    """The rows as a Markdown table; the delimiter (`,` `;` tab `|`) guessed from the start."""
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    delimiter = "\t" if path.suffix.lower() == ".tsv" else _delimiter(text[:8192])
    return [(None, "\n".join(table_rows(csv.reader(io.StringIO(text), delimiter=delimiter))))]


def _delimiter(sample: str) -> str:
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:  # one column, or too few rows to tell
        return ","


def pptx_pages(path: Path) -> Pages:
    """Each slide a page: its title, text boxes, tables and grouped shapes, then its notes."""
    from pptx import Presentation
    from pptx.exc import PackageNotFoundError

    try:
        deck = Presentation(str(path))
    except (PackageNotFoundError, BadZipFile, KeyError, ValueError) as error:
        raise _unreadable(path, error) from None
    pages: Pages = []
    for number, slide in enumerate(deck.slides, 1):
        title = slide.shapes.title
        lines = [f"# {title.text_frame.text}"] if title is not None and title.text_frame.text else []
        lines += [line for shape in slide.shapes
                  if title is None or shape.shape_id != title.shape_id for line in _shape_lines(shape)]
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            lines += [f"Notes: {notes}"] if notes else []
        pages.append((number, "\n".join(lines)))
    return pages


def _shape_lines(shape: BaseShape) -> list[str]:
    from pptx.shapes.autoshape import Shape
    from pptx.shapes.graphfrm import GraphicFrame
    from pptx.shapes.group import GroupShape

    if isinstance(shape, GroupShape):
        return [line for inner in shape.shapes for line in _shape_lines(inner)]
    if isinstance(shape, GraphicFrame) and shape.has_table:
        return table_rows([cell.text for cell in row.cells] for row in shape.table.rows)
    if isinstance(shape, Shape) and shape.has_text_frame:  # text boxes and placeholders
        text = shape.text_frame.text
        return [text] if text.strip() else []
    return []


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
    ".xlsx": xlsx_pages,
    ".xlsm": xlsx_pages,
    ".pptx": pptx_pages,
    ".csv": csv_pages,
    ".tsv": csv_pages,
    ".html": html_pages,
    ".htm": html_pages,
    ".md": text_pages,
    ".markdown": text_pages,
    ".txt": text_pages,
}


# What a numbered "page" is in each kind of file, as citations say it: `deck.pptx, slide 3`.
PAGE_WORDS = {".pptx": "slide", ".xlsx": "sheet", ".xlsm": "sheet"}


def page_word(document: str) -> str:
    """`page`, or what a page of `document`'s kind is called (`slide`, `sheet`)."""
    return PAGE_WORDS.get(Path(document).suffix.lower(), "page")


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
