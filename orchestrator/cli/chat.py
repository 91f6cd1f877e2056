"""`orchestrator chat` and `orchestrator ask`: startup, the approval prompt, the turn.

Startup in order: settings (all validated), the model, the embedded database
starting on a thread while the person answers the approval questions, then
storage, the approved tools and the graph. Signals end the command in order
(see `signals`), so the database is always left cleanly.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import (
    JsonOption,
    UserOption,
    display_path,
    err,
    fail,
    out,
    settings_or_exit,
    user_errors,
)
from orchestrator.cli.prompts import ApprovalPrompt, person_terminal
from orchestrator.cli.signals import Interrupts, exit_on_signals
from orchestrator.errors import UserError
from orchestrator.settings import Settings
from orchestrator.tools.approval import Reviewed, review_folders

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from orchestrator.cli.terminal import LineSource
    from orchestrator.runtime import Runtime
    from orchestrator.session import Session, TurnResult
    from orchestrator.store.storage import Storage
    from orchestrator.tasks import BackgroundTask

SessionOption = Annotated[
    str | None, typer.Option("--session", "-s", help="Continue this session id (default: new).")
]
HISTORY_FILE = "chat_history"


@dataclass
class Startup:
    """What `chat` and `ask` prepare before their event loop runs."""

    settings: Settings
    model: BaseChatModel
    reviewed: Reviewed
    database: Future[object] | None
    leftover: list[str] = field(default_factory=list)  # piped lines the approval prompt kept
    interrupts: Interrupts = field(default_factory=Interrupts)


def chat(user: UserOption = "local", session: SessionOption = None) -> None:
    """Chat with the assistant; lines may be piped in, end of input ends the session."""

    async def run(startup: Startup, runtime: Runtime) -> int:
        from orchestrator.cli.repl import ChatRepl, resume_turn

        conversation = runtime.session(user_id=user, session_id=session)
        repl = ChatRepl(
            runtime=runtime,
            session=conversation,
            lines=_line_source(startup),
            interrupts=startup.interrupts,
            out=out,
            err=err,
        )
        await _recover(runtime, user)
        if not await resume_turn(conversation, out=out, err=err):
            return 1
        return await repl.run()

    raise typer.Exit(_run(run))


def ask(
    text: Annotated[str, typer.Argument(help="The message to send.")],
    user: UserOption = "local",
    session: SessionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Send one message and print the answer (--json: answer, tool_calls, iterations)."""

    async def run(startup: Startup, runtime: Runtime) -> int:
        from orchestrator.cli.repl import rendered_turn, resume_turn, show_background_results

        conversation = runtime.session(user_id=user, session_id=session)
        if as_json:
            return await _ask_json(runtime, conversation, text, startup.interrupts)
        show_background_results(runtime, conversation, out=out, err=err)
        await _recover(runtime, user)
        if not await resume_turn(conversation, out=out, err=err):
            return 1
        answered = await rendered_turn(conversation, text, out=out, err=err)
        await _wait_for_tasks(runtime, conversation)
        return 0 if answered else 1

    raise typer.Exit(_run(run))


async def _ask_json(runtime: Runtime, session: Session, text: str, interrupts: Interrupts) -> int:
    from orchestrator.cli.repl import failure_line

    follow_ups: list[dict[str, object]] = []

    def collect(task: BackgroundTask, result: TurnResult | None) -> None:
        entry = {"task_id": task.task_id, "tool": task.tool, "status": task.status}
        follow_ups.append({**entry, **(result.to_json() if result else {"answer": None})})

    session.on_follow_up = collect
    body: dict[str, object] = {"session_id": session.session_id, "user_id": session.user_id}
    try:
        await _recover(runtime, session.user_id)
        if await session.open():
            await session.resume()  # an interrupted turn is finished first, quietly
        result = await session.run(text)
        await _wait_for_tasks(runtime, session)
    except asyncio.CancelledError:
        name = interrupts.received.name if interrupts.received else "cancelled"
        _print_json({"error": f"interrupted ({name})", "follow_ups": follow_ups, **body})
        raise
    except Exception as error:
        line = failure_line(error)
        err.print(f"error: {line}", markup=False, highlight=False)
        _print_json({"error": line, **body})
        return 1
    _print_json({**result.to_json(), "follow_ups": follow_ups, **body})
    return 0


def _print_json(body: dict[str, object]) -> None:
    print(json.dumps(body, ensure_ascii=False, default=str), flush=True)


async def _recover(runtime: Runtime, user_id: str) -> None:
    """Tell the user what became of the calls a stopped process left running."""
    from orchestrator.recovery import recover

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


