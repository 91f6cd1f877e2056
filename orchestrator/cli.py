"""The `orchestrator` command: chat, ask, tools, new-agent, db, requests."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from orchestrator.console import ApprovalPrompt, describe_folder, display_path
from orchestrator.errors import ConfigError, UserError
from orchestrator.llm.offline import OFFLINE_NOTICE
from orchestrator.repl import (
    ChatRepl,
    failure_line,
    rendered_turn,
    resume_turn,
    show_background_results,
)
from orchestrator.runtime import Runtime, approval_store, use_tool_threads
from orchestrator.recovery import recover
from orchestrator.scaffold import create_agent_folder
from orchestrator.session import Session
from orchestrator.settings import Settings, load_settings
from orchestrator.store.embeddings import NO_EMBEDDER, build_embedder, reembed
from orchestrator.store.engine import Database
from orchestrator.store.messages import message_counts
from orchestrator.store.migrations import schema_status, upgrade
from orchestrator.store.requests import request_tree
from orchestrator.store.storage import Storage
from orchestrator.tools.discovery import Discovery, ToolFolder, discover_tree, walk

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="A hierarchical agent orchestrator on LangGraph, in your terminal.",
)
tools_app = typer.Typer(no_args_is_help=True, help="List, approve and revoke tool folders.")
app.add_typer(tools_app, name="tools")
db_app = typer.Typer(no_args_is_help=True, help="The database: schema, status, embeddings.")
app.add_typer(db_app, name="db")
requests_app = typer.Typer(no_args_is_help=True, help="Tool calls, as the request log kept them.")
app.add_typer(requests_app, name="requests")

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

UserOption = Annotated[str, typer.Option("--user", "-u", help="Whose conversation this is.")]
SessionOption = Annotated[
    str | None, typer.Option("--session", "-s", help="Continue this session id (default: new).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


@app.command()
def chat(user: UserOption = "local", session: SessionOption = None) -> None:
    """Chat with the assistant; lines may be piped in, end of input ends the session."""

    async def run(runtime: Runtime) -> int:
        conversation = runtime.session(user_id=user, session_id=session)
        repl = ChatRepl(runtime=runtime, session=conversation, out=out, err=err)
        await _recover(runtime, user)
        if not await resume_turn(conversation, out=out, err=err):
            return 1
        return await repl.run()

    raise typer.Exit(_run(run))


@app.command()
def ask(
    text: Annotated[str, typer.Argument(help="The message to send.")],
    user: UserOption = "local",
    session: SessionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send one message and print the answer (--json: answer, tool_calls, iterations)."""

    async def run(runtime: Runtime) -> int:
        conversation = runtime.session(user_id=user, session_id=session)
        if as_json:
            return await _ask_json(runtime, conversation, text)
        show_background_results(runtime, conversation, out=out, err=err)
        await _recover(runtime, user)
        if not await resume_turn(conversation, out=out, err=err):
            return 1
        answered = await rendered_turn(conversation, text, out=out, err=err)
        await _wait_for_tasks(runtime, conversation)
        return 0 if answered else 1

    raise typer.Exit(_run(run))


@tools_app.command("list")
def list_tools(as_json: JsonOption = False) -> None:
    """Show every tool folder, its approval status and path; imports nothing."""
    with _user_errors():
        settings = _settings()
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


