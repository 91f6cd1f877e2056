"""The management commands: tools, new-agent, db, requests."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import (
    JsonOption,
    UserOption,
    err,
    out,
    settings_or_exit,
    user_errors,
    with_database,
)
from orchestrator.cli.scaffold import Kind, children_directory, create_agent_folder
from orchestrator.cli.tool_install import install_tool
from orchestrator.errors import ConfigError, UserError
from orchestrator.folders.approvals import ApprovalStore, Status, discover_approved_first
from orchestrator.folders.discovery import Discovery, FolderNode, ToolFolder, walk
from orchestrator.folders.naming import find_in_tree
from orchestrator.terminal.folder_reach import describe_folder
from orchestrator.terminal.text import display_path, one_line, shown

if TYPE_CHECKING:
    from orchestrator.settings import Settings
    from orchestrator.store.engine import Database
    from orchestrator.store.index_state import SearchIndexes
    from orchestrator.store.request_list import ListedRequest

tools_app = typer.Typer(
    no_args_is_help=True, help="List, approve, revoke, show and install tool folders."
)
db_app = typer.Typer(no_args_is_help=True, help="The database: schema, status, embeddings.")
requests_app = typer.Typer(no_args_is_help=True, help="Tool calls, as the request log kept them.")
MCP_MARK = "  (MCP server)"  # in `tools list`, after the path of such a folder
LOAD_FAILED = "approved before, but its code could not be loaded"
FOLDER_HELP = "The folder: its tool name, its path (a/b when nested), or its path as `tools list` prints it."


@tools_app.command("list")
def list_tools(as_json: JsonOption = False) -> None:
    """Show every tool folder, its approval status and path; imports nothing."""
    with user_errors():
        settings = settings_or_exit()
        store = ApprovalStore.of(settings)
        tree = discover_approved_first(settings, store)  # the folders startup would use
    rows = [(node.folder, store.status(node.folder)) for node in walk(tree.nodes)]
    if as_json:
        failures = {folder.key: _load_failure(store, folder, status) for folder, status in rows}
        print(json.dumps(_listing_json(rows, tree, failures)))  # ASCII: no raw control characters
        return
    if not rows and not tree.problems:
        err.print(f"No tool folders in {display_path(settings.sub_graphs_dir)}.")
    for folder, status in rows:
        indent = "  " * folder.depth
        out.print(
            f"{indent}[bold]{shown(folder.name)}[/bold] {shown(folder.config.version)}  "
            f"{status}  {shown(display_path(folder.path))}{MCP_MARK if folder.config.mcp else ''}",
            highlight=False,
        )
        if failed := _load_failure(store, folder, status):
            out.print(f"{indent}  {LOAD_FAILED}: {shown(failed)}", highlight=False)
    for problem in tree.problems:
        out.print(
            f"[red]skipped[/red] {shown(display_path(problem.path))}: {shown(problem.reason)}",
            highlight=False,
        )


@tools_app.command("approve")
def approve_tool(name: Annotated[str, typer.Argument(help=FOLDER_HELP)]) -> None:
    """Approve a tool folder's current content."""
    _decide(name, approved=True)


@tools_app.command("revoke")
def revoke_tool(name: Annotated[str, typer.Argument(help=FOLDER_HELP)]) -> None:
    """Withdraw the approval of a tool folder; it is no longer loaded."""
    _decide(name, approved=False)


tools_app.command("install")(install_tool)


@tools_app.command("show")
def show_tool(
    name: Annotated[str, typer.Argument(help=FOLDER_HELP)],
    as_json: JsonOption = False,
) -> None:
    """Show a folder's resolved configuration: model, database, limits, log level, actions.

    Secrets are named, never shown. The folder's code is imported (to list its
    actions) only if it is approved; a folder held in its own process is asked there.
    """
    from orchestrator.cli.tool_show import folder_report, print_report

    with user_errors():
        settings = settings_or_exit()
        store = ApprovalStore.of(settings)
        tree = discover_approved_first(settings, store)
        report = folder_report(settings, tree, store, find_in_tree(tree, name))
    print_report(report, as_json=as_json)


