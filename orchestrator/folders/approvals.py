"""Which tool folders the user approved, for which content, persisted under `data/tool_registry/`.

Nothing is approved silently: a folder is approved only by an explicit yes
(at the startup prompt or with `orchestrator tools approve`), and only for the
exact content hash it had then. Each decision is signed with this user's
installation key (see `signing`) and bound to the tool directory it is about,
so a forged or copied `approvals.json` decides nothing.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum, StrEnum
from pathlib import Path

from pydantic import BaseModel, Field, JsonValue, ValidationError

from orchestrator.errors import ConfigError
from orchestrator.folders.approved_files import forget_copy, keep_copy
from orchestrator.folders.discovery import (
    Discovery,
    FolderNode,
    ToolFolder,
    content_hash,
    discover_tree,
    walk,
)
from orchestrator.folders.remote_config import RemoteConfigs
from orchestrator.folders.signing import installation_key, sign, verify
from orchestrator.folders.skipped import report_skipped
from orchestrator.folders.untrusted import printable
from orchestrator.private import private_dir
from orchestrator.settings import Settings

APPROVALS_FILE = "approvals.json"
REGISTRY_DIR = "tool_registry"
UNSIGNED = (
    "%d stored tool decision(s) are not signed by this installation (made by an earlier "
    "version, or copied here): those folders are asked about again"
)
SIGNED = "orchestrator-approval/2"  # what a decision's MAC covers, in this format
# Answers given, then the folder changed again: how many times it is asked before giving up.
MAX_ROUNDS = 3

logger = logging.getLogger(__name__)


class Status(StrEnum):
    """Where a folder stands with the user."""

    APPROVED = "approved"
    DENIED = "denied"
    NEW = "new"  # never decided
    CHANGED = "changed"  # decided for other content


# How strongly a folder holds its tool name against same-named folders beside it.
RANKS = {Status.APPROVED: 2, Status.CHANGED: 1, Status.DENIED: 1, Status.NEW: 0}


class FolderDecision(BaseModel):
    """The user's answer for one folder's content."""

    name: str
    version: str
    digest: str
    approved: bool
    decided_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    mac: str = ""  # HMAC of the fields above (but the date) and where the folder is
    # Each file's SHA-256 then, to list what changed since (shown, never trusted: not in the MAC).
    files: dict[str, str] = Field(default_factory=dict)
    # The hash of what approval covers in its remote configuration then (see
    # `remote_config`; None: it set none), in the MAC; and those parts, shown, never trusted.
    remote: str | None = None
    remote_covered: dict[str, JsonValue] | None = None


class Pin(BaseModel):
    """The user's answer for an MCP server's definition (see `sources.mcp.definitions`)."""

    name: str
    digest: str
    approved: bool
    definition: dict[str, JsonValue]  # as it was approved: a change is shown against it
    decided_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    mac: str = ""
    # The server gave another definition since (at a first call): it is started and asked
    # about at the next start. Not signed: dropping it only blocks that server's calls again.
    changed_seen: bool = False


class _StoreFile(BaseModel):
    format: int = 2
    folders: dict[str, FolderDecision] = Field(default_factory=dict)
    servers: dict[str, Pin] = Field(default_factory=dict)


class ApprovalStore:
    """Decisions keyed by folder key (its path below the top `sub_graphs` directory).

    `sub_graphs_dir` is the directory the keys are below: a decision holds only
    for it. `key_dir` holds the installation key (the user's data directory).
    """

    def __init__(
        self, directory: Path, *, sub_graphs_dir: Path, key_dir: Path | None = None
    ) -> None:
        self.path = directory / APPROVALS_FILE
        self._scope = str(sub_graphs_dir.resolve())
        self._key_dir = key_dir
        self._key: bytes | None = None
        self._data = self._load()

    @classmethod
    def of(cls, settings: Settings) -> ApprovalStore:
        """The user's decisions, kept in the data directory."""
        return cls(settings.data_dir / REGISTRY_DIR, sub_graphs_dir=settings.sub_graphs_dir)

    def status(self, folder: ToolFolder) -> Status:
        decision = self._data.folders.get(folder.key)
        if decision is None or not self._authentic(folder.key, decision):
            return Status.NEW
        if decision.digest != folder.digest or not _remote_approved(decision, folder):
            return Status.CHANGED
        return Status.APPROVED if decision.approved else Status.DENIED

    def remote_changed(self, folder: ToolFolder) -> bool:
        """True when only what approval covers of its remote copy differs from the decision."""
        decision = self.decision(folder.key)
        return (
            decision is not None
            and decision.digest == folder.digest
            and not _remote_approved(decision, folder)
        )

    def decided_at(self, key: str) -> datetime | None:
        """When the signed decision about the folder `key` was made, if there is one."""
        decision = self.decision(key)
        return decision.decided_at if decision is not None else None

    def decision(self, key: str) -> FolderDecision | None:
        """The signed decision about the folder `key`, if there is one."""
        decision = self._data.folders.get(key)
        if decision is None or not self._authentic(key, decision):
            return None
        return decision

    @property
    def first_use(self) -> bool:
        """True while no folder was ever decided on here."""
        return not self._data.folders

    def unsigned(self) -> int:
        """How many stored decisions this installation did not sign (older or copied ones)."""
        return len(self.unsigned_keys())

    def unsigned_keys(self) -> set[str]:
        """The folder keys whose stored decision this installation did not sign.

        Also those of another `sub_graphs` directory sharing this data directory, or of a
        folder removed since: a decision holds only for the directory it was made for.
        """
        return {key for key, d in self._data.folders.items() if not self._authentic(key, d)}

    def decide(self, folder: ToolFolder, *, approved: bool) -> None:
        """Record the user's answer for the folder's current content."""
        self.decide_all([folder], approved=approved)

    def decide_all(self, folders: Iterable[ToolFolder], *, approved: bool) -> None:
        """Record the same answer for each folder's current content, saved once.

        One save for them all: saving after each of thousands of yeses rewrote
        the whole file each time.
        """
        for folder in folders:
            decision = FolderDecision(
                name=folder.name,
                version=folder.config.version,
                digest=folder.digest,
                approved=approved,
                files=dict(folder.files),
                remote=folder.remote_digest,
                remote_covered=dict(folder.remote.covered or {}) if folder.remote else None,
            )
            decision.mac = sign(self._installation_key(), self._signed(folder.key, decision))
            self._data.folders[folder.key] = decision
            if approved:  # what a later change is shown against
                keep_copy(self.path.parent, folder)
            else:
                forget_copy(self.path.parent, folder.key)
        self._save()

    def forget(self, key: str) -> None:
        """Drop the decision about the folder `key`: it is asked about as new."""
        if self._data.folders.pop(key, None) is not None:
            self._save()
        forget_copy(self.path.parent, key)

    def pin(self, key: str) -> Pin | None:
        """The answer about the MCP server of the folder `key`, if this installation signed it."""
        pin = self._data.servers.get(key)
        if pin is None or not pin.mac:
            return None
        return pin if verify(self._installation_key(), self._pinned(key, pin), pin.mac) else None

    def decide_pin(self, key: str, pin: Pin) -> None:
        """Record the user's answer about an MCP server's definition (`pin.digest` is its hash)."""
        pin.mac = sign(self._installation_key(), self._pinned(key, pin))
        self._data.servers[key] = pin
        self._save()

    def see_pin_changed(self, key: str) -> None:
        """Note that the MCP server of folder `key` gave a definition other than its pin's.

        Read again first: another process may have saved decisions since this one loaded them.
        """
        self._data = self._load()
        pin = self._data.servers.get(key)
        if pin is not None and not pin.changed_seen:
            pin.changed_seen = True
            self._save()

    def _pinned(self, key: str, pin: Pin) -> bytes:
        # The definition itself is checked against the digest by whoever reads it.
        fields = [SIGNED, "mcp", self._scope, key, pin.name, pin.digest, pin.approved]
        return json.dumps(fields).encode()

    def _authentic(self, key: str, decision: FolderDecision) -> bool:
        return bool(decision.mac) and verify(
            self._installation_key(), self._signed(key, decision), decision.mac
        )

    def _signed(self, key: str, decision: FolderDecision) -> bytes:
        fields = [SIGNED, self._scope, key, decision.name, decision.version, decision.digest]
        # Only when set: decisions about folders with no remote configuration keep their MAC.
        remote = [] if decision.remote is None else [decision.remote]
        return json.dumps([*fields, decision.approved, *remote]).encode()

    def _installation_key(self) -> bytes:
        if self._key is None:
            self._key = installation_key(self._key_dir)
        return self._key

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
        private_dir(self.path.parent)
        # Write then rename, so a crash or a concurrent reader never sees half a file.
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".approvals-")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(self._data.model_dump_json(indent=2))
        os.replace(temporary, self.path)


