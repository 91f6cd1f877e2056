"""What the folder question knows of a folder's approved past: which files changed, and the diff."""

from __future__ import annotations

from orchestrator.folders.approvals import ApprovalStore
from orchestrator.folders.approved_files import FileChanges, approved_texts, unified_diff
from orchestrator.folders.discovery import ToolFolder
from orchestrator.settings import Settings
from orchestrator.terminal.folder_reach import covered_text

NO_COPY = "no copy of the approved files was kept (approved by an earlier version): no diff"


class FolderHistory:
    """The user's earlier decisions, read for the questions (the decisions are `review`'s)."""

    def __init__(self, store: ApprovalStore) -> None:
        self.store = store
        self.first_use = store.first_use  # as it was before this start's answers

    @classmethod
    def of(cls, settings: Settings) -> FolderHistory:
        """The history in the user's data directory."""
        return cls(ApprovalStore.of(settings))

    def changes(self, folder: ToolFolder) -> FileChanges | None:
        """The files changed, added and removed since the last decision; None if unknown."""
        decision = self.store.decision(folder.key)
        if decision is None or not decision.files:
            return None
        return FileChanges.between(decision.files, folder.files)

    def remote_changes(self, folder: ToolFolder) -> list[str]:
        """What approval covers of its remote copy, as it was when decided on, where it differs."""
        decision = self.store.decision(folder.key)
        if decision is None or folder.remote is None or folder.remote_digest == decision.remote:
            return []
        then, now = decision.remote_covered or {}, folder.remote.covered or {}
        return [
            f"the remote copy's {name} was {covered_text(name, then.get(name))} when you decided"
            for name in sorted({*then, *now})
            if then.get(name) != now.get(name)
        ]

    def diff(self, folder: ToolFolder, changes: FileChanges) -> list[str]:
        """A unified diff of the changes, from the files as approved to the folder now."""
        texts = approved_texts(self.store.path.parent, folder.key)
        if texts is None:
            return [NO_COPY]
        return unified_diff(texts, folder, changes)
