"""The JSON lines a folder's process and the orchestrator exchange.

To the child, first `hello` (the folder as approved: its path, key,
configuration and Python sources, base64), then `call` (an id, the
`ToolRequest`, the run's user/session ids) and `cancel` (an id). From it,
first `ready` (each action's name, description, JSON schema and the author's
sensitivity mark) or `failed` (why it cannot load), then one `result` or
`error` per call id. One JSON object a line, UTF-8.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import IO

from orchestrator.folders.hashing import SourceFile

MAX_LINE = 64 * 1024 * 1024  # a result larger than this is refused by the reader


def encode(message: Mapping[str, object]) -> bytes:
    """One message as its line."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def decode(line: bytes) -> dict[str, object]:
    """The message a line holds (ValueError if it is not a JSON object)."""
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a message is a JSON object")
    return message


def send(stream: IO[bytes], message: Mapping[str, object]) -> None:
    """Write one message and flush it."""
    stream.write(encode(message))
    stream.flush()


def pack_sources(sources: Mapping[str, SourceFile]) -> dict[str, dict[str, str]]:
    """A folder's Python files as hashed, for the `hello` message."""
    return {
        name: {"path": str(source.path), "code": base64.b64encode(source.code).decode()}
        for name, source in sources.items()
    }


def unpack_sources(packed: Mapping[str, Mapping[str, str]]) -> dict[str, SourceFile]:
    """The files `pack_sources` packed."""
    from pathlib import Path

    return {
        name: SourceFile(path=Path(item["path"]), code=base64.b64decode(item["code"]))
        for name, item in packed.items()
    }