def new_agent(
    name: Annotated[str, typer.Argument(help="The tool's name, e.g. weather_agent.")],
    kind: Annotated[
        Kind,
        typer.Option(
            help="tool: a Python tool with a test; agent: an agent with instructions and "
            "no Python, over the tools in its src/sub_graphs/."
        ),
    ] = "tool",
    parent: Annotated[
        str | None,
        typer.Option(
            "--in",
            metavar="PARENT",
            help="Put it under the agent PARENT (its src/sub_graphs/): a folder name as "
            "`tools list` shows it, or a path.",
        ),
    ] = None,
) -> None:
    """Create sub_graphs/NAME/ (or PARENT's src/sub_graphs/NAME/) from a template: a tool and
    its test, or an agent with no Python."""
    with user_errors():
        directory = settings_or_exit().sub_graphs_dir
        if parent is not None:
            directory = children_directory(parent, sub_graphs=directory)
        folder = create_agent_folder(name, directory=directory, kind=kind)
    if kind == "agent":
        out.print(
            f"created {shown(display_path(folder))}; put its tool folders in "
            f"{shown(display_path(folder))}/src/sub_graphs/",
            highlight=False,
        )
        return
    pytest = display_path(Path(sys.executable).parent / "pytest")
    out.print(
        f"created {shown(display_path(folder))}; run its test with: "
        f"{shown(pytest)} {shown(display_path(folder))}/tests",
        highlight=False,
    )


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or upgrade the schema (also done at every start)."""

    from orchestrator.store.queue_schema import upgrade_all

    async def run(database: Database) -> None:
        done = ", ".join(await upgrade_all(database))
        out.print(f"{database.where}: {f'applied {done}' if done else 'up to date'}", highlight=False)

    with_database(run)


@db_app.command("status")
def db_status() -> None:
    """Whether the embedded server runs (since and until when), where the database is, its schema
    version, and how many messages are embedded."""
    from orchestrator.store.index_state import search_indexes
    from orchestrator.store.messages import message_counts
    from orchestrator.store.migrations import applied_migrations, schema_status
    from orchestrator.store.queue_schema import COMPONENT, queue_migrations

    settings = settings_or_exit()
    if not settings.database_url:
        from orchestrator.store.warm_server import server_state

        state = server_state(settings.data_dir.resolve())
        out.print(f"embedded PostgreSQL: {state.describe()}", highlight=False)
        if state.postmaster is None:
            return  # a status does not start it

    async def run(database: Database) -> None:
        status = await schema_status(database)
        out.print(f"database: {database.where}", highlight=False)
        out.print(f"schema version: {status.version} (pending: {len(status.pending)})")
        queued = (await applied_migrations(database)).get(COMPONENT, set())
        waiting = [m for m in queue_migrations() if m.version not in queued]
        out.print(f"job queue schema version: {max(queued, default=0)} (pending: {len(waiting)})")
        if not status.pending:
            counts = await message_counts(database)
            out.print(
                f"messages to embed (yours and the assistant's): {counts.total} "
                f"({counts.embedded} embedded{_by_model(counts.by_model)})",
                highlight=False,
            )
            waiting = counts.total - counts.embedded
            later = f" (the next chat embeds them, or now: {EMBED_NOW})" if waiting else ""
            out.print(f"waiting for their vectors: {waiting}{later}", highlight=False)
            _print_search_indexes(await search_indexes(database))

    with_database(run)


def _print_search_indexes(state: SearchIndexes) -> None:
    out.print("search indexes:", highlight=False)
    for index in state.indexes:
        out.print(f"  {index.describe()}", highlight=False)
    if state.all_visible is not None:
        out.print(
            f"  {state.all_visible:.0%} of the table's pages all-visible at the last vacuum "
            "(there exact search reads its index alone)",
            highlight=False,
        )


def _by_model(by_model: dict[str, int]) -> str:
    """Which models made the vectors, when more than one did (after a change of model)."""
    if len(by_model) < 2:
        return ""
    made = ", ".join(f"{count} by {model}" for model, count in sorted(by_model.items()))
    return f": {made}; `orchestrator db reembed` makes them all with the configured model"


EMBED_NOW = "orchestrator db embed"


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded PostgreSQL now (a clean, fast shutdown); the next command starts it again."""
    from orchestrator.store.warm_server import stop_server

    settings = settings_or_exit()
    if settings.database_url:
        err.print("DATABASE_URL names an external server: orchestrator does not stop it", highlight=False)
        raise typer.Exit(1)
    stopped = stop_server(settings.data_dir.resolve())
    if stopped is None:
        out.print("the embedded PostgreSQL is not running", highlight=False)
        return
    postmaster, users = stopped
    using = f"; {users} running command{'s' if users > 1 else ''} lost it" if users else ""
    out.print(f"stopped the embedded PostgreSQL (pid {postmaster.process.pid}){using}", highlight=False)


