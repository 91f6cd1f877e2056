"""Whether an object's bytes are text: its content type decides first, its bytes only without one."""

from __future__ import annotations

import base64
from email.message import Message

# Types outside text/* whose bytes are text; `+json` and `+xml` suffixes count too.
TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-yaml",
        "application/yaml",
        "application/toml",
        "application/sql",
        "application/csv",
        "application/x-sh",
        "application/x-ndjson",
        "application/ld+json",
        "image/svg+xml",
    }
)


def content_of(body: bytes, content_type: str | None) -> dict[str, str]:
    """`{"content": text}` for a text type (in its charset), else `{"content_base64": ...}`.

    An `application/octet-stream` object whose bytes happen to be UTF-8 stays bytes: the type
    says what it is. Only an object without a type is read as text when its bytes decode.
    """
    binary = {"content_base64": base64.b64encode(body).decode("ascii")}
    if not content_type:
        return _decoded(body, "utf-8") or binary
    header = Message()
    header["content-type"] = content_type
    mime = header.get_content_type()
    if not (mime.startswith("text/") or mime in TEXT_TYPES or mime.endswith(("+json", "+xml"))):
        return binary
    charset = header.get_param("charset")
    return _decoded(body, charset if isinstance(charset, str) else "utf-8") or binary


def _decoded(body: bytes, charset: str) -> dict[str, str] | None:
    try:
        return {"content": body.decode(charset)}
    except (UnicodeDecodeError, LookupError):  # bytes not in that charset, or no such charset
        return None
