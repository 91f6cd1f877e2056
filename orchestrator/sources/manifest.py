"""What the model sees of an approved folder's tools, kept signed between starts.

After a folder loads, its manifest records each LangChain tool it gives as the
model sees it: the name, the description, the JSON schema of what the model
sets (its scopes applied) and the tool's metadata. A later start offers those
tools from the manifest and imports the folder at its first call (see
`deferred`), so a start with nothing changed imports no folder at all. It is
written on a thread of its own (see `_Writer`): the start does not wait for it.

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
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, JsonValue

from orchestrator.folders.discovery import ToolFolder
from orchestrator.folders.signed_entries import SignedEntries
from orchestrator.folders.tool_config import POLICY_FIELDS
from orchestrator.paths import user_data_dir
from orchestrator.version import __version__

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

MANIFEST_DIR = "tool-manifests"
FORMAT = "orchestrator-tool-manifest/1"
# Whose versions change the schemas and descriptions written from the same folder.
LIBRARIES = ("pydantic", "pydantic-core", "langchain-core")
# The product's modules that make a folder's tools what the model sees. By their files:
# reading a manifest (`mcp serve`'s first listing) imports none of them, nor LangChain.
SHAPING_MODULES = ("sources/adapter.py", "folders/scope.py", "folders/sensitivity.py", "tools/base.py")


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
        # One start's: the user data directory is looked up once, not for every folder.
        self._entries = SignedEntries(MANIFEST_DIR, home=home or user_data_dir())
        wait_for_manifests()  # what an earlier start of this process wrote is there to read
        self._names: set[str] | None = None  # those there, listed once (most starts find all)

    def read(self, folder: ToolFolder) -> list[ToolEntry] | None:
        """The tools of `folder` at its content now, if this installation recorded them."""
        if self._names is None:
            self._names = self._entries.names()
        name = _name(folder)
        body = self._entries.read(name) if name in self._names else None
        if body is None:
            return None
        try:
            return [ToolEntry(**entry) for entry in json.loads(body)["tools"]]
        except (ValueError, TypeError, KeyError):  # signed, yet not this format: not there
            return None

    def write(self, folder: ToolFolder, tools: Sequence[BaseTool]) -> None:
        """Record `tools` as the model sees them (not kept if any is not JSON-able)."""
        try:
            entries = [vars(entry_of(tool)) for tool in tools]  # as they are: no deep copy
            body = json.dumps({"format": FORMAT, "tools": entries}, sort_keys=True)
        except (TypeError, ValueError):  # a metadata value JSON cannot hold: imported every start
            return
        _WRITER.put(self._entries, _name(folder), body.encode())


def offered(entries: Sequence[ToolEntry], folder: ToolFolder, *, timeout_seconds: float) -> list[ToolEntry]:
    """`entries` with the policy `folder`'s config sets now, not the one they were written with.

    `timeout_seconds` is its level's limit, for a folder that sets no timeout of its own.
    """
    config = folder.config
    policy: dict[str, JsonValue] = config.model_dump(include=POLICY_FIELDS)
    if "timeout_seconds" not in config.model_fields_set:
        policy["timeout_seconds"] = timeout_seconds
    current = {**policy, "folder": str(folder.path.resolve())}
    return [replace(entry, metadata={**entry.metadata, **current}) for entry in entries]


def wait_for_manifests() -> None:
    """Return once the manifests this process wrote are on disk."""
    _WRITER.wait()


class _Writer:
    """Writes manifests on a thread of its own, while the start goes on.

    Creating a file for each of many folders is mostly waiting on the disk: a
    start is ready without waiting for it, and the process waits for it at exit
    (the thread is not a daemon). One cut short (the process killed) fails its
    signature and counts as no manifest: that folder is imported next time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[tuple[SignedEntries, str, bytes]] = deque()
        self._thread: threading.Thread | None = None

    def put(self, entries: SignedEntries, name: str, body: bytes) -> None:
        with self._lock:
            self._queue.append((entries, name, body))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tool-manifests")
                self._thread.start()

    def wait(self) -> None:
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._thread = None
                    return
                entries, name, body = self._queue.popleft()
            entries.write(name, body)


_WRITER = _Writer()


def entry_of(tool: BaseTool) -> ToolEntry:
    """`tool` as the model sees it (what `bind_tools` sends) and as the pipeline reads it."""
    schema = tool.tool_call_schema
    if isinstance(schema, dict):
        json_schema: dict[str, JsonValue] = dict(schema)
    elif issubclass(schema, BaseModel):
        json_schema = schema.model_json_schema()
    else:  # a pydantic v1 model (dict() of it failed here before too)
        raise TypeError(f"{tool.name}: its schema is a pydantic v1 model")
    return ToolEntry(tool.name, tool.description, json_schema, dict(tool.metadata or {}))



def _name(folder: ToolFolder) -> str:
    parts = [
        FORMAT,
        _product(),
        folder.key,
        str(folder.path.absolute()),
        folder.content,  # its tools' policies may come from a remote copy, not the files
    ]
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


@cache
def _product() -> str:
    """This product, its libraries and Python: a change of any is a change of every manifest."""
    libraries = [f"{name}={_version(name)}" for name in LIBRARIES]
    code = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]  # orchestrator/
    for module in SHAPING_MODULES:  # a checkout edited without a new version counts too
        code.update((package / module).read_bytes())
    return " ".join([__version__, *libraries, sys.version, code.hexdigest()])


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "none"