@db_app.command("keep", hidden=True)
def db_keep(
    data_dir: Annotated[Path, typer.Argument(help="The data directory whose server to keep.")],
    idle_minutes: Annotated[float, typer.Option(min=0.0, help="Stop it after this long unused.")],
    lock_fd: Annotated[int, typer.Option(help="The descriptor holding the keeper's lock.")],
    postmaster: Annotated[int, typer.Option(help="The server's pid, as its starter saw it.")],
) -> None:
    """Keep the embedded PostgreSQL of DATA_DIR until it has been unused IDLE_MINUTES, then stop it.

    Started, detached, by the commands that use the server; not for people.
    """
    from orchestrator.settings import load_settings
    from orchestrator.store.keeper_embedding import WaitingEmbedder
    from orchestrator.store.warm_server import keep

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        # The command that started it gave its environment and working directory.
        embed: WaitingEmbedder | None = WaitingEmbedder(load_settings())
    except UserError as error:  # the commands say it; the server is kept regardless
        logging.getLogger(__name__).warning("no embedding here: %s", error)
        embed = None
    try:
        ended = keep(data_dir, idle_minutes=idle_minutes, lock_fd=lock_fd, postmaster=postmaster, after_left=embed)
    finally:
        if embed is not None:
            embed.close()
    print(f"{datetime.now():%Y-%m-%d %H:%M:%S} {ended}", flush=True)  # to its log


@db_app.command("embed")
def db_embed(
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress line.")] = False,
) -> None:
    """Embed the stored messages that wait for a vector (a short run starts this when it ends)."""
    from orchestrator.store.embed_later import embedding_lock
    from orchestrator.store.embeddings import NO_EMBEDDER, EmbeddingWorker, build_embedder
    from orchestrator.store.migrations import upgrade

    settings = settings_or_exit()

    async def run(database: Database) -> None:
        embedder = build_embedder(settings)
        if embedder is None:
            raise ConfigError(NO_EMBEDDER)
        with embedding_lock(settings.data_dir) as mine:
            if not mine:
                out.print("another process is embedding the waiting messages")
                return
            await upgrade(database)
            worker = EmbeddingWorker(database, embedder)
            status = nullcontext() if quiet else err.status("[dim]embedding waiting messages…[/dim]")
            with status:
                count = await worker.run_once()
            close = getattr(embedder.embeddings, "close", None)
            if callable(close):
                close()  # the local model's process, in order
        out.print(f"embedded {count} waiting messages with {embedder.vectors_name}")

    with_database(run)


