"""How `chat` and `ask` start and end.

In order: settings (all validated), then the embedded database starting on a
thread while the model is built and the person answers the approval questions,
then storage, the approved tools and the graph. Signals end the command in order (see `signals`),
so the database is always left cleanly.

A command that ends before its database has started (a bad model, Ctrl-C,
SIGTERM or SIGHUP during startup) calls the start off if the server is not being
started yet; otherwise it waits for the start to finish, for at most
DATABASE_START_SECONDS, and then leaves the server like any exit does: a server
still booting when the process left would otherwise run on with nobody listed as
its user. A second Ctrl-C while it waits exits at once; the server may then be
left running, and the next command that uses it stops it when it ends.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.cli.common import err, settings_or_exit, user_errors
from orchestrator.cli.interrupted import until_interrupted
from orchestrator.folders.approvals import Reviewed, review_folders
from orchestrator.folders.naming import short_path
from orchestrator.settings import Settings
from orchestrator.terminal.prompt_history import FolderHistory
from orchestrator.terminal.server_prompt import ServerPrompt
from orchestrator.terminal.signals import HANDLED, Interrupts, exit_on_signals, ignore_exit_signals
from orchestrator.terminal.text import display_path, shown
from orchestrator.terminal.tty_questions import ApprovalPrompt, person_terminal

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from orchestrator.conversation.job_board import JobBoard
    from orchestrator.dispatch.middleware import ToolMiddleware
    from orchestrator.runtime import Orchestrator
    from orchestrator.sources.mcp.clients import AskServer, McpClients
    from orchestrator.store.storage import Storage

# How long a command that ends during startup waits for its database to finish
# starting, so as to stop it again. A start on an existing data directory takes
# a second or two; a first one (initdb, passwords, the database) several; the
# package gives pg_ctl 10 s. Past this the start is taken to hang and abandoned.
DATABASE_START_SECONDS = 60.0

logger = logging.getLogger(__name__)


class DatabaseStart:
    """The embedded server starting (or being joined) on a thread while the rest of startup goes on.

    A daemon thread: the process never waits for it at exit by itself, and the
    CLI's exit does not report it as a thread left behind. `settle` is what
    waits for it, on the way out.
    """

    def __init__(self, data_dir: Path, *, idle_minutes: float) -> None:
        self.data_dir = data_dir
        self.idle_minutes = idle_minutes
        self.url: Future[str] = Future()
        # Running from the start: cancelling whatever awaits the URL must not cancel the start.
        self.url.set_running_or_notify_cancel()
        self._state = threading.Lock()
        self._begun = False  # the server is being started: from here on it must be waited for
        self._called_off = False  # the command ended first: nothing is to be started
        self._leave: Callable[[Path], None] | None = None
        self._thread = threading.Thread(target=self._start, name="database-start", daemon=True)
        self._thread.start()

    def _start(self) -> None:
        # The programs this thread runs (initdb, pg_ctl) inherit its signal mask.
        # A Ctrl-C on the terminal or `timeout`'s SIGTERM reaches the whole process
        # group: a pg_ctl killed by it leaves its server booting with nobody listed
        # as its user. Blocked, they reach only this process, whose main thread
        # then waits for the start and stops the server (`settle`). The server
        # sets its own mask.
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
        try:
            # Every import first, so that settling never waits on an import: a
            # signal that interrupts one in the main thread can leave its lock held.
            from orchestrator.store.embedded import (
                embedded_database_url,
                leave_embedded_server,
                load_embedded_package,
            )

            load_embedded_package()
            with self._state:
                if self._called_off:
                    raise RuntimeError("the command ended before the database started")
                self._begun = True
                self._leave = leave_embedded_server
            self.url.set_result(embedded_database_url(self.data_dir, idle_minutes=self.idle_minutes))
        except BaseException as error:  # handed to whoever awaits the URL
            self.url.set_exception(error)

    def settle(self, *, timeout: float = DATABASE_START_SECONDS) -> None:
        """On the way out: once the start is over (at most `timeout` s), leave the server.

        A start not yet begun is called off; one that had finished is left by
        the usual exit hook. While this waits, SIGTERM and SIGHUP are ignored
        (the exit is already under way) and Ctrl-C stops the wait.
        """
        with self._state:
            self._called_off = not self._begun
        if self._called_off or not self._thread.is_alive():
            return
        if _in_main_thread():  # the command is over: its exit must not be cut short
            ignore_exit_signals()
        logger.info("waiting for the database to finish starting, to stop it again")
        try:
            with _ctrl_c_interrupts():
                self._thread.join(timeout)
        except KeyboardInterrupt:  # a second Ctrl-C: exit now
            logger.info("not waiting for the database to finish starting")
            return
        if self._thread.is_alive():
            logger.warning("the embedded database did not finish starting in %.0f s", timeout)
        elif self._leave is not None:
            self._leave(self.data_dir)


def _in_main_thread() -> bool:
    """Whether signals are handled here (a command run from a test may run on another thread)."""
    return threading.current_thread() is threading.main_thread()


@contextmanager
def _ctrl_c_interrupts() -> Iterator[None]:
    """Within: Ctrl-C raises KeyboardInterrupt (in the main thread). After: it is ignored again."""
    if not _in_main_thread():
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass
class Startup:
    """What `chat` and `ask` prepare before their event loop runs."""

    settings: Settings
    model: BaseChatModel
    reviewed: Reviewed
    database: Future[str] | None  # the embedded server's URL, while it starts
    leftover: list[str] = field(default_factory=list)  # piped lines the approval prompt kept
    ask_server: AskServer | None = None  # asks about MCP servers' tool definitions once started
    servers: McpClients | None = None  # the approved MCP servers, starting
    interrupts: Interrupts = field(default_factory=Interrupts)
    middleware: Sequence[ToolMiddleware] | None = None  # replaces the dispatch pipeline's
    # Background calls as jobs of the queue (`chat`, `ask`), this process taking jobs too or
    # not; None: they run in this process only (`mcp serve`).
    jobs: JobOptions | None = None
    # Whether this process embeds what it stores (`chat`, `mcp serve`); else a process of
    # its own does, after it (`ask`, `run`: see `_embed_later`).
    embeds_here: bool = True


@dataclass(frozen=True)
class JobOptions:
    """How a command's background calls go to the job queue (see `orchestrator.jobs.runner`).

    `takes_jobs`: this process runs jobs too (None: as ORCHESTRATOR_EMBEDDED_WORKER says).
    `spawn_for_left`: jobs it made that still wait when it ends get a worker started for them.
    `hand_over`: it waits for no background call (`ask --no-wait`; see `JobRunner`).
    """

    takes_jobs: bool | None = None
    spawn_for_left: bool = True
    hand_over: bool = False


Command = Callable[[Startup, "Orchestrator"], Awaitable[int]]
Prepare = Callable[[Settings, DatabaseStart | None], Startup]


def run_command(
    command: Command,
    *,
    messages_on_stdin: bool = False,
    prepare: Prepare | None = None,
    jobs: JobOptions | None = None,
    reads_words: bool = True,
    embeds_here: bool = True,
    first: Callable[[Settings], None] | None = None,
    overrides: Mapping[str, object] | None = None,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> int:
    """Prepare (settings, model, database, approvals), then run `command` on its event loop.

    `first`: what the command does before the database starts (`mcp serve` answers
    its client's first request from the manifests before anything else loads).
    `messages_on_stdin`: the command reads messages from standard input (`chat`).
    `prepare` replaces the preparation that asks the person (`mcp serve` asks no one).
    `jobs`: background calls go to the job queue, so (see `JobOptions`).
    `reads_words`: a model reads what the person wrote (not `run --json`), so the
    offline model is worth a note.
    `embeds_here` False: a short command (`ask`, `run`) neither loads an embedding
    model nor waits for one at its exit; what it stored is embedded after it.
    `overrides`: settings the command's options set, over the environment's (`--no-cache`).
    `loop_factory`: the event loop the command runs on (`serve`: uvloop's), else asyncio's.
    """
    settings = settings_or_exit(**(overrides or {}))
    exit_on_signals()
    _startup_notes(settings, reads_words=reads_words)
    if first is not None:
        first(settings)
    # The server boots on its thread while LangChain loads and the questions wait.
    database = (
        None
        if settings.database_url
        else DatabaseStart(settings.data_dir, idle_minutes=settings.db_idle_minutes)
    )
    try:
        try:
            if prepare is not None:
                startup = prepare(settings, database)
            else:
                startup = _prepare(settings, database, keep_messages=messages_on_stdin)
            startup.jobs = jobs
            startup.embeds_here = embeds_here
        except KeyboardInterrupt:
            err.print("\ninterrupted")
            return 130
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(_open_and_run(startup, command))
    finally:
        if database is not None:  # does something only if the command ended mid-start
            database.settle()


def _prepare(settings: Settings, database: DatabaseStart | None, *, keep_messages: bool) -> Startup:
    from orchestrator.sources.mcp.clients import McpClients

    with user_errors():
        with person_terminal() as terminal:
            history = FolderHistory.of(settings)
            prompt = ApprovalPrompt(
                err=err, terminal=terminal, keep_messages=keep_messages, history=history
            )
            reviewed = review_folders(settings, prompt)
        _remote_notes(settings, reviewed)
        servers = McpClients.of(settings, reviewed)
        servers.start()  # the approved MCP servers boot on their thread while LangChain loads
        with err.status("[dim]loading…[/dim]"):
            model = _build_model(settings)
    url = database.url if database is not None else None
    ask_server = ServerPrompt(
        err=err,
        keep_messages=keep_messages,
        leftover=prompt.leftover,
        review_dir=_review_dir(settings),
    )
    return Startup(
        settings,
        model,
        reviewed,
        url,
        leftover=prompt.leftover,
        ask_server=ask_server,
        servers=servers,
    )


def prepare_unattended(
    settings: Settings,
    database: DatabaseStart | None,
    *,
    middleware: list[ToolMiddleware] | None = None,
    model_at_first_use: bool = False,
) -> Startup:
    """What `chat` prepares, with no one asked about folders: what awaits a decision stays undecided.

    `middleware` replaces the dispatch pipeline's (`mcp serve`'s asks no one).
    `model_at_first_use`: the command may call no model (`run --json`): the
    configured one is built when first called, if ever (see `llm.deferred`),
    not now while the database starts.
    """
    with user_errors():
        model = _deferred_model(settings) if model_at_first_use else _build_model(settings)
        reviewed = review_folders(settings, _no_answer)
        _remote_notes(settings, reviewed)
    url = database.url if database is not None else None
    return Startup(settings, model, reviewed, url, middleware=middleware)


def _remote_notes(settings: Settings, reviewed: Reviewed) -> None:
    """One line per folder with a remote configuration: which copy is in force, or why it is held."""
    from orchestrator.folders.approvals import ApprovalStore
    from orchestrator.folders.discovery import walk
    from orchestrator.folders.remote_config import Source

    store = ApprovalStore.of(settings)
    for node in walk(reviewed.tree.nodes):
        folder, remote = node.folder, node.folder.remote
        if remote is None:
            continue
        if folder.key in reviewed.approved:
            note = "" if remote.source == Source.REMOTE else "[yellow]note:[/yellow] "
            err.print(f"{note}{shown(remote.line(folder.name))}", highlight=False)
        elif store.remote_changed(folder):
            err.print(
                f"[yellow]note:[/yellow] {shown(folder.name)} is held: its remote configuration "
                f"({shown(remote.url)}) changed what your approval covers; "
                f"`orchestrator tools approve {shown(short_path(folder))}` approves it as it is now",
                highlight=False,
            )


def _no_answer(*_: object) -> None:
    return None  # as at the end of input: nothing is decided now


def _review_dir(settings: Settings) -> Path:
    """Where each MCP definition asked about is written whole, for the person to read."""
    from orchestrator.folders.approvals import REGISTRY_DIR

    return settings.data_dir / REGISTRY_DIR / "review"


def _build_model(settings: Settings) -> BaseChatModel:
    from orchestrator.llm.providers import build_chat_model

    return build_chat_model(settings)


def _deferred_model(settings: Settings) -> BaseChatModel:
    from orchestrator.llm.providers import deferred_chat_model

    return deferred_chat_model(settings)


def _startup_notes(settings: Settings, *, reads_words: bool) -> None:
    from orchestrator.llm.notices import OFFLINE_NOTICE

    if settings.uses_offline_model and reads_words:
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
    return await until_interrupted(startup.interrupts, _with_runtime(startup, command))


async def _with_runtime(startup: Startup, command: Command) -> int:
    from orchestrator.collector import resume_collection
    from orchestrator.runtime import Orchestrator
    from orchestrator.sources.mcp.clients import McpClients
    from orchestrator.store.embeddings import NO_EMBEDDER
    from orchestrator.store.storage import Storage

    settings = startup.settings
    servers = startup.servers or McpClients.of(settings, startup.reviewed)
    servers.start()  # unless started already: the approved MCP servers start while the database does
    storage: Storage | None = None
    runtime: Orchestrator | None = None
    try:
        with err.status("[dim]starting the database…[/dim]"):
            if startup.database is not None:
                with suppress(Exception):  # Storage.open reports a failure in one line
                    await asyncio.wrap_future(startup.database)
            storage = await Storage.open(settings, embed_in_background=startup.embeds_here)
        if storage.embedder is None and settings.embeddings != "none":  # none: the person's choice
            err.print(f"[yellow]note:[/yellow] {NO_EMBEDDER}", highlight=False)
        runtime = await Orchestrator.start(
            settings,
            reviewed=startup.reviewed,
            ask_server=startup.ask_server,
            mcp_servers=servers,
            storage=storage,
            model=startup.model,
            middleware=startup.middleware,
            replace_defaults=True,  # `startup.middleware`, when set, is the whole pipeline
        )
        if startup.jobs is not None:
            runtime = _with_jobs(runtime, startup.jobs)
        _idle_agent_notes(runtime)
        resume_collection()  # started: what the command does from here is collected as usual
        return await command(startup, runtime)
    finally:
        closing = _close(runtime, storage, servers, settings=settings, interrupts=startup.interrupts)
        await asyncio.shield(closing)


def _with_jobs(runtime: Orchestrator, options: JobOptions) -> Orchestrator:
    """The runtime whose background calls are jobs of the queue (see `orchestrator.jobs`)."""
    from orchestrator.jobs.runner import JobRunner

    takes = runtime.settings.embedded_worker if options.takes_jobs is None else options.takes_jobs
    spawn = options.spawn_for_left and runtime.settings.embedded_worker
    runner: JobBoard = JobRunner(  # the checker holds the queue to what a session needs
        runtime, takes_jobs=takes, spawn_for_left=spawn, hand_over=options.hand_over, on_note=_job_note
    )
    return replace(runtime, jobs=runner)


def _job_note(line: str) -> None:
    with suppress(OSError):  # the terminal may be gone: the jobs go on
        err.print(f"[yellow]note:[/yellow] {shown(line)}", highlight=False)


async def _close(
    runtime: Orchestrator | None,
    storage: Storage | None,
    servers: McpClients,
    *,
    settings: Settings,
    interrupts: Interrupts,
) -> None:
    if runtime is not None:
        note = runtime.jobs.closing_note()
        if note:
            with suppress(OSError):  # the terminal may be gone (SIGHUP): the jobs go on
                err.print(f"[dim]{note}[/dim]")
        # Ctrl-C (or SIGTERM) now cancels them; a closed terminal (SIGHUP) does not.
        with interrupts.while_closing(stop=runtime.jobs.cancel_running):
            await runtime.jobs.close()
        await runtime.close()
    await servers.close()  # done already by the runtime's close, unless it never started
    if storage is not None:
        waiting = await storage.close()
        if waiting:
            _embed_later(settings, waiting)


def _kept_warm(settings: Settings) -> bool:
    """Whether a keeper holds the embedded server of this run (it embeds what waits)."""
    if settings.database_url or settings.db_idle_minutes <= 0:
        return False
    from orchestrator.store.warm_server import keeper_holds  # loaded already: the server was joined

    return keeper_holds(settings.data_dir)


def _embed_later(settings: Settings, waiting: int) -> None:
    """Start embedding what waits for a vector after this run; say so only when the person must.

    Started, or being embedded by a process started earlier, there is nothing to do:
    a line after every `ask` would only be noise. With the server kept warm, its
    keeper embeds them (see `store.keeper_embedding`): no process is started.
    """
    from orchestrator.store.embed_later import embed_later

    try:
        if _kept_warm(settings):
            return
        embed_later(settings)
    except OSError as error:
        what = (
            "1 stored message waits for its embedding: `orchestrator db embed` embeds it"
            if waiting == 1
            else f"{waiting} stored messages wait for their embeddings: `orchestrator db embed` "
            "embeds them"
        )
        line = f"{what} (it could not be started: {error.strerror or error})"
        with suppress(OSError):
            err.print(f"[dim]{shown(line)}[/dim]", highlight=False)


def _idle_agent_notes(runtime: Orchestrator) -> None:
    """Say so when an agent can do nothing because none of its own tools is approved."""
    for loaded in runtime.loaded_folders():
        if loaded.unapproved_children and not loaded.children:
            names = ", ".join(loaded.unapproved_children)
            first = f"{short_path(loaded.folder)}/{loaded.unapproved_children[0]}"
            err.print(
                f"[yellow]note:[/yellow] {shown(loaded.folder.name)} has no approved tools of its "
                f"own ({shown(names)} not approved): `orchestrator tools approve {shown(first)}`"
                f"{', and likewise the others' if len(loaded.unapproved_children) > 1 else ''}",
                highlight=False,
            )
