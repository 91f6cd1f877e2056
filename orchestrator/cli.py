"""The `orchestrator` command: chat, ask."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated

import typer
from rich.console import Console

from orchestrator.errors import UserError
from orchestrator.llm.offline import OFFLINE_NOTICE
from orchestrator.repl import ChatRepl, failure_line, rendered_turn
from orchestrator.runtime import Runtime, use_tool_threads
from orchestrator.session import Session
from orchestrator.settings import Settings, load_settings

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="A hierarchical agent orchestrator on LangGraph, in your terminal.",
)
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

UserOption = Annotated[str, typer.Option("--user", "-u", help="Whose conversation this is.")]
SessionOption = Annotated[
    str | None, typer.Option("--session", "-s", help="Continue this session id (default: new).")
]


@app.command()
def chat(user: UserOption = "local", session: SessionOption = None) -> None:
    """Chat with the assistant; lines may be piped in, end of input ends the session."""

    async def run(runtime: Runtime) -> int:
        conversation = runtime.session(user_id=user, session_id=session)
        return await ChatRepl(runtime=runtime, session=conversation, out=out, err=err).run()

    raise typer.Exit(_run(run))


@app.command()
def ask(
    text: Annotated[str, typer.Argument(help="The message to send.")],
    user: UserOption = "local",
    session: SessionOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: answer, tool_calls, iterations.")
    ] = False,
) -> None:
    """Send one message and print the answer."""

    async def run(runtime: Runtime) -> int:
        conversation = runtime.session(user_id=user, session_id=session)
        if as_json:
            return await _ask_json(conversation, text)
        return 0 if await rendered_turn(conversation, text, out=out, err=err) else 1

    raise typer.Exit(_run(run))


async def _ask_json(session: Session, text: str) -> int:
    try:
        result = await session.run(text)
    except Exception as error:
        line = failure_line(error)
        err.print(f"error: {line}", markup=False, highlight=False)
        print(json.dumps({"error": line, "session_id": session.session_id}))
        return 1
    body = {**result.to_json(), "session_id": session.session_id, "user_id": session.user_id}
    print(json.dumps(body, ensure_ascii=False, default=str))
    return 0


def _run(command: Callable[[Runtime], Awaitable[int]]) -> int:
    """Load settings, build the runtime, run `command`; user errors become one line."""
    try:
        settings = load_settings()
        _configure_logging(settings)
        runtime = Runtime.create(settings)
    except UserError as error:
        err.print(f"error: {error}", markup=False, highlight=False)
        return 2
    if runtime.offline:
        err.print(f"[yellow]note:[/yellow] {OFFLINE_NOTICE}", highlight=False)
    try:
        return asyncio.run(_with_tool_threads(command(runtime)))
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


async def _with_tool_threads(work: Awaitable[int]) -> int:
    use_tool_threads()
    return await work


def _configure_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )


def main() -> None:
    """Console-script entry point."""
    app()
