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
