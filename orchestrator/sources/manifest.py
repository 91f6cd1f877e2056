"""What the model sees of an approved folder's tools, kept signed between starts.

After a folder loads, its manifest records each LangChain tool it gives as the
model sees it: the name, the description, the JSON schema of what the model
sets (its scopes applied) and the tool's metadata. A later start offers those
tools from the manifest and imports the folder at its first call (see
`deferred`), so a start with nothing changed imports no folder at all.

A manifest is found by what cannot be forged: the folder's content hash (the
SHA-256 of every byte, which its approval holds), its key and path, and what
else the tools depend on: this product's version and the modules that turn a
`Tool` into LangChain tools, the pydantic and LangChain versions that write the
schemas, this Python. A changed byte is another hash, so no manifest: the
folder is asked about again and imported as at a first start. Each manifest is
signed with the installation key (see `folders.signed_entries`): one written by
anyone else could put words in the model's mouth through a description, so an
unsigned, foreign or damaged one is ignored and the folder imported now.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from langchain_core.tools import BaseTool
from pydantic import BaseModel, JsonValue

from orchestrator import __version__
from orchestrator.folders import scope, sensitivity
from orchestrator.folders.discovery import ToolFolder
from orchestrator.folders.signed_entries import SignedEntries
from orchestrator.sources import adapter
from orchestrator.tools import base

MANIFEST_DIR = "tool-manifests"
FORMAT = "orchestrator-tool-manifest/1"
# Whose versions change the schemas and descriptions written from the same folder.
LIBRARIES = ("pydantic", "pydantic-core", "langchain-core")
# The product's modules that make a folder's tools what the model sees.
SHAPING_MODULES = (adapter, scope, sensitivity, base)


@dataclass(frozen=True)
class ToolEntry:
    """One tool of a folder as the model sees it, and the metadata the pipeline reads."""

    name: str
    description: str
    schema: dict[str, JsonValue]
    metadata: dict[str, JsonValue]


class Manifests:
    """The manifests of this installation, in the user's data directory (`tool-manifests/`)."""

    def __init__(self, *, home: Path | None = None) -> None:
        self._entries = SignedEntries(MANIFEST_DIR, home=home)

    def read(self, folder: ToolFolder) -> list[ToolEntry] | None:
        """The tools of `folder` at its content now, if this installation recorded them."""
        body = self._entries.read(_name(folder))
        if body is None:
            return None
        try:
            return [ToolEntry(**entry) for entry in json.loads(body)["tools"]]
        except (ValueError, TypeError, KeyError):  # signed, yet not this format: not there
            return None

    def write(self, folder: ToolFolder, tools: Sequence[BaseTool]) -> None:
        """Record `tools` as the model sees them (not kept if any is not JSON-able)."""
        try:
            entries = [asdict(entry_of(tool)) for tool in tools]
            body = json.dumps({"format": FORMAT, "tools": entries}, sort_keys=True)
        except (TypeError, ValueError):  # a metadata value JSON cannot hold: imported every start
            return
        self._entries.write(_name(folder), body.encode())

    def directory(self) -> Path:
        """Where the manifests are now."""
        return self._entries.directory()


def entry_of(tool: BaseTool) -> ToolEntry:
    """`tool` as the model sees it (what `bind_tools` sends) and as the pipeline reads it."""
    schema = tool.tool_call_schema
    json_schema = schema.model_json_schema() if _is_model(schema) else dict(schema)  # type: ignore[union-attr, arg-type]
    return ToolEntry(tool.name, tool.description, json_schema, dict(tool.metadata or {}))


def _is_model(schema: object) -> bool:
    return isinstance(schema, type) and issubclass(schema, BaseModel)


def _name(folder: ToolFolder) -> str:
    parts = [
        FORMAT,
        _product(),
        folder.key,
        str(folder.path.absolute()),
        folder.digest,
    ]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


@cache
def _product() -> str:
    """This product, its libraries and Python: a change of any is a change of every manifest."""
    libraries = [f"{name}={_version(name)}" for name in LIBRARIES]
    code = hashlib.sha256()
    for module in SHAPING_MODULES:  # a checkout edited without a new version counts too
        code.update(Path(module.__file__ or "").read_bytes())
    return " ".join([__version__, *libraries, sys.version, code.hexdigest()])


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "none"