def _remote_approved(decision: FolderDecision, folder: ToolFolder) -> bool:
    """Whether what approval covers of the folder's remote copy in force is what was decided on.

    A copy that sets none of it (or the file alone, when no copy can be had) needs
    the folder's files approved, nothing more.
    """
    return folder.remote_digest is None or folder.remote_digest == decision.remote


class Later(Enum):
    """No answer (an empty line): not approved now, nothing remembered, asked again next time."""

    LATER = "later"


LATER = Later.LATER
# The prompt: True for yes, False for no, LATER for no answer, None when the input has ended.
Ask = Callable[[ToolFolder, Status], bool | Later | None]


@dataclass(frozen=True)
class Reviewed:
    """The folder tree as discovered, and the keys of the folders approved to load."""

    tree: Discovery
    approved: set[str]


def review_folders(settings: Settings, ask: Ask) -> Reviewed:
    """Discover the folder tree and ask about new or changed folders; imports nothing.

    A yes is saved only once the questions are over and the folder, hashed
    again, still has the content it was asked about: if it changed while the
    question waited, nothing is saved for it and it is asked about again (its
    new content is what a yes then approves), up to `MAX_ROUNDS` times.
    """
    store = ApprovalStore.of(settings)
    unsigned = store.unsigned_keys()
    answered = _Recorded(_UntilInputEnds(ask))
    rounds = 0
    while True:
        tree = discover_approved_first(settings, store)
        if rounds == 0:
            _say_unsigned(unsigned, tree)
        answered.yes.clear()
        approved = review(tree.nodes, store, answered)
        changed = _save_unchanged(answered.yes, store)
        rounds += 1
        if not changed:
            break
        keys = printable(", ".join(sorted(changed)))
        logger.warning("changed while you were asked about it, so asked again: %s", keys)
        if rounds == MAX_ROUNDS:
            break
    approved -= changed  # still changing: not loaded; asked again next time
    for problem in tree.problems:
        report_skipped(logger, problem.path, problem.reason, sub_graphs_dir=settings.sub_graphs_dir)
    return Reviewed(tree, approved)


