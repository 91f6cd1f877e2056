"""The example folders shipped in the repository's `sub_graphs/`, known by their content hash.

A folder counts as shipped when its path key and its digest are those of
`shipped.json` (written by `scripts/shipped_manifest.py` from the repository's
`sub_graphs/`): a shipped folder someone edited, or a folder copied under a
shipped name, is not. Works the same for an installed package (no git needed).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from orchestrator.folders.discovery import ToolFolder, discover_tree, walk

MANIFEST = Path(__file__).with_name("shipped.json")


@cache
def shipped_digests() -> dict[str, str]:
    """The path key and digest of every shipped folder."""
    try:
        loaded = json.loads(MANIFEST.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(key): str(digest) for key, digest in loaded.items()}


def is_shipped(folder: ToolFolder) -> bool:
    """True for a shipped folder, exactly as shipped."""
    return shipped_digests().get(folder.key) == folder.digest


def manifest_of(sub_graphs: Path) -> dict[str, str]:
    """The manifest of the folders in `sub_graphs` (the repository's, when shipping)."""
    return {node.folder.key: node.folder.digest for node in walk(discover_tree(sub_graphs).nodes)}
