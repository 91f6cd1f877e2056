"""The JSON lines a folder's process and the orchestrator exchange.

To the child, first `hello` (the folder as approved: its path, key,
configuration and Python sources, base64), then `call` (an id, the
`ToolRequest`, the run's user/session ids) and `cancel` (an id). From it,
first `ready` (each action's name, description, JSON schema and the author's
sensitivity mark) or `failed` (why it cannot load), then one `result` or
`error` per call id. One JSON object a line, UTF-8.

Calls and answers are pydantic models (`Call`, `Cancel`, `Answer`), read and
written by pydantic's own JSON: a call's hot path is one parse-and-validate
on each side, not a parse and then a validation of what it gave.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import IO, Literal, TypeGuard

from pydantic import BaseModel, Field, TypeAdapter

from orchestrator.folders.hashing import SourceFile
from orchestrator.tools.base import ToolRequest
from orchestrator.tools.results import ToolResult

MAX_LINE = 64 * 1024 * 1024  # a result larger than this is refused by the reader


class CallContext(BaseModel):
    """The run's ids a call carries besides its request's."""

    user_id: str | None = None


class Call(BaseModel):
    """A call for the child to run; its answer carries the same `id`."""

    id: int
    request: ToolRequest
    context: CallContext = Field(default_factory=CallContext)


class Cancel(BaseModel):
    """Stop the call `cancel` (its answer then says `cancelled`)."""

    cancel: int


class Failure(BaseModel):
    """Why a call failed: a ToolError of the tool's, the OS's refusal, or a bug."""

    kind: Literal["tool", "os", "bug"]
    message: str
    code: str | None = None
    recoverable: bool | None = None


class Answer(BaseModel):
    """The child's answer to call `id`: its result, its failure, or that it was cancelled."""

    id: int
    result: ToolResult | None = None
    error: Failure | None = None
    cancelled: bool = False


TO_CHILD: TypeAdapter[Call | Cancel] = TypeAdapter(Call | Cancel)


def encode_model(message: BaseModel) -> bytes:
    """One call or answer as its line."""
    return message.model_dump_json().encode() + b"\n"


def encode(message: Mapping[str, object]) -> bytes:
    """One message as its line."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def decode(line: bytes) -> dict[str, object]:
    """The message a line holds (ValueError if it is not a JSON object)."""
    message: object = json.loads(line)
    if not is_object(message):
        raise ValueError("a message is a JSON object")
    return message


def is_object(value: object) -> TypeGuard[dict[str, object]]:
    """True for a JSON object, as `json.loads` gives one (its keys are strings)."""
    return isinstance(value, dict)


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


def unpack_sources(packed: Mapping[str, object]) -> dict[str, SourceFile]:
    """The files `pack_sources` packed (ValueError for what it cannot have packed)."""
    from pathlib import Path

    files: dict[str, SourceFile] = {}
    for name, item in packed.items():
        if not is_object(item):
            raise ValueError("a packed source is a JSON object")
        files[name] = SourceFile(
            path=Path(str(item["path"])), code=base64.b64decode(str(item["code"]))
        )
    return files
