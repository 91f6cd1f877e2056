"""Why a folder approved earlier is new again: its code could not be loaded.

A folder whose code fails to load loses its approval (it is asked about again once it
may work). So that `tools list` can say why it shows as new, the reason is kept here,
beside the approvals, with the content it was about: changed content was never tried.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from orchestrator.folders.discovery import ToolFolder
from orchestrator.private import private_dir

LOAD_FAILURES_FILE = "load_failures.json"
REASON_CHARS = 500


def remember_failure(registry: Path, folder: ToolFolder, reason: str) -> None:
    """Keep why `folder`, as it is now, could not be loaded (a failure to save is not one)."""
    failures = _read(registry)
    failures[folder.key] = {"digest": folder.digest, "reason": reason[:REASON_CHARS]}
    try:
        private_dir(registry)
        fd, temporary = tempfile.mkstemp(dir=registry, prefix=".load-failures-")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(failures, file)
        os.replace(temporary, registry / LOAD_FAILURES_FILE)
    except OSError:
        return  # only `tools list` reads it: the folder is skipped and said so already


def failure_of(registry: Path, folder: ToolFolder) -> str | None:
    """Why `folder`, with the content it has now, could not be loaded last; None if it was not."""
    entry = _read(registry).get(folder.key)
    if not isinstance(entry, dict) or entry.get("digest") != folder.digest:
        return None
    reason = entry.get("reason")
    return reason if isinstance(reason, str) else None


def _read(registry: Path) -> dict[str, object]:
    try:
        body = json.loads((registry / LOAD_FAILURES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}
