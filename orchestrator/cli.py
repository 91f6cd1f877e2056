"""The `orchestrator` command: chat and ask here; tools, new-agent, db, requests in cli_manage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Annotated

import typer
from rich.markup import escape

from orchestrator.cli_common import JsonOption, UserOption, err, fail, out, settings_or_exit
from orchestrator.cli_manage import db_app, new_agent, requests_app, tools_app
from orchestrator.console import ApprovalPrompt
from orchestrator.errors import UserError
from orchestrator.llm.offline import OFFLINE_NOTICE
from orchestrator.repl import (
    ChatRepl,
    failure_line,
    rendered_turn,
    resume_turn,
    show_background_results,
)
from orchestrator.recovery import recover
from orchestrator.runtime import Runtime, use_tool_threads
from orchestrator.session import Session
from orchestrator.settings import Settings
from orchestrator.store.embeddings import NO_EMBEDDER
from orchestrator.store.storage import Storage

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="A hierarchical agent orchestrator on LangGraph, in your terminal.",
)

SessionOption = Annotated[
    str | None, typer.Option("--session", "-s", help="Continue this session id (default: new).")
]


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
    settings = settings_or_exit()
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
        return fail(error)
    runtime: Runtime | None = None
    try:
        if storage.embedder is None:
            err.print(f"[yellow]note:[/yellow] {NO_EMBEDDER}", highlight=False)
        runtime = Runtime.create(settings, ask=ApprovalPrompt(err=err), storage=storage)
        return await command(runtime)
    except UserError as error:
        return fail(error)
    finally:
        if runtime is not None:
            await _cancel_leftover_tasks(runtime)
        await storage.close()


async def _cancel_leftover_tasks(runtime: Runtime) -> None:
    running = [t for t in runtime.tasks.tasks.values() if t.status == "running"]
    if running:
        err.print(f"cancelling {len(running)} background task(s) still running")
    await runtime.tasks.close()


app.add_typer(tools_app, name="tools")
app.command("new-agent")(new_agent)
app.add_typer(db_app, name="db")
app.add_typer(requests_app, name="requests")


def main() -> None:
    """Console-script entry point."""
    app()