def _line_source(startup: Startup) -> LineSource:
    from orchestrator.cli.repl import COMMANDS
    from orchestrator.cli.terminal import PipedLines, TerminalLines

    if sys.stdin.isatty() and out.is_terminal:
        history = startup.settings.data_dir / HISTORY_FILE
        return TerminalLines(history=history, commands=COMMANDS)
    return PipedLines(first=startup.leftover)


Command = Callable[[Startup, "Runtime"], Awaitable[int]]


def _run(command: Command) -> int:
    """Prepare (settings, model, database, approvals), then run `command` on its event loop."""
    settings = settings_or_exit()
    exit_on_signals()
    try:
        startup = _prepare(settings)
    except KeyboardInterrupt:
        err.print("\ninterrupted")
        return 130
    return asyncio.run(_open_and_run(startup, command))


def _prepare(settings: Settings) -> Startup:
    _startup_notes(settings)
    with user_errors():
        with err.status("[dim]loading…[/dim]"):
            model = _build_model(settings)
        database = _start_database(settings)
        with person_terminal() as terminal:
            prompt = ApprovalPrompt(err=err, terminal=terminal)
            reviewed = review_folders(settings, prompt)
    return Startup(settings, model, reviewed, database, leftover=prompt.leftover)


def _build_model(settings: Settings) -> BaseChatModel:
    from orchestrator.llm.providers import build_chat_model

    return build_chat_model(settings)


def _start_database(settings: Settings) -> Future[object] | None:
    """Start the embedded server on a thread: it boots while the approval questions wait."""
    if settings.database_url:
        return None
    from orchestrator.store.embedded import embedded_database_url

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="database")
    started = pool.submit(embedded_database_url, settings.data_dir)
    pool.shutdown(wait=False)
    return started


def _startup_notes(settings: Settings) -> None:
    from orchestrator.llm.offline import OFFLINE_NOTICE

    if settings.uses_offline_model:
        err.print(f"[yellow]note:[/yellow] {OFFLINE_NOTICE}", highlight=False)
    if not settings.database_url and not settings.data_dir.exists():
        err.print(
            f"[yellow]note:[/yellow] new data directory {escape(display_path(settings.data_dir))}: "
            "no memory of earlier sessions (ORCHESTRATOR_DATA_DIR sets another)",
            highlight=False,
        )
    if not settings.sub_graphs_dir.is_dir():
        err.print(
            f"[yellow]note:[/yellow] no tool folders: {escape(str(settings.sub_graphs_dir))} "
            "does not exist (`orchestrator new-agent NAME` creates one)",
            highlight=False,
        )


async def _open_and_run(startup: Startup, command: Command) -> int:
    from orchestrator.runtime import use_tool_threads

    use_tool_threads()
    interrupts = startup.interrupts
    with interrupts.installed():
        try:
            return await _with_runtime(startup, command)
        except asyncio.CancelledError:
            if interrupts.received is None:
                raise
            with suppress(OSError):  # the terminal may be gone (SIGHUP)
                err.print(f"[dim]stopped ({interrupts.received.name})[/dim]")
            return interrupts.exit_code
        except UserError as error:
            return fail(error)


async def _with_runtime(startup: Startup, command: Command) -> int:
    from orchestrator.runtime import Runtime
    from orchestrator.store.embeddings import NO_EMBEDDER
    from orchestrator.store.storage import Storage

    settings = startup.settings
    with err.status("[dim]starting the database…[/dim]"):
        if startup.database is not None:
            with suppress(Exception):  # Storage.open reports a failure in one line
                await asyncio.wrap_future(startup.database)
        storage = await Storage.open(settings)
    runtime: Runtime | None = None
    try:
        if storage.embedder is None:
            err.print(f"[yellow]note:[/yellow] {NO_EMBEDDER}", highlight=False)
        runtime = Runtime.create(
            settings, reviewed=startup.reviewed, storage=storage, model=startup.model
        )
        _idle_agent_notes(runtime)
        return await command(startup, runtime)
    finally:
        await asyncio.shield(_close(runtime, storage))


async def _close(runtime: Runtime | None, storage: Storage) -> None:
    if runtime is not None:
        running = [t for t in runtime.tasks.tasks.values() if t.status == "running"]
        if running:
            with suppress(OSError):
                err.print(f"cancelling {len(running)} background task(s) still running")
        await runtime.tasks.close()
    await storage.close()


def _idle_agent_notes(runtime: Runtime) -> None:
    """Say so when an agent can do nothing because none of its own tools is approved."""
    pending = list(runtime.sub_agents)
    while pending:
        loaded = pending.pop()
        pending.extend(loaded.children)
        if loaded.unapproved_children and not loaded.children:
            names = ", ".join(loaded.unapproved_children)
            err.print(
                f"[yellow]note:[/yellow] {escape(loaded.folder.name)} has no approved tools of its "
                f"own ({escape(names)} not approved): `orchestrator tools approve NAME`",
                highlight=False,
            )
