"""Which folder contents a worker may run: those approved, as the database records them too.

Your decisions live, signed, in `data/tool_registry/` (see `folders.approvals`);
a worker on another machine cannot check that signature, so each decision is
also recorded in the database (table `job_queue.approved_folders`, which only
the owner login reaches): when `chat`, `ask` or a worker starts, and when a
job is made for a folder. A worker loads a folder only at a content hash
approved there (and its parent agent's), and runs a job only when the job was
made with the very content it loaded, which is approved still: else it refuses
the job, saying why, on the request.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import text

from orchestrator.folders.approvals import ApprovalStore, Reviewed, discover_approved_first
from orchestrator.folders.discovery import Discovery, FolderNode, ToolFolder, walk
from orchestrator.settings import Settings
from orchestrator.store.engine import Database
from orchestrator.store.queue_schema import SCHEMA
from orchestrator.store.requests import OWNER

if TYPE_CHECKING:  # types only: `tools approve` records decisions without loading LangChain
    from langchain_core.tools import BaseTool

    from orchestrator.runtime import Orchestrator

# The latest decision about a content wins: one person's revocation holds for the whole team.
RECORD = text(
    f"""INSERT INTO {SCHEMA}.approved_folders
        (folder_key, digest, name, version, approved, decided_at, recorded_by)
    SELECT * FROM unnest(
        CAST(:keys AS text[]), CAST(:digests AS text[]), CAST(:names AS text[]),
        CAST(:versions AS text[]), CAST(:approved AS boolean[]), CAST(:at AS timestamptz[]),
        CAST(:by AS text[]))
    ON CONFLICT (folder_key, digest) DO UPDATE SET approved = excluded.approved,
        decided_at = excluded.decided_at, recorded_by = excluded.recorded_by, recorded_at = now()
    WHERE approved_folders.decided_at <= excluded.decided_at"""
)
APPROVED = text(
    f"SELECT folder_key, digest FROM {SCHEMA}.approved_folders WHERE approved AND folder_key = ANY(:keys)"
)
REFUSED = "{name} did not run on worker {worker}: {why}. Every worker needs the approved folders"
OTHER_COPY = "its copy of {key} has content {have}, not the approved {want} the call was made with"
UNAPPROVED_COPY = "its copy of {key} has content {have}, which the database does not approve (the call was made with {want})"
NO_COPY = "it has no folder {key}"
REVOKED = "{key} with content {want} is not approved in the database any more"


@dataclass(frozen=True)
class RecordedApproval:
    """One decision about a folder's content, as the database records it."""

    key: str
    digest: str
    name: str
    version: str
    approved: bool
    decided_at: datetime


def decisions_of(store: ApprovalStore, tree: Discovery) -> list[RecordedApproval]:
    """The signed decisions of `store` about the folders of `tree`."""
    found = []
    for node in walk(tree.nodes):
        decision = store.decision(node.folder.key)
        if decision is not None:
            found.append(
                RecordedApproval(
                    key=node.folder.key,
                    digest=decision.digest,
                    name=decision.name,
                    version=decision.version,
                    approved=decision.approved,
                    decided_at=decision.decided_at,
                )
            )
    return found


async def record(database: Database, decisions: list[RecordedApproval]) -> None:
    """Record `decisions` in the database (a later one there is kept)."""
    if not decisions:
        return
    values = {
        "keys": [d.key for d in decisions],
        "digests": [d.digest for d in decisions],
        "names": [d.name for d in decisions],
        "versions": [d.version for d in decisions],
        "approved": [d.approved for d in decisions],
        "at": [d.decided_at for d in decisions],
        "by": [OWNER] * len(decisions),
    }
    async with database.admin_transaction() as connection:
        await connection.execute(RECORD, values)


async def record_local_decisions(database: Database, settings: Settings) -> None:
    """Record every signed decision of this installation about the folders it finds."""
    store = ApprovalStore.of(settings)
    tree = discover_approved_first(settings, store, remote=False)
    await record(database, decisions_of(store, tree))


def approval_of(folder: ToolFolder) -> RecordedApproval:
    """The approval of `folder` as loaded (it is approved: it was loaded), to record."""
    return RecordedApproval(
        key=folder.key,
        digest=folder.digest,
        name=folder.name,
        version=folder.config.version,
        approved=True,
        decided_at=datetime.now(UTC),
    )


async def approved_contents(database: Database, keys: list[str]) -> set[tuple[str, str]]:
    """The (key, content hash) pairs of `keys` approved in the database."""
    async with database.admin_transaction() as connection:
        rows = await connection.execute(APPROVED, {"keys": keys})
        return {(row.folder_key, row.digest) for row in rows}


async def reviewed_by_database(database: Database, settings: Settings) -> Reviewed:
    """The folder tree here, and which folders to load: approved in the database at the content
    they have here, their parent agents too. MCP servers' folders do not run on workers."""
    # The folders' files alone: what the database approves (see docs/workers.md).
    tree = discover_approved_first(settings, ApprovalStore.of(settings), remote=False)
    approved = await approved_contents(database, [node.folder.key for node in walk(tree.nodes)])
    keys = set(_approved_nodes(tree.nodes, approved))
    return Reviewed(tree, keys)


def _approved_nodes(nodes: list[FolderNode], approved: set[tuple[str, str]]) -> Iterator[str]:
    for node in nodes:
        folder = node.folder
        if folder.config.mcp is None and (folder.key, folder.digest) in approved:
            yield folder.key
            yield from _approved_nodes(node.children, approved)


def tool_folders(runtime: Orchestrator) -> dict[int, ToolFolder]:
    """The folder of each folder tool of `runtime`, at every level, by the tool's id.

    A folder offered from its manifest counts its deferred tools, and its real ones
    once its first call imported it (see `sources.deferred`).
    """
    found = {}
    for loaded in runtime.loaded_folders():
        imported = loaded.imported()
        real = imported.langchain if imported is not None and imported is not loaded else []
        found.update({id(tool): loaded.folder for tool in [*loaded.langchain, *real]})
    return found


def folder_of(runtime: Orchestrator, tool: BaseTool) -> ToolFolder | None:
    """The folder `tool` comes from (None: a built-in, or another source's tool)."""
    return tool_folders(runtime).get(id(tool))


def refusal(
    name: str, *, key: str, want: str, loaded: str | None, found: str | None, approved: bool
) -> str | None:
    """Why this worker does not run a call of `key` made with content `want` (None: it runs it).

    `loaded` is the content of the copy it loaded (None: it loaded none),
    `found` that of its copy on disk (None: it has none), `approved` whether
    the database approves `want` now.
    """
    if loaded == want:
        why = None if approved else REVOKED.format(key=key, want=_short(want))
    elif loaded is not None:
        why = OTHER_COPY.format(key=key, have=_short(loaded), want=_short(want))
    elif found is not None:
        why = UNAPPROVED_COPY.format(key=key, have=_short(found), want=_short(want))
    else:
        why = NO_COPY.format(key=key)
    return None if why is None else REFUSED.format(name=name, worker=OWNER, why=why)


def _short(digest: str | None) -> str:
    return (digest or "")[:12]
