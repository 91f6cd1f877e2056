"""Files to attach, read only from the folder the user allowed (`attachments_dir`)."""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass
from pathlib import Path

from orchestrator.tools import ToolError

from .email_settings import EmailSettings


@dataclass(frozen=True)
class Attachment:
    """One file's name, MIME type and bytes."""

    filename: str
    maintype: str
    subtype: str
    content: bytes


def read_attachments(smtp: EmailSettings, given: list[str]) -> list[Attachment]:
    """The files `given` names (relative to `attachments_dir`, or absolute inside it), each
    checked before any is read; the total is capped by `max_attachment_bytes`."""
    if not given:
        return []
    if smtp.attachments_dir is None:
        raise ToolError(
            "Attachments are off: no folder is allowed to send files from; "
            f"{smtp.how_to_set_these('attachments_dir')}",
            code="not_configured",
            recoverable=False,
        )
    root = smtp.attachments_dir.expanduser().resolve()
    paths = [_inside(root, name) for name in given]
    total = sum(path.stat().st_size for path in paths)
    if total > smtp.max_attachment_bytes:
        raise ToolError(
            f"The attachments are {total:,} bytes, more than max_attachment_bytes "
            f"({smtp.max_attachment_bytes:,})",
            code="too_large",
            recoverable=False,
        )
    return [_attachment(path) for path in paths]


def _inside(root: Path, given: str) -> Path:
    # resolve() follows links, so a link inside the folder to a file outside is refused too
    path = (root / Path(given).expanduser()).resolve()
    if not path.is_relative_to(root):
        raise ToolError(
            f"{given} is outside the attachments folder ({root}): refused",
            code="refused",
            recoverable=False,
        )
    if not path.is_file():
        raise ToolError(f"There is no file {given} in {root}", code="not_found", recoverable=False)
    return path


def _attachment(path: Path) -> Attachment:
    kind, encoding = mimetypes.guess_type(path.name)
    # a compressed file (.tar.gz) is sent as the bytes it is, not as its content's type
    maintype, _, subtype = (
        kind if kind and not encoding else "application/octet-stream"
    ).partition("/")
    return Attachment(path.name, maintype, subtype, path.read_bytes())
