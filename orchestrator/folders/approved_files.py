"""What an approved folder held, kept so that a change to it can be judged.

Each decision keeps the SHA-256 of every file (see `FolderDecision.files`): a
changed folder lists its changed, added and removed files. An approval also
keeps a private copy of the folder's text files as approved (mode 0600 in a
0700 directory under the approvals): the question can then show the diff.
Only a file whose bytes still hash to what was approved is copied.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.folders.discovery import ToolFolder

COPIES_DIR = "approved"  # below the approvals' directory
MAX_FILE_BYTES = 256 * 1024  # larger files are listed, not copied
MAX_COPY_BYTES = 8 * 1024 * 1024  # of one folder's copy


@dataclass(frozen=True)
class FileChanges:
    """The files of a folder that differ from those approved, by their path in it."""

    changed: list[str]
    added: list[str]
    removed: list[str]

    @classmethod
    def between(cls, before: Mapping[str, str], after: Mapping[str, str]) -> FileChanges:
        """From the per-file hashes as approved (`before`) to those now (`after`)."""
        both = before.keys() & after.keys()
        return cls(
            changed=sorted(path for path in both if before[path] != after[path]),
            added=sorted(after.keys() - before.keys()),
            removed=sorted(before.keys() - after.keys()),
        )

    def lines(self) -> list[str]:
        """`changed: a.py, b.md`, and so on: one line per kind that has any."""
        kinds = (("changed", self.changed), ("added", self.added), ("removed", self.removed))
        return [f"{label}: {', '.join(paths)}" for label, paths in kinds if paths]


def keep_copy(directory: Path, folder: ToolFolder) -> None:
    """Keep the folder's text files as approved (best effort: a diff is a courtesy)."""
    texts: dict[str, str] = {}
    total = 0
    for rel, digest in sorted(folder.files.items()):
        text = _text_as_hashed(folder.path / rel, digest)
        if text is not None and total + len(text) <= MAX_COPY_BYTES:
            texts[rel] = text
            total += len(text)
    with contextlib.suppress(OSError):  # no copy: the question lists the files but shows no diff
        _write_private(_copy_path(directory, folder.key), json.dumps(texts))


def forget_copy(directory: Path, key: str) -> None:
    """Drop the copy of the folder `key`, if any."""
    with contextlib.suppress(OSError):
        _copy_path(directory, key).unlink()


def approved_texts(directory: Path, key: str) -> dict[str, str] | None:
    """The text files of the folder `key` as approved; None when no copy was kept."""
    try:
        loaded = json.loads(_copy_path(directory, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(loaded, dict):
        return None
    return {str(path): text for path, text in loaded.items() if isinstance(text, str)}


def unified_diff(before: Mapping[str, str], folder: ToolFolder, changes: FileChanges) -> list[str]:
    """The diff of each changed, added and removed file, from the copy to the folder now."""
    lines: list[str] = []
    for rel in [*changes.changed, *changes.added, *changes.removed]:
        old = before.get(rel)
        new = None if rel in changes.removed else _read_text(folder.path / rel)
        unknown_before = old is None and rel not in changes.added
        if unknown_before or (new is None and rel not in changes.removed):
            lines.append(f"{rel}: not text, or not kept: no diff")
            continue
        lines.extend(
            difflib.unified_diff(
                (old or "").splitlines(),
                (new or "").splitlines(),
                fromfile=f"approved/{rel}",
                tofile=f"now/{rel}",
                lineterm="",
            )
        )
    return lines


def _copy_path(directory: Path, key: str) -> Path:
    name = hashlib.sha256(key.encode()).hexdigest()[:32]  # a key may be long or odd
    return directory / COPIES_DIR / f"{name}.json"


def _text_as_hashed(path: Path, digest: str) -> str | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != digest:
        return None  # changed since it was hashed: not what was approved
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _read_text(path: Path) -> str | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)
