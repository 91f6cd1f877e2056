"""The management commands: tools, new-agent, db, requests."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.markup import escape

from orchestrator.cli_common import (
    JsonOption,
    UserOption,
    err,
    one_line,
    out,
    settings_or_exit,
    user_errors,
    with_database,
)
from orchestrator.console import describe_folder, display_path
from orchestrator.errors import ConfigError, UserError
from orchestrator.runtime import approval_store
from orchestrator.scaffold import create_agent_folder
from orchestrator.store.embeddings import NO_EMBEDDER, build_embedder, reembed
from orchestrator.store.engine import Database
from orchestrator.store.messages import message_counts
from orchestrator.store.migrations import schema_status, upgrade
from orchestrator.store.requests import request_tree
from orchestrator.tools.discovery import Discovery, ToolFolder, discover_tree, walk

tools_app = typer.Typer(no_args_is_help=True, help="List, approve and revoke tool folders.")
db_app = typer.Typer(no_args_is_help=True, help="The database: schema, status, embeddings.")
requests_app = typer.Typer(no_args_is_help=True, help="Tool calls, as the request log kept them.")


@tools_app.command("list")
def list_tools(as_json: JsonOption = False) -> None:
    """Show every tool folder, its approval status and path; imports nothing."""
    with user_errors():
        settings = settings_or_exit()
        tree = discover_tree(settings.sub_graphs_dir)
        store = approval_store(settings)
    rows = [(node.folder, store.status(node.folder)) for node in walk(tree.nodes)]
    if as_json:
        print(json.dumps(_listing_json(rows, tree), ensure_ascii=False))
        return
    if not rows and not tree.problems:
        err.print(f"No tool folders in {display_path(settings.sub_graphs_dir)}.")
    for folder, status in rows:
        indent = "  " * folder.depth
        out.print(
            f"{indent}[bold]{escape(folder.name)}[/bold] {escape(folder.config.version)}  "
            f"{status}  {escape(display_path(folder.path))}",
            highlight=False,
        )
    for problem in tree.problems:
        out.print(f"[red]skipped[/red] {escape(display_path(problem.path))}: {escape(problem.reason)}")


@tools_app.command("approve")
def approve_tool(name: Annotated[str, typer.Argument(help="Tool name, or its path key.")]) -> None:
    """Approve a tool folder's current content."""
    _decide(name, approved=True)


@tools_app.command("revoke")
def revoke_tool(name: Annotated[str, typer.Argument(help="Tool name, or its path key.")]) -> None:
    """Withdraw the approval of a tool folder; it is no longer loaded."""
    _decide(name, approved=False)


def new_agent(name: Annotated[str, typer.Argument(help="The tool's name, e.g. weather_agent.")]) -> None:
    """Create sub_graphs/NAME/ from a template: config, entry point, README and a test."""
    with user_errors():
        folder = create_agent_folder(name, directory=settings_or_exit().sub_graphs_dir)
    out.print(f"created {display_path(folder)}; run its test with: pytest {display_path(folder)}/tests")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or upgrade the schema (also done at every start)."""

    async def run(database: Database) -> None:
        applied = await upgrade(database)
        done = ", ".join(f"{m.version} ({m.description})" for m in applied) or "nothing to do"
        out.print(f"{database.where}: applied {done}", highlight=False)

    with_database(run)


@db_app.command("status")
def db_status() -> None:
    """Where the database is, its schema version, and how many messages are embedded."""

    async def run(database: Database) -> None:
        status = await schema_status(database)
        out.print(f"database: {database.where}", highlight=False)
        out.print(f"schema version: {status.version} (pending: {len(status.pending)})")
        if not status.pending:
            total, embedded = await message_counts(database)
            out.print(f"messages: {total} ({embedded} embedded)")

    with_database(run)


@db_app.command("reembed")
def db_reembed() -> None:
    """Embed every stored message again with the configured embedder (after a model change)."""

    async def run(database: Database) -> None:
        embedder = build_embedder(settings_or_exit())
        if embedder is None:
            raise ConfigError(NO_EMBEDDER)
        await upgrade(database)
        out.print(f"re-embedded {await reembed(database, embedder)} messages with {embedder.model_name}")

    with_database(run)


@requests_app.command("show")
def requests_show(
    request_id: Annotated[str, typer.Argument(help="A request id, from ask --json or the log.")],
    user: UserOption = "local",
) -> None:
    """Print the tree of tool calls under a request."""

    async def run(database: Database) -> None:
        nodes = await request_tree(database, request_id, user_id=user)
        if not nodes:
            raise UserError(f"No request {request_id} of user {user}.")
        for node in nodes:
            action = f".{node.action}" if node.action else ""
            state = f"{node.outcome} ({node.status})" if node.outcome else node.status
            out.print(
                f"{'  ' * node.depth}[bold]{escape(node.tool)}{escape(action)}[/bold] "
                f"{state}  {node.request_id}  {escape(one_line(node.message))}",
                highlight=False,
            )

    with_database(run)


def _decide(name: str, *, approved: bool) -> None:
    with user_errors():
        settings = settings_or_exit()
        folder = _find_folder(discover_tree(settings.sub_graphs_dir), name)
        approval_store(settings).decide(folder, approved=approved)
    verdict = "approved" if approved else "revoked"
    out.print(f"{verdict}: {describe_folder(folder)}", highlight=False)


def _find_folder(tree: Discovery, name: str) -> ToolFolder:
    matches = [n.folder for n in walk(tree.nodes) if name in (n.folder.name, n.folder.key)]
    if not matches:
        raise UserError(f"No tool folder named {name!r}; `orchestrator tools list` shows them.")
    if len(matches) > 1:
        keys = ", ".join(folder.key for folder in matches)
        raise UserError(f"{name!r} names several folders ({keys}); give the one you mean.")
    return matches[0]


def _listing_json(rows: list[tuple[ToolFolder, str]], tree: Discovery) -> dict[str, object]:
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
            }
            for folder, status in rows
        ],
        "problems": [{"path": str(p.path), "reason": p.reason} for p in tree.problems],
    }


