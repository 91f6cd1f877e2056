"""The served tools as MCP lists them, and the first listing: from the folders' signed manifests.

`mcp serve` answers its first `tools/list` before any folder is imported, the
database started or the model built: each approved top-level folder's tools as
its manifest recorded them at the start that last imported it (see
`sources.manifest`), held to the policy its config sets now, as `chat` offers
them. A folder whose tools only its import (or its server) can tell (an agent
with folders of its own, an MCP server, a sandboxed folder, one not imported
since it changed) leaves the first listing to the runtime. Nothing here
imports LangChain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mcp import types

from orchestrator.errors import UserError
from orchestrator.folders.approvals import Reviewed
from orchestrator.folders.discovery import FolderNode
from orchestrator.folders.isolation import in_process
from orchestrator.folders.sensitivity import SensitivityRules
from orchestrator.levels import Limits
from orchestrator.settings import Settings
from orchestrator.sources.manifest import Manifests, ToolEntry, offered

NO_SUCH_FOLDER = "No approved top-level tool folder {name!r} to serve ({served})"


def no_such_folder(agent: str, approved: Sequence[str]) -> UserError:
    """The error for `--agent NAME` naming none of the `approved` top-level folders."""
    names = ", ".join(sorted(approved))
    served = f"approved: {names}" if names else "none is approved"
    return UserError(NO_SUCH_FOLDER.format(name=agent, served=served))


def listed_tool(
    name: str,
    description: str,
    schema: Mapping[str, object],
    metadata: Mapping[str, object] | None,
    *,
    rules: SensitivityRules,
) -> types.Tool:
    """A tool as MCP describes one: its name, description, the schema of what a caller sets,
    and hints (a call that would need the person's decision in a chat is destructive)."""
    hints: dict[str, bool] = {}
    if rules.why(name, metadata) is not None:
        hints.update(readOnlyHint=False, destructiveHint=True)
    if (metadata or {}).get("idempotent"):
        hints["idempotentHint"] = True
    return types.Tool(
        name=name,
        description=description,
        inputSchema=dict(schema),
        annotations=types.ToolAnnotations.model_validate(hints) if hints else None,
    )


def offered_tools(
    settings: Settings, reviewed: Reviewed, *, agent: str | None = None
) -> list[types.Tool] | None:
    """The approved top-level folders' tools (with `agent`, that folder's) from their manifests;
    None when a folder's tools are known only once it is imported or its server started.

    Raises UserError when `agent` names no approved top-level folder.
    """
    top = [node for node in reviewed.tree.nodes if node.folder.key in reviewed.approved]
    if agent is not None:
        chosen = [node for node in top if agent in (node.folder.name, node.folder.key)]
        if not chosen:
            raise no_such_folder(agent, [node.folder.name for node in top])
        top = chosen[:1]
    manifests = Manifests()
    limits = Limits.from_settings(settings)
    rules = SensitivityRules.of(settings.sensitive_words)
    listed: list[types.Tool] = []
    for node in top:
        entries = _recorded(node, manifests, limits)
        if entries is None:
            return None
        listed += [
            listed_tool(e.name, e.description, e.schema, e.metadata, rules=rules) for e in entries
        ]
    return listed


def _recorded(node: FolderNode, manifests: Manifests, limits: Limits) -> list[ToolEntry] | None:
    """The folder's tools as the runtime offers them unimported (see `LevelLoader._deferred`)."""
    config = node.folder.config
    if node.children or config.mcp is not None or in_process(node.folder) or config.db.local:
        return None
    entries = manifests.read(node.folder)
    if entries is None:
        return None
    timeout = limits.overridden(config.limits).timeout_seconds
    return offered(entries, node.folder, timeout_seconds=timeout)
