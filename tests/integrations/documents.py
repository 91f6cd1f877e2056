"""Documents made by the tests: a small PDF writer (text pages, Helvetica), and a DOCX."""

from __future__ import annotations

from pathlib import Path


def _escaped(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(path: Path, pages: list[list[str]]) -> Path:
    """A PDF of `pages`, each a list of lines of text, readable by any PDF reader."""
    count = len(pages)
    font = 3 + 2 * count
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{3 + 2 * i} 0 R".encode() for i in range(count))
        + f"] /Count {count} >>".encode(),
    ]
    for index, lines in enumerate(pages):
        text = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({_escaped(line)}) '" for line in lines)
        stream = (text + " ET").encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * index} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


def write_docx(path: Path, pages: list[list[str]]) -> Path:
    """A DOCX of `pages` (a heading, then paragraphs), separated by page breaks."""
    import docx

    document = docx.Document()
    for index, lines in enumerate(pages):
        if index:
            document.add_page_break()
        document.add_heading(lines[0], level=1)
        for line in lines[1:]:
            document.add_paragraph(line)
    document.save(str(path))
    return path


def write_docx_with_table(path: Path, before: str, rows: list[list[str]], after: str) -> Path:
    """A DOCX of a paragraph, a table of `rows` (the first its header), and a paragraph."""
    import docx

    document = docx.Document()
    document.add_paragraph(before)
    table = document.add_table(rows=len(rows), cols=len(rows[0]))
    for cells, row in zip(table.rows, rows, strict=True):
        for cell, value in zip(cells.cells, row, strict=True):
            cell.text = value
    document.add_paragraph(after)
    document.save(str(path))
    return path


def write_xlsx(path: Path, sheets: dict[str, list[list[object]]]) -> Path:
    """A workbook with a sheet per entry of `sheets`, each a list of rows."""
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)  # pyright: ignore[reportArgumentType]  # a new book has one
    for title, rows in sheets.items():
        sheet = workbook.create_sheet(title)
        for row in rows:
            sheet.append(row)
    workbook.save(path)
    return path


def write_pptx(path: Path, slides: list[tuple[str, str, str]], *, table: list[list[str]]) -> Path:
    """A deck of (title, body, speaker notes) slides, the last with `table` below its body."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    for title, body, notes in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
        slide.shapes.title.text = title  # pyright: ignore[reportOptionalMemberAccess]  # the layout has one
        slide.placeholders[1].text_frame.text = body  # pyright: ignore[reportAttributeAccessIssue]  # a body placeholder
        slide.notes_slide.notes_text_frame.text = notes  # pyright: ignore[reportOptionalMemberAccess]  # made on access
    frame = slide.shapes.add_table(len(table), len(table[0]), Inches(1), Inches(4), Inches(6), Inches(2))
    for row, values in zip(frame.table.rows, table, strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    deck.save(str(path))
    return path
