"""A level's settings from a URL, in order: remote, else the last cached copy, else its file.

`remote_config: {url, refresh_seconds}` in a folder's `tool_config.yaml` names a
document (YAML or JSON) holding a mapping of the fields the file itself may set;
it overlays the file (mappings merged key by key, other values replaced) and is
validated with it as one `tool_config.yaml`. A copy fetched less than
`refresh_seconds` ago is used as it is; else the URL is fetched (see
`remote_fetch`). The last valid copy of each folder and URL is kept under the
data directory; when the URL cannot be reached, or gives a document that is not
valid, that copy is used, and without one the file alone. `RemoteState.line`
says which.

What approval covers (see `covered`) is kept apart: a folder's approval holds the
hash of those parts of the copy in force, so a remote change to them asks the
person again, as a change of the folder's files does, while a new model,
instructions or limits do not.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, JsonValue, ValidationError

from orchestrator.errors import RemoteConfigError, ToolConfigError
from orchestrator.folders.remote_fetch import RemoteConfigRef, fetch_document
from orchestrator.folders.sandbox_config import VARIABLE
from orchestrator.folders.tool_config import ToolConfig, read_config_mapping, validate_tool_config
from orchestrator.private import private_dir
from orchestrator.settings import Settings

CACHE_DIR = "remote_config"
# Who the folder is and what code it runs: its own file's alone.
FOLDER_ONLY = ("name", "kind", "entry_point", "class_name", "remote_config")
# What a remote copy may change without asking: how the level thinks and is described.
# Everything else it sets (requires_approval, sandbox, mcp, db, parameters, ...) is covered
# by approval, as are the model's endpoint and key variable and the `config:` values the
# sandbox's paths name.
UNCOVERED = frozenset(
    {
        "description",
        "version",
        "instructions",
        "limits",
        "log_level",
        "timeout_seconds",
        "max_retries",
        "planning",
        "closure",
        "include_tool_data",
        "metadata",
        "capabilities",
    }
)
COVERED_LLM = ("base_url", "api_key_env")
# Their values may be secrets: said by name only (see `shown_value`).
UNSAID = ("config", "parameters")
T = TypeVar("T")
# What a document is made into, with the parts of it approval covers.
Parse = Callable[[bytes], tuple[T, dict[str, JsonValue]]]


class Source(StrEnum):
    """Which copy of a level's configuration is in force."""

    REMOTE = "remote"
    CACHED = "cached"
    LOCAL = "local"