@db_app.command("reembed")
def db_reembed() -> None:
    """Embed every stored message again with the configured embedder (after a model change)."""
    from rich.progress import Progress

    from orchestrator.store.embeddings import NO_EMBEDDER, build_embedder, reembed
    from orchestrator.store.migrations import upgrade

    async def run(database: Database) -> None:
        embedder = build_embedder(settings_or_exit())
        if embedder is None:
            raise ConfigError(NO_EMBEDDER)
        await upgrade(database)
        with Progress(console=err, transient=True) as progress:
            bar = progress.add_task("embedding messages", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(bar, completed=done, total=total)

            count = await reembed(database, embedder, on_progress=advance)
        out.print(f"re-embedded {count} messages with {embedder.vectors_name}")

    with_database(run)


@requests_app.command("show")
def requests_show(
    request_id: Annotated[str, typer.Argument(help="A request id, from ask --json or the log.")],
    user: UserOption = "local",
    waterfall: Annotated[
        bool,
        typer.Option(
            "--waterfall", help="Draw it as a timeline: each model and tool call a bar on one axis."
        ),
    ] = False,
) -> None:
    """Print the tree of tool calls under a request, each with its events and their times."""
    from orchestrator.cli.request_events import event_line
    from orchestrator.store.requests import events_by_request, request_tree
    from orchestrator.tools.results import READ_RESULT_TOOL

    if waterfall:
        with_database(lambda database: _show_waterfall(database, request_id, user=user))
        return

    async def run(database: Database) -> None:
        nodes = await request_tree(database, await _one_request(database, request_id, user=user), user_id=user)
        if not nodes:
            raise UserError(f"No request {request_id} of user {user}.")
        ids = [node.request_id for node in nodes]
        events = await events_by_request(database, ids, user_id=user)
        for node in nodes:
            state = f"{node.outcome} ({node.status})" if node.outcome else node.status
            out.print(
                f"{'  ' * node.depth}[bold]{escape(shown(node.name))}[/bold] "
                f"{state}  {node.request_id}  {escape(one_line(node.message))}",
                highlight=False,
            )
            if node.result_handle is not None:
                out.print(
                    f"{'  ' * (node.depth + 2)}whole result kept as {node.result_handle} "
                    f"(the model reads it with {READ_RESULT_TOOL})",
                    highlight=False,
                )
            for event in events.get(node.request_id, []):
                out.print(f"{'  ' * (node.depth + 2)}{event_line(event)}", highlight=False)

    with_database(run)


async def _one_request(database: Database, given: str, *, user: str) -> str:
    """The id of the user's request that is, or alone starts with, `given` (as `jobs show`)."""
    from orchestrator.store.requests import requests_starting

    found = await requests_starting(database, given, user_id=user)
    if not found:
        raise UserError(f"No request {given} of user {user}.")
    if found[0] != given and len(found) > 1:
        raise UserError(f"{given} starts several requests' ids: {', '.join(found[:5])}")
    return found[0]


async def _show_waterfall(database: Database, request_id: str, *, user: str) -> None:
    from orchestrator.store.timeline import request_timeline
    from orchestrator.terminal.waterfall import waterfall

    rows = await request_timeline(database, await _one_request(database, request_id, user=user), user_id=user)
    if not rows:
        raise UserError(f"No request {request_id} of user {user}.")
    for line in waterfall(rows, columns=out.width):
        out.print(line, highlight=False)


@requests_app.command("list")
def requests_list(
    user: UserOption = "local",
    session: Annotated[str | None, typer.Option("--session", "-s", help="Of this session only.")] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            help="From this date or time on (YYYY-MM-DD[THH:MM]).",
            formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"],
        ),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """List your requests at the top of their trees, newest first (then `requests show ID`)."""
    from orchestrator.store.request_list import recent_requests

    async def run(database: Database) -> None:
        found = await recent_requests(
            database, user_id=user, session_id=session, since=_aware(since), limit=limit
        )
        if as_json:
            out.print_json(data=[_listed_json(r) for r in found])
            return
        if not found:
            out.print("No requests.")
        for row in found:
            out.print(
                f"{row.request_id}  {row.created_at:%Y-%m-%d %H:%M:%S}  "
                f"{escape(shown(row.name))}  {escape(row.outcome or row.status)}  "
                f"{row.seconds:.2f}s  {escape(shown(row.session_id or ''))}",
                highlight=False,
            )

    with_database(run)


def _aware(moment: datetime | None) -> datetime | None:
    """A time given without a zone is the local time."""
    return moment.astimezone() if moment is not None and moment.tzinfo is None else moment


def _listed_json(row: ListedRequest) -> dict[str, object]:
    return {
        "request_id": row.request_id,
        "session_id": row.session_id,
        "name": row.name,
        "tool": row.tool,
        "action": row.action,
        "status": row.outcome or row.status,
        "created_at": row.created_at.isoformat(),
        "seconds": round(row.seconds, 3),
    }


def _decide(name: str, *, approved: bool) -> None:
    with user_errors():
        settings = settings_or_exit()
        store = ApprovalStore.of(settings)
        folder = find_in_tree(discover_approved_first(settings, store), name)
        store.decide(folder, approved=approved)
    verdict = "approved" if approved else "revoked"
    out.print(f"{verdict}: {describe_folder(folder)}", highlight=False)
    if approved and folder.config.mcp is not None:
        from orchestrator.cli.server_approval import approve_server

        with user_errors():
            approve_server(settings, folder, store)
    _tell_the_workers(settings, folder, store)


def _tell_the_workers(settings: Settings, folder: ToolFolder, store: ApprovalStore) -> None:
    """Record the decision in an external database at once, for the workers that check it.

    The embedded database learns it when `chat`, `ask` or a worker next starts
    (starting it here would make this quick command slow).
    """
    if not settings.database_url:
        return
    from orchestrator.jobs.trust import decisions_of, record
    from orchestrator.store.engine import Database
    from orchestrator.store.queue_schema import upgrade_all

    async def run() -> None:
        database = Database.from_settings(settings)
        try:
            await upgrade_all(database)
            await record(database, decisions_of(store, Discovery(nodes=[FolderNode(folder)])))
        finally:
            await database.close()

    try:
        asyncio.run(run())
    except Exception as error:  # the decision stands here; the workers learn it at the next start
        line = f"not recorded in the database for the workers yet ({type(error).__name__}: {error})"
        err.print(f"[yellow]note:[/yellow] {escape(one_line(line))}", highlight=False)


def _load_failure(store: ApprovalStore, folder: ToolFolder, status: Status) -> str | None:
    """Why a folder approved earlier is new again: its code could not be loaded then."""
    from orchestrator.folders.load_failures import failure_of

    return failure_of(store.path.parent, folder) if status == Status.NEW else None


def _listing_json(
    rows: list[tuple[ToolFolder, Status]], tree: Discovery, failures: dict[str, str | None]
) -> dict[str, object]:
    return {
        "tools": [
            {
                "name": folder.name,
                "version": folder.config.version,
                "status": str(status),
                "description": folder.config.description,
                "capabilities": folder.config.capabilities,
                "key": folder.key,
                "path": str(folder.path),
                "depth": folder.depth,
                "load_failed": failures.get(folder.key),
            }
            for folder, status in rows
        ],
        "problems": [{"path": str(p.path), "reason": p.reason} for p in tree.problems],
    }


