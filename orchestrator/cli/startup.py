"""How `chat` and `ask` start and end.

In order: settings (all validated), then the embedded database starting on a
thread while the model is built and the person answers the approval questions,
then storage, the approved tools and the graph. Signals end the command in order (see `signals`),
so the database is always left cleanly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orchestrator.cli.common import display_path, err, fail, settings_or_exit, shown, user_errors
from orchestrator.cli.prompts import ApprovalPrompt, person_terminal
from orchestrator.cli.signals import Interrupts, exit_on_signals
from orchestrator.errors import UserError
from orchestrator.settings import Settings
from orchestrator.tools.approval import Reviewed, review_folders

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from orchestrator.runtime import Runtime
    from orchestrator.store.storage import Storage


@dataclass
class Startup:
    """What `chat` and `ask` prepare before their event loop runs."""

    settings: Settings
    model: BaseChatModel
    reviewed: Reviewed
    database: Future[object] | None
    leftover: list[str] = field(default_factory=list)  # piped lines the approval prompt kept
    interrupts: Interrupts = field(default_factory=Interrupts)


Command = Callable[[Startup, "Runtime"], Awaitable[int]]


def run_command(command: Command, *, messages_on_stdin: bool = False) -> int:
    """Prepare (settings, model, database, approvals), then run `command` on its event loop.

    `messages_on_stdin`: the command reads messages from standard input (`chat`).
    """
    settings = settings_or_exit()
    exit_on_signals()
    try:
        startup = _prepare(settings, keep_messages=messages_on_stdin)
    except KeyboardInterrupt:
        err.print("\ninterrupted")
        return 130
    return asyncio.run(_open_and_run(startup, command))


def _prepare(settings: Settings, *, keep_messages: bool) -> Startup:
    _startup_notes(settings)
    # The server boots on its thread while LangChain loads and the questions wait.
    database = _start_database(settings)
    with user_errors():
        with err.status("[dim]loading…[/dim]"):
            model = _build_model(settings)
        with person_terminal() as terminal:
            prompt = ApprovalPrompt(err=err, terminal=terminal, keep_messages=keep_messages)
            reviewed = review_folders(settings, prompt)
    return Startup(settings, model, reviewed, database, leftover=prompt.leftover)


def _build_model(settings: Settings) -> BaseChatModel:
    from orchestrator.llm.providers import build_chat_model

    return build_chat_model(settings)


def _start_database(settings: Settings) -> Future[object] | None:
    """Start the embedded server on a thread, to boot while the rest of startup goes on."""
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
            f"[yellow]note:[/yellow] new data directory {shown(display_path(settings.data_dir))}: "
            "no memory of earlier sessions (ORCHESTRATOR_DATA_DIR sets another)",
            highlight=False,
        )
    if not settings.sub_graphs_dir.is_dir():
        err.print(
            f"[yellow]note:[/yellow] no tool folders: {shown(str(settings.sub_graphs_dir))} "
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
        runtime = await Runtime.start(
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
        await runtime.close()
    await storage.close()


def _idle_agent_notes(runtime: Runtime) -> None:
    """Say so when an agent can do nothing because none of its own tools is approved."""
    for loaded in runtime.loaded_folders():
        if loaded.unapproved_children and not loaded.children:
            names = ", ".join(loaded.unapproved_children)
            err.print(
                f"[yellow]note:[/yellow] {shown(loaded.folder.name)} has no approved tools of its "
                f"own ({shown(names)} not approved): `orchestrator tools approve NAME`",
                highlight=False,
            )
