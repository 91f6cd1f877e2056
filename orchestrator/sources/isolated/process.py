"""A folder's warm child process, seen from the orchestrator: start, call, cancel, restart.

The process lives on a thread of its own with its event loop (as MCP sessions
do, see `sources.mcp.thread`), so calls may come from any loop. It is started
held by the folder's sandbox, sent the folder as approved, and kept; one that
dies fails the calls it was running (each a failed call, nothing more) and is
started again by the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import JsonValue, TypeAdapter

from orchestrator.errors import ToolError, ToolLoadError
from orchestrator.folders.discovery import ToolFolder
from orchestrator.folders.sandbox_config import private_environment
from orchestrator.folders.tool_names import qualified_name
from orchestrator.private import open_private_log, private_dir
from orchestrator.sandbox.rules import Policy
from orchestrator.sources.isolated.protocol import (
    MAX_LINE,
    decode,
    encode,
    is_object,
    pack_sources,
)
from orchestrator.sources.mcp.sandboxed import ServerSandbox
from orchestrator.sources.mcp.thread import McpThread
from orchestrator.tools.base import ToolRequest
from orchestrator.tools.results import ToolResult

logger = logging.getLogger(__name__)

CHILD = "orchestrator.sources.isolated.child"
START_SECONDS = 60.0
CLOSE_SECONDS = 5.0
PASSED = ("PATH", "LANG", "LC_ALL", "PYTHONPATH")  # of our environment, all it gets
NOT_STARTED = "the process of {name} did not start: {reason} (what it wrote: {log})"
DIED = (
    "the process of {name} stopped during the call ({reason}); it is started again on the next call"
)
FAILED = "{name} failed: {error}"


@dataclass(frozen=True)
class Action:
    """An action as the child described it."""

    name: str
    description: str
    schema: dict[str, JsonValue]
    sensitive: bool


_ACTIONS = TypeAdapter(list[Action])  # those of the child's `ready` message


class FolderProcess:
    """The child process running one folder's tool (see the module's docstring)."""

    def __init__(
        self,
        folder: ToolFolder,
        *,
        sandbox: ServerSandbox,
        data_dir: Path,
        log: Path,
        thread: McpThread,
    ) -> None:
        self.folder = folder
        self.sandbox = sandbox
        self.data_dir = data_dir  # its ToolContext.data_dir
        self.log = log
        self.thread = thread
        self.actions: list[Action] = []
        self.starts = 0
        self._child: asyncio.subprocess.Process | None = None
        self._pending: dict[int, asyncio.Future[dict[str, object]]] = {}
        self._numbers = itertools.count(1)
        self._lock: asyncio.Lock | None = None

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def pid(self) -> int | None:
        """The running child's process id (None when none runs)."""
        return self._child.pid if self._child is not None else None

    def start_now(self) -> list[Action]:
        """Start it from a thread that may wait (loading folders); its actions."""
        return self.thread.submit(self._started()).result()

    async def call(self, request: ToolRequest, *, user_id: str | None) -> ToolResult:
        """Run one call in the child; cancelling this cancels it there."""
        return await self.thread.run(self._call(request, user_id))

    async def close(self) -> None:
        """End the child (its standard input closed, then killed if it lingers)."""
        await self.thread.run(self._stop())

    # --- on the thread's loop ------------------------------------------------------------

    async def _started(self) -> list[Action]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._child is None or self._child.returncode is not None:
                await self._spawn()
        return self.actions

    async def _spawn(self) -> None:
        self.sandbox.check(name=self.name, command=sys.executable, folder=self.folder.path)
        command, args = self.policy().wrap(sys.executable, ["-m", CHILD])
        for path in (*private_environment(self.sandbox.data).values(), str(self.data_dir)):
            private_dir(Path(path), levels=3)
        with open_private_log(self.log, levels=2) as log:
            child = await asyncio.create_subprocess_exec(
                command,
                *args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=self._environment(),
                cwd=self.folder.path,
                limit=MAX_LINE,
                start_new_session=True,  # the terminal's Ctrl-C is the orchestrator's only
            )
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(encode(self._hello()))
        try:
            line = await asyncio.wait_for(child.stdout.readline(), START_SECONDS)
            answer = decode(line) if line else {"failed": "it ended before answering"}
        except (TimeoutError, ValueError) as error:
            answer = {"failed": str(error) or "it did not answer"}
        if "ready" not in answer:  # its code failed to load (or the process to start)
            await _ended(child)
            reason = str(answer.get("failed"))
            raise ToolLoadError(NOT_STARTED.format(name=self.name, reason=reason, log=self.log))
        ready = answer["ready"]
        self.actions = _ACTIONS.validate_python(ready["actions"] if is_object(ready) else None)
        self._child, self.starts = child, self.starts + 1
        asyncio.create_task(self._read(child), name=f"process-{self.name}")

    def policy(self) -> Policy:
        """The folder's sandbox, plus what the child needs (see `child_policy`)."""
        rules = self.sandbox.policy(command=sys.executable, folder=self.folder.path)
        return child_policy(rules, tool_data=self.data_dir)

    def _environment(self) -> dict[str, str]:
        passed = {name: os.environ[name] for name in PASSED if name in os.environ}
        return {**passed, **private_environment(self.sandbox.data)}

    def _hello(self) -> dict[str, object]:
        folder = self.folder
        return {
            "path": str(folder.path),
            "key": folder.key,
            "digest": folder.digest,
            "config": folder.config.model_dump(mode="json"),
            "sources": pack_sources(folder.sources),
            "data_dir": str(self.data_dir),
        }

    async def _read(self, child: asyncio.subprocess.Process) -> None:
        """Hand each answer to its call; when the child ends, fail the calls it was running."""
        assert child.stdout is not None
        reason = "its output ended"
        try:
            while line := await child.stdout.readline():
                message = decode(line)
                future = self._pending.pop(int(str(message.get("id"))), None)
                if future is not None and not future.done():
                    future.set_result(message)
        except (ValueError, asyncio.LimitOverrunError) as error:
            reason = f"unreadable answer: {error}"
        code = await child.wait()
        if code:
            reason = f"exit status {code}"
        if self._child is child:
            self._child = None
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ToolError(DIED.format(name=self.name, reason=reason)))
        self._pending.clear()

    async def _call(self, request: ToolRequest, user_id: str | None) -> ToolResult:
        await self._started()
        child = self._child
        assert child is not None and child.stdin is not None
        number = next(self._numbers)
        answer: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
        self._pending[number] = answer
        message = {
            "id": number,
            "request": request.model_dump(mode="json"),
            "context": {"user_id": user_id},
        }
        child.stdin.write(encode(message))
        try:
            return _result(await answer, name=qualified_name(self.name, request.action))
        except asyncio.CancelledError:
            self._pending.pop(number, None)
            if child.returncode is None:
                child.stdin.write(encode({"cancel": number}))
            raise

    async def _stop(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            await _ended(child)


def child_policy(rules: Policy, *, tool_data: Path) -> Policy:
    """`rules` plus what the child needs: our package (and to list the folder holding it, as
    Python's import does) and the folder's `ToolContext.data_dir`, to write."""
    package = Path(__file__).resolve().parents[2]  # orchestrator/
    return replace(
        rules,
        read=[*rules.read, str(package)],
        listed=[*rules.listed, str(package.parent)],
        write=[*rules.write, str(tool_data)],
    )


def _result(answer: dict[str, object], *, name: str) -> ToolResult:
    if "result" in answer:
        return ToolResult.model_validate(answer["result"])
    if answer.get("cancelled"):
        raise asyncio.CancelledError
    error = answer.get("error")
    assert is_object(error)
    if error.get("kind") == "tool":
        raise ToolError(
            str(error["message"]), code=str(error["code"]), recoverable=bool(error["recoverable"])
        )
    recoverable = error.get("kind") == "os"  # as inline: the OS's errors are worth another try
    raise ToolError(FAILED.format(name=name, error=error["message"]), recoverable=recoverable)


async def _ended(child: asyncio.subprocess.Process) -> None:
    if child.stdin is not None:
        child.stdin.close()
    try:
        await asyncio.wait_for(child.wait(), CLOSE_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()


class FolderProcesses:
    """The processes of a level tree's `isolation: process` folders, on one thread of their own."""

    def __init__(self, *, data_dir: Path, require_sandbox: bool) -> None:
        self.data_dir = data_dir
        self.require_sandbox = require_sandbox
        self.thread = McpThread("folder-processes")
        self.processes: dict[str, FolderProcess] = {}

    def process(self, folder: ToolFolder, *, tool_data: Path) -> FolderProcess:
        """The folder's process (not started): `tool_data` is its ToolContext.data_dir."""
        from orchestrator.folders.sandbox_config import data_directory

        sandbox = ServerSandbox(
            config=folder.config.sandbox,
            data=data_directory(self.data_dir, folder.key),
            settings=folder.config.config,
            require=self.require_sandbox,
        )
        log = self.data_dir / "logs" / "tools" / (folder.key.replace("/", "__") + ".log")
        process = FolderProcess(
            folder, sandbox=sandbox, data_dir=tool_data, log=log, thread=self.thread
        )
        self.processes[folder.key] = process
        return process

    async def close(self) -> None:
        """End every process, then the thread."""
        if not self.processes:
            return
        await asyncio.gather(*(process.close() for process in self.processes.values()))
        await asyncio.to_thread(self.thread.stop)