@app.command("new-agent")
def new_agent(name: Annotated[str, typer.Argument(help="The tool's name, e.g. weather_agent.")]) -> None:
    """Create sub_graphs/NAME/ from a template: config, entry point, README and a test."""
    with _user_errors():
        folder = create_agent_folder(name, directory=_settings().sub_graphs_dir)
    out.print(f"created {display_path(folder)}; run its test with: pytest {display_path(folder)}/tests")


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or upgrade the schema (also done at every start)."""

    async def run(database: Database) -> None:
        applied = await upgrade(database)
        done = ", ".join(f"{m.version} ({m.description})" for m in applied) or "nothing to do"
        out.print(f"{database.where}: applied {done}", highlight=False)

    _with_database(run)


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

    _with_database(run)


@db_app.command("reembed")
def db_reembed() -> None:
    """Embed every stored message again with the configured embedder (after a model change)."""

    async def run(database: Database) -> None:
        embedder = build_embedder(_settings())
        if embedder is None:
            raise ConfigError(NO_EMBEDDER)
        await upgrade(database)
        out.print(f"re-embedded {await reembed(database, embedder)} messages with {embedder.model_name}")

    _with_database(run)


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
                f"{state}  {node.request_id}  {escape(_one_line(node.message))}",
                highlight=False,
            )

    _with_database(run)


def _with_database(command: Callable[[Database], Awaitable[None]]) -> None:
    async def run() -> None:
        database = await asyncio.to_thread(Database.from_settings, _settings())
        try:
            await command(database)
        finally:
            await database.close()

    with _user_errors():
        asyncio.run(run())


def _one_line(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _decide(name: str, *, approved: bool) -> None:
    with _user_errors():
        settings = _settings()
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


async def _ask_json(runtime: Runtime, session: Session, text: str) -> int:
    follow_ups: list[dict[str, object]] = []
    session.on_follow_up = lambda task, result: follow_ups.append(
        {"task_id": task.task_id, "tool": task.tool, "status": task.status, **result.to_json()}
    )
    try:
        await _recover(runtime, session.user_id)
        if await session.open():
            await session.resume()  # an interrupted turn is finished first, quietly
        result = await session.run(text)
        await _wait_for_tasks(runtime, session)
    except Exception as error:
        line = failure_line(error)
        err.print(f"error: {line}", markup=False, highlight=False)
        print(json.dumps({"error": line, "session_id": session.session_id}))
        return 1
    body = {
        **result.to_json(),
        "follow_ups": follow_ups,
        "session_id": session.session_id,
        "user_id": session.user_id,
    }
    print(json.dumps(body, ensure_ascii=False, default=str))
    return 0


async def _recover(runtime: Runtime, user_id: str) -> None:
    """Tell the user what became of the calls a stopped process left running."""
    for item in await recover(runtime, user_id=user_id):
        what = "running it again" if item.outcome == "requeued" else "marked failed"
        err.print(
            f"[yellow]note:[/yellow] {escape(item.call.call_name)} ({item.call.request_id}) "
            f"was left running by a stopped process: {what}",
            highlight=False,
        )


async def _wait_for_tasks(runtime: Runtime, session: Session) -> None:
    """`ask` is one exchange: it waits for the background tasks it started, and their reports."""
    running = [t for t in runtime.tasks.of_session(session.session_id) if t.status == "running"]
    if running:
        err.print(f"[dim]waiting for {len(running)} background task(s); Ctrl-C stops[/dim]")
        await runtime.tasks.drain(session.session_id)


def _run(command: Callable[[Runtime], Awaitable[int]]) -> int:
    """Settings, storage, the tool approval prompt, then `command`; user errors are one line."""
    with _user_errors():
        settings = _settings()
    if settings.uses_offline_model:
        err.print(f"[yellow]note:[/yellow] {OFFLINE_NOTICE}", highlight=False)
    try:
        return asyncio.run(_open_and_run(settings, command))
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


async def _open_and_run(settings: Settings, command: Callable[[Runtime], Awaitable[int]]) -> int:
    use_tool_threads()
    try:
        storage = await Storage.open(settings)
    except UserError as error:
        return _fail(error)
    runtime: Runtime | None = None
    try:
        if storage.embedder is None:
            err.print(f"[yellow]note:[/yellow] {NO_EMBEDDER}", highlight=False)
        runtime = Runtime.create(settings, ask=ApprovalPrompt(err=err), storage=storage)
        return await command(runtime)
    except UserError as error:
        return _fail(error)
    finally:
        if runtime is not None:
            await _cancel_leftover_tasks(runtime)
        await storage.close()


async def _cancel_leftover_tasks(runtime: Runtime) -> None:
    running = [t for t in runtime.tasks.tasks.values() if t.status == "running"]
    if running:
        err.print(f"cancelling {len(running)} background task(s) still running")
    await runtime.tasks.close()


def _settings() -> Settings:
    settings = load_settings()
    logging.basicConfig(
        level=settings.log_level,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    return settings


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn a UserError into one line on stderr and a non-zero exit."""
    try:
        yield
    except UserError as error:
        raise typer.Exit(_fail(error)) from None


def _fail(error: UserError) -> int:
    """Print the error's one line; the exit status (2 for settings, else 1)."""
    err.print(f"error: {error}", markup=False, highlight=False)
    return 2 if isinstance(error, ConfigError) else 1


async def _with_tool_threads(work: Awaitable[int]) -> int:
    use_tool_threads()
    return await work


def main() -> None:
    """Console-script entry point."""
    app()