@dataclass(frozen=True)
class RemoteState:
    """Where a folder's configuration came from, and what of it approval covers."""

    url: str
    source: Source
    fetched_at: datetime | None = None  # of the copy in force, when it is not the file
    reason: str | None = None  # why the remote is not in force
    covered: Mapping[str, JsonValue] | None = None  # the approval-covered parts it sets

    @property
    def digest(self) -> str | None:
        """The hash of the covered parts the copy in force sets; None when it sets none."""
        if not self.covered:
            return None
        text = json.dumps(self.covered, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def line(self, name: str) -> str:
        """`weather: configuration from https://… (remote)`, or which fallback and why."""
        return f"{name}: {self.whence}"

    @property
    def whence(self) -> str:
        """`configuration from https://… (remote)`, or which fallback and why."""
        at = _when(self.fetched_at)
        if self.source == Source.REMOTE:
            what = "remote" if at is None else f"remote, fetched {at}"
        elif self.source == Source.CACHED:
            what = f"cached copy from {at}, remote unreachable: {self.reason}"
        else:
            what = f"local file, remote unreachable and no cached copy: {self.reason}"
        return f"configuration from {self.url} ({what})"


def _when(at: datetime | None) -> str | None:
    return None if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


class _Copy(BaseModel):
    url: str
    fetched_at: datetime
    body: str


class RemoteConfigs:
    """Resolves folders' remote configurations, keeping the last good copy of each in `directory`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @classmethod
    def of(cls, settings: Settings) -> RemoteConfigs:
        """Copies kept in the data directory."""
        return cls(settings.data_dir / CACHE_DIR)

    def resolve(
        self, key: str, local: dict[str, object], own: ToolConfig, ref: RemoteConfigRef
    ) -> tuple[ToolConfig, RemoteState]:
        """The folder `key`'s configuration in force, and whence.

        `local` are the fields of its file, `own` those validated (the file alone).
        """
        return self.resolve_with(key, ref, lambda body: overlay(local, body), own)

    def resolve_with(
        self, key: str, ref: RemoteConfigRef, parse: Parse[T], own: T
    ) -> tuple[T, RemoteState]:
        """What `parse` makes of the copy in force of `key`'s document, else `own`; and whence.

        `parse` raises `RemoteConfigError` for a document that cannot be used.
        """
        copy = self._cached(key, ref.url)
        now = datetime.now(UTC)
        if copy is not None and (now - copy.fetched_at).total_seconds() < ref.refresh_seconds:
            with suppress(RemoteConfigError):  # valid no more with the file: fetched again
                return _in_force(parse, copy, Source.REMOTE)
        try:
            body = fetch_document(ref.url)
            value, covered = parse(body)
        except RemoteConfigError as error:
            reason = str(error)
        else:
            self._keep(key, _Copy(url=ref.url, fetched_at=now, body=body.decode()))
            return value, RemoteState(ref.url, Source.REMOTE, covered=covered)
        if copy is not None:
            with suppress(RemoteConfigError):  # valid no more with the file: the file alone
                return _in_force(parse, copy, Source.CACHED, reason=reason)
        return own, RemoteState(ref.url, Source.LOCAL, reason=reason)

    def _path(self, key: str, url: str) -> Path:
        name = hashlib.sha256(f"{key}\0{url}".encode()).hexdigest()[:32]
        return self.directory / f"{name}.json"

    def _cached(self, key: str, url: str) -> _Copy | None:
        try:
            copy = _Copy.model_validate_json(self._path(key, url).read_bytes())
        except (OSError, ValidationError):  # none yet, or unreadable: as if none
            return None
        return copy if copy.url == url else None

    def _keep(self, key: str, copy: _Copy) -> None:
        try:
            private_dir(self.directory)
            # Write then rename: a reader at the same time sees the old copy or the new.
            fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".copy-")
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(copy.model_dump_json())
            os.replace(temporary, self._path(key, copy.url))
        except OSError:
            pass  # not kept: the next unreachable start uses an older copy, or the file


def _in_force(
    parse: Parse[T], copy: _Copy, source: Source, *, reason: str | None = None
) -> tuple[T, RemoteState]:
    value, covered = parse(copy.body.encode())
    return value, RemoteState(copy.url, source, copy.fetched_at, reason, covered)


def overlay(local: dict[str, object], body: bytes) -> tuple[ToolConfig, dict[str, JsonValue]]:
    """The file's fields with the remote document's over them, validated; and its covered parts."""
    try:
        remote = read_config_mapping(body, source="the document")
    except ToolConfigError as error:
        raise RemoteConfigError(str(error)) from None
    if own := [name for name in FOLDER_ONLY if name in remote]:
        raise RemoteConfigError(f"the document sets {own[0]}, which only the folder's file may set")
    try:
        config = validate_tool_config(_merged(local, remote), source="the document over the file")
    except ToolConfigError as error:
        raise RemoteConfigError(str(error)) from None
    return config, covered(remote, config)


def _merged(below: Mapping[str, object], above: Mapping[str, object]) -> dict[str, object]:
    merged = dict(below)
    for name, value in above.items():
        under = merged.get(name)
        if isinstance(under, dict) and isinstance(value, dict):
            merged[name] = _merged(under, value)
        else:
            merged[name] = value
    return merged


def covered(remote: Mapping[str, object], config: ToolConfig) -> dict[str, JsonValue]:
    """The parts of a remote document that approval covers, as it sets them."""
    found = {
        name: value
        for name, value in remote.items()
        if name not in UNCOVERED and name not in ("llm", "config")
    }
    llm = remote.get("llm")
    if isinstance(llm, dict) and (part := {k: llm[k] for k in COVERED_LLM if k in llm}):
        found["llm"] = part
    values = remote.get("config")
    paths = [*config.sandbox.read, *config.sandbox.write]
    named = {name for text in paths for name in VARIABLE.findall(text)}
    if isinstance(values, dict) and (part := {k: v for k, v in values.items() if k in named}):
        found["config"] = part
    return json.loads(json.dumps(found, default=str))  # as JSON: what is hashed and shown


def shown_value(name: str, value: JsonValue) -> JsonValue:
    """A covered part as a person is shown it: of `config:` and `parameters:`, the names alone."""
    if name in UNSAID and isinstance(value, dict):
        return list[JsonValue](sorted(value))
    return value
