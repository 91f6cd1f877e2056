"""The MCP servers of the approved folders, at every level: pinned, started when needed.

Nothing is launched before its folder is approved (see `folders.approvals`).
A server whose definition was approved (and whose folder was not approved
again since) is not started with the process: its tools are offered from
that signed definition, and their first call starts it and checks what it
gives against the pin before anything is sent (a server that differs is
blocked, and the next start asks about the change). Every other server starts
at once, and its definition is put to the person the first time and
whenever it changed, with what changed tool by tool; only an approved
definition's tools are offered. A server that fails to start is logged and
skipped, unless a definition of it was approved before: then its tools are
offered from that definition and the server is started again by their first
call (and blocked if it then differs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from orchestrator.errors import ConfigError, McpServerError, ToolLoadError
from orchestrator.folders.approvals import LATER, ApprovalStore, Later, Reviewed, Status
from orchestrator.folders.discovery import FolderNode, ToolFolder
from orchestrator.folders.isolation import in_process
from orchestrator.folders.sandbox_config import data_directory
from orchestrator.folders.untrusted import printable
from orchestrator.settings import Settings
from orchestrator.sources.mcp.definitions import ServerDefinition, changes
from orchestrator.sources.mcp.pins import approved_definition, decide, pin_status, pinned
from orchestrator.sources.mcp.sandboxed import ServerSandbox
from orchestrator.sources.mcp.thread import McpThread

if TYPE_CHECKING:  # the SDK loads only when there is a server to start
    from orchestrator.sources.mcp.pool import McpServer

logger = logging.getLogger(__name__)

LOGS = Path("logs") / "mcp"  # in the data directory: what stdio servers write to stderr
SKIPPED = "%s; its tools are not offered"
FROM_PIN = "%s; its approved tools are offered, and their first call starts it again"
CHANGED_SINCE = (
    "MCP server %s gave other tool definitions than those approved: its tools are blocked; "
    "the next start of the orchestrator asks about the change"
)
MISFIT = "skipping tool folder %s: %s"
DENIED = "MCP server %s: its tool definitions were not approved; its tools are not offered"
UNDECIDED = "MCP server %s: its tool definitions await your decision; its tools are not offered"


@dataclass(frozen=True)
class ServerQuestion:
    """Whether to approve a server's definition: new (`changes` None) or changed since approval."""

    folder: ToolFolder
    definition: ServerDefinition
    changes: list[str] | None


# The prompt: True for yes, False for no, LATER for no answer, None when the input has ended.
AskServer = Callable[[ServerQuestion], bool | Later | None]


