"""Which tool folders the user approved, for which content, persisted under `data/tool_registry/`.

Nothing is approved silently: a folder is approved only by an explicit yes
(at the startup prompt or with `orchestrator tools approve`), and only for the
exact content hash it had then.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from orchestrator.errors import ConfigError
from orchestrator.settings import Settings
from orchestrator.tools.discovery import Discovery, ToolFolder, ToolNode, discover_tree

APPROVALS_FILE = "approvals.json"
REGISTRY_DIR = "tool_registry"

logger = logging.getLogger(__name__)


class Status(StrEnum):
    """Where a folder stands with the user."""

    APPROVED = "approved"
    DENIED = "denied"
    NEW = "new"  # never decided
    CHANGED = "changed"  # decided for other content


class Decision(BaseModel):
    """The user's answer for one folder's content."""

    name: str
    version: str
    digest: str
    approved: bool
    decided_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class _StoreFile(BaseModel):
    format: int = 1
    folders: dict[str, Decision] = Field(default_factory=dict)


class ApprovalStore:
    """Decisions keyed by folder key (its path below the top `sub_graphs` directory)."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / APPROVALS_FILE
        self._data = self._load()

    @classmethod
    def of(cls, settings: Settings) -> ApprovalStore:
        """The user's decisions, kept in the data directory."""
        return cls(settings.data_dir / REGISTRY_DIR)

    def status(self, folder: ToolFolder) -> Status:
        decision = self._data.folders.get(folder.key)
        if decision is None:
            return Status.NEW
        if decision.digest != folder.digest:
            return Status.CHANGED
        return Status.APPROVED if decision.approved else Status.DENIED

    def decide(self, folder: ToolFolder, *, approved: bool) -> None:
        """Record the user's answer for the folder's current content."""
        self._data.folders[folder.key] = Decision(
            name=folder.name, version=folder.config.version, digest=folder.digest, approved=approved
        )
        self._save()

    def _load(self) -> _StoreFile:
        try:
            return _StoreFile.model_validate_json(self.path.read_bytes())
        except FileNotFoundError:
            return _StoreFile()
        except (OSError, ValidationError, json.JSONDecodeError) as error:
            raise ConfigError(
                f"Cannot read the tool approvals in {self.path} ({type(error).__name__}); "
                "fix or delete the file (deleting it asks about every folder again)"
            ) from None

    def _save(self) -> None:
        try:
            self._write()
        except OSError as error:
            raise ConfigError(
                f"Cannot save the tool approvals in {self.path}: {error.strerror or error}; "
                "check the permissions of ORCHESTRATOR_DATA_DIR"
            ) from None

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Write then rename, so a crash or a concurrent reader never sees half a file.
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".approvals-")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(self._data.model_dump_json(indent=2))
        os.replace(temporary, self.path)


# The prompt: True for yes, False for no, None when the input has ended.
Ask = Callable[[ToolFolder, Status], bool | None]


@dataclass(frozen=True)
class Reviewed:
    """The folder tree as discovered, and the keys of the folders approved to load."""

    tree: Discovery
    approved: set[str]


def review_folders(settings: Settings, ask: Ask) -> Reviewed:
    """Discover the folder tree and ask about new or changed folders; imports nothing."""
    tree = discover_tree(settings.sub_graphs_dir)
    for problem in tree.problems:
        logger.warning("skipping tool folder %s: %s", problem.path, problem.reason)
    return Reviewed(tree, review(tree.nodes, ApprovalStore.of(settings), ask))


def review(nodes: list[ToolNode], store: ApprovalStore, ask: Ask) -> set[str]:
    """Ask about every new or changed folder, parents before children; the approved keys.

    A child is only considered once its parent is approved. Once the input has
    ended, nothing more is asked and undecided folders stay unapproved (and are
    asked about again next time).
    """
    approved: set[str] = set()
    input_ended = False
    for node in _parents_first(nodes, approved):
        status = store.status(node.folder)
        if status in (Status.NEW, Status.CHANGED) and not input_ended:
            answer = ask(node.folder, status)
            if answer is None:
                input_ended = True
            else:
                store.decide(node.folder, approved=answer)
                status = Status.APPROVED if answer else Status.DENIED
        if status == Status.APPROVED:
            approved.add(node.folder.key)
    return approved


def _parents_first(nodes: list[ToolNode], approved: set[str]) -> Iterator[ToolNode]:
    for node in nodes:
        yield node
        if node.folder.key in approved:
            yield from _parents_first(node.children, approved)