def _say_unsigned(unsigned: set[str], tree: Discovery) -> None:
    # Only the folders of this tree are asked about again; a decision about one that is
    # gone, or about another sub_graphs directory's, changes nothing here.
    present = unsigned & {node.folder.key for node in walk(tree.nodes)}
    if present:
        logger.warning(UNSIGNED, len(present))


def discover_approved_first(
    settings: Settings, store: ApprovalStore, *, remote: bool = True
) -> Discovery:
    """The folder tree; of same-named folders in one directory, the one decided on at its path.

    A folder dropped beside one you decided on never takes its place, whatever
    became of that decision since (changed, revoked). With `remote`, folders'
    remote configurations are resolved (see `remote_config`); else their files alone count.
    """
    return discover_tree(
        settings.sub_graphs_dir,
        prefer=lambda folder: RANKS[store.status(folder)],
        remote=RemoteConfigs.of(settings) if remote else None,
    )


def _save_unchanged(yes: list[ToolFolder], store: ApprovalStore) -> set[str]:
    """Save the yes for each folder still as it was asked about; the keys of the others."""
    unchanged = [folder for folder in yes if _hash_now(folder) == folder.digest]
    if unchanged:
        store.decide_all(unchanged, approved=True)
    # A yes for what was shown then must not approve that content later.
    return {folder.key for folder in yes} - {folder.key for folder in unchanged}


def _hash_now(folder: ToolFolder) -> str | None:
    try:
        return content_hash(folder.path)
    except (OSError, ValueError):  # unreadable or refused now: not what was approved
        return None


class _UntilInputEnds:
    """Passes questions on until the first end of input; after it, nothing is asked."""

    def __init__(self, ask: Ask) -> None:
        self.ask = ask
        self.ended = False

    def __call__(self, folder: ToolFolder, status: Status) -> bool | Later | None:
        if self.ended:
            return None
        answer = self.ask(folder, status)
        self.ended = answer is None
        return answer


class _Recorded:
    """Passes questions on, keeping the folders answered yes (saved only once re-hashed).

    A folder asked about again changed since the first question: it is shown as changed.
    """

    def __init__(self, ask: Ask) -> None:
        self.ask = ask
        self.asked: set[str] = set()
        self.yes: list[ToolFolder] = []

    def __call__(self, folder: ToolFolder, status: Status) -> bool | Later | None:
        if folder.key in self.asked:
            status = Status.CHANGED
        self.asked.add(folder.key)
        answer = self.ask(folder, status)
        if answer is True:
            self.yes.append(folder)
        return answer


def review(nodes: list[FolderNode], store: ApprovalStore, ask: Ask) -> set[str]:
    """Ask about every new or changed folder, parents before children; the approved keys.

    A child is only considered once its parent is approved. A no is saved at
    once; a yes is not (see `review_folders`: it is saved once the folder is
    hashed again). Once the input has ended, nothing more is asked and
    undecided folders stay unapproved (and are asked about again next time).
    """
    approved: set[str] = set()
    input_ended = False
    for node in _parents_first(nodes, approved):
        status = store.status(node.folder)
        if status in (Status.NEW, Status.CHANGED) and not input_ended:
            answer = ask(node.folder, status)
            if answer is None:
                input_ended = True
            elif answer is not LATER:
                if not answer:  # a no may always be saved: it lets nothing run
                    store.decide(node.folder, approved=False)
                status = Status.APPROVED if answer else Status.DENIED
        if status == Status.APPROVED:
            approved.add(node.folder.key)
    return approved


def _parents_first(nodes: list[FolderNode], approved: set[str]) -> Iterator[FolderNode]:
    for node in nodes:
        yield node
        if node.folder.key in approved:
            yield from _parents_first(node.children, approved)