class McpClients:
    """The servers of the given (approved) MCP folders, keyed by folder key.

    `start` starts those that are not pinned all at once: on the running
    event loop, or without one on a thread of their own (see `McpThread`), so
    that a command starts them first and goes on with its own startup
    meanwhile. `open` then settles each one's definition with the person, once.
    A session lives on the loop that started it (see `McpClient`).
    """

    def __init__(
        self,
        folders: Iterable[ToolFolder],
        *,
        store: ApprovalStore,
        logs: Path,
        data_dir: Path | None = None,
        require_sandbox: bool = False,
    ) -> None:
        self.store = store
        self.logs = logs
        self.data_dir = data_dir if data_dir is not None else logs.parent.parent
        self.require_sandbox = require_sandbox
        self.folders = {folder.key: folder for folder in folders if folder.config.mcp is not None}
        self.servers: dict[str, McpServer] = {}
        self.approved: dict[str, ServerDefinition] = {}
        self.undecided: list[str] = []  # folder keys whose definitions await a decision
        self.thread = McpThread()
        self.starting: list[str] = []  # the keys of the servers started with the process
        self._started: Future[list[ServerDefinition | BaseException]] | None = None
        self._settled = False

    @classmethod
    def of(cls, settings: Settings, reviewed: Reviewed) -> McpClients:
        """The servers of the approved MCP folders of `reviewed`, at every level."""
        folders = _approved(reviewed.tree.nodes, reviewed.approved)
        return cls(
            folders,
            store=ApprovalStore.of(settings),
            logs=settings.data_dir / LOGS,
            data_dir=settings.data_dir,
            require_sandbox=settings.require_sandbox,
        )

    def start(self) -> Future[list[ServerDefinition | BaseException]]:
        """Start every server not pinned at once (the first call; later ones get the same starts).

        A pinned server (see `_pinned_now`) is not started: its approved tools
        are offered at once, and their first call starts it.
        """
        if self._started is None:
            for key, folder in self.folders.items():
                self.servers[key] = self._client(key, folder)
                if not self._offered_from_pin(key, folder):
                    self.starting.append(key)
            if not self.starting:  # no thread for nothing
                self._started = Future()
                self._started.set_result([])
            elif (loop := _running_loop()) is not None:
                self._started = asyncio.run_coroutine_threadsafe(self._start_all(), loop)
            else:
                self._started = self.thread.submit(self._start_all())
        return self._started

    async def open(self, ask: AskServer | None) -> None:
        """Start every server (unless started), then settle each definition with the person."""
        started = await asyncio.wrap_future(self.start())
        if self._settled:
            return
        self._settled = True
        ask = _until_input_ends(ask)
        for key, outcome in zip(self.starting, started, strict=True):
            if isinstance(outcome, McpServerError):
                self._failed(key, outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                await self._settle(key, outcome, ask)

    async def close(self) -> None:
        """Close every session (stopping the stdio servers' processes), then the thread."""
        if self._started is None:
            return
        await asyncio.wait({asyncio.wrap_future(self._started)})  # a start under way ends first
        await asyncio.gather(*(server.close() for server in self.servers.values()))
        await asyncio.to_thread(self.thread.stop)

    def server(self, key: str) -> McpServer:
        """The server of the folder `key` (once started)."""
        return self.servers[key]

    async def _start_all(self) -> list[ServerDefinition | BaseException]:
        """On their loop: start the servers that are not pinned, all at once."""
        starts = (self.servers[key].started() for key in self.starting)
        return await asyncio.gather(*starts, return_exceptions=True)

    def _client(self, key: str, folder: ToolFolder) -> McpServer:
        from orchestrator.sources.mcp.client import McpClient
        from orchestrator.sources.mcp.pool import pooled

        config = folder.config.mcp
        assert config is not None
        sandbox = self._sandbox(folder)
        server = pooled(
            config.pool,
            lambda: McpClient(
                name=folder.name,
                config=config,
                folder=folder.path,
                errlog=self.logs / (key.replace("/", "__") + ".log"),
                sandbox=sandbox,
                on_changed=lambda: self._changed(key),
            ),
        )
        server.approved_launch = self._approved_launch(folder)
        return server

    def _offered_from_pin(self, key: str, folder: ToolFolder) -> bool:
        """Offer the approved definition's tools without starting the server, if it may be.

        Only when the launch approved with it still holds (the folder was not
        approved again since), no change was seen since, and the folder's
        configuration fits its tools: else the server starts now and is settled.
        """
        pin = self.store.pin(key)
        before = approved_definition(self.store, key)
        if pin is None or pin.changed_seen or before is None:
            return False
        if self.servers[key].approved_launch is None or _misfit(folder, before) is not None:
            return False
        self.servers[key].pinned = self.approved[key] = before
        return True

    def _changed(self, key: str) -> None:
        """A server started at first use gave another definition: the next start asks."""
        logger.warning(CHANGED_SINCE, printable(self.folders[key].name))
        try:
            self.store.see_pin_changed(key)
        except ConfigError as error:  # unsaved: its calls are blocked again next time, not run
            logger.warning("%s", printable(str(error)))

    def _sandbox(self, folder: ToolFolder) -> ServerSandbox | None:
        """The folder's sandbox, unless its server runs unconfined (`isolation: inline`, a URL)."""
        if not in_process(folder):
            return None
        return ServerSandbox(
            config=folder.config.sandbox,
            data=data_directory(self.data_dir, folder.key),
            settings=folder.config.config,
            require=self.require_sandbox,
        )

    def _approved_launch(self, folder: ToolFolder) -> dict[str, JsonValue] | None:
        """The launch of the approved definition, unless the folder was approved again since.

        A folder approved after its server's definition may have changed its launch: the
        person saw it in the folder question, and the changed definition is asked about.
        Otherwise a launch other than the pinned one was never shown: it does not start.
        """
        pin = self.store.pin(folder.key)
        decided = self.store.decided_at(folder.key)
        if pin is None or not pin.approved or decided is None or decided > pin.decided_at:
            return None
        before = approved_definition(self.store, folder.key)
        return before.launch if before is not None else None

    async def _settle(self, key: str, definition: ServerDefinition, ask: AskServer) -> None:
        """Offer the server's tools if its definition is approved, asking if need be."""
        folder, server = self.folders[key], self.servers[key]
        problem = _misfit(folder, definition)
        if problem is not None:  # the folder's configuration does not fit its tools: no question
            logger.warning(MISFIT, printable(str(folder.path)), printable(problem))
            await server.close()
            return
        status = pin_status(self.store, key, definition)
        answer: bool | Later | None = status == Status.APPROVED
        if status in (Status.NEW, Status.CHANGED):
            answer = await self._ask(folder, definition, status, ask)
            if isinstance(answer, bool):  # no answer is not remembered
                decide(self.store, key, name=folder.name, definition=definition, approved=answer)
        elif status == Status.APPROVED and _seen_changed(self.store, key):
            # The change it showed is gone: from the next start on, it starts at first use again.
            decide(self.store, key, name=folder.name, definition=definition, approved=True)
        if answer is True:
            server.pinned = self.approved[key] = definition
            return
        undecided = answer is None or answer is LATER
        logger.warning(UNDECIDED if undecided else DENIED, printable(folder.name))
        if undecided:
            self.undecided.append(key)
        await server.close()

    async def _ask(
        self, folder: ToolFolder, definition: ServerDefinition, status: Status, ask: AskServer
    ) -> bool | Later | None:
        before = pinned(self.store, folder.key) if status == Status.CHANGED else None
        question = ServerQuestion(
            folder, definition, changes(before[1], definition) if before else None
        )
        # On a thread: the servers' sessions go on being served while the person thinks.
        return await asyncio.to_thread(ask, question)

    def _failed(self, key: str, error: McpServerError) -> None:
        reason = printable(str(error))
        before = approved_definition(self.store, key)
        if before is None:
            logger.warning(SKIPPED, reason)
            return
        logger.warning(FROM_PIN, reason)
        self.servers[key].pinned = self.approved[key] = before


def _seen_changed(store: ApprovalStore, key: str) -> bool:
    pin = store.pin(key)
    return pin is not None and pin.changed_seen


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _misfit(folder: ToolFolder, definition: ServerDefinition) -> str | None:
    """Why the folder's `parameters` or `sensitive_actions` do not fit the server's tools, if so."""
    from orchestrator.sources.mcp.marks import check_config

    try:
        check_config(folder.config, definition)
    except ToolLoadError as error:
        return str(error)
    return None


def _approved(nodes: list[FolderNode], approved: set[str]) -> Iterator[ToolFolder]:
    """The approved folders, at every level below approved ones (an MCP server's: none below)."""
    for node in nodes:
        if node.folder.key in approved:
            yield node.folder
            if node.folder.config.mcp is None:
                yield from _approved(node.children, approved)


def _until_input_ends(ask: AskServer | None) -> AskServer:
    """`ask` until it first returns None (the input ended); after that, nothing is asked."""
    ended = ask is None

    def asking(question: ServerQuestion) -> bool | Later | None:
        nonlocal ended
        answer = None if ended or ask is None else ask(question)
        ended = ended or answer is None
        return answer

    return asking
