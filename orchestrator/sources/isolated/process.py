"""A folder's warm child process, seen from the orchestrator: start, call, cancel, restart.

The process is started and read on a thread of its own with its event loop
(as MCP sessions are, see `sources.mcp.thread`), so that it can start while
folders load, before any loop runs. A call is written to the child's input
from the caller's own loop and its answer handed back to that loop: one hop
between threads per call, not four (each hop may wait for the GIL, which
made a no-op call in a process cost 1.5 times one inline). It is started held
by the folder's sandbox, sent the folder as approved, and kept; one that dies
fails the calls it was running (each a failed call, nothing more) and is
started again by the next call.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import JsonValue, TypeAdapter, ValidationError

from orchestrator.errors import ToolError, ToolLoadError, validation_problems
from orchestrator.folders.discovery import ToolFolder
from orchestrator.folders.sandbox_config import private_environment
from orchestrator.folders.tool_names import qualified_name
from orchestrator.private import open_private_log, private_dir
from orchestrator.sandbox.rules import Policy
from orchestrator.sources.isolated.pipes import ChildInput, ChildOutput, running_here
from orchestrator.sources.isolated.protocol import (
    Answer,
    Call,
    CallContext,
    Cancel,
    Failure,
    decode,
    encode,
    encode_model,
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
        self._input: ChildInput | None = None
        self._output: ChildOutput | None = None
        self._ready: asyncio.Future[dict[str, object]] | None = None  # its first line, at start
        # Each call's answer, and the loop it is awaited on: written by the callers' threads,
        # settled by the reader on the process thread, so only under `_guard`.
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, Answered]] = {}
        self._guard = threading.Lock()
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
        loop = asyncio.get_running_loop()
        answer: Answered = loop.create_future()
        number = next(self._numbers)
        message = Call(id=number, request=request, context=CallContext(user_id=user_id))
        child = self._input
        if child is None or not child.open:  # not started yet, or stopped: (re)started there
            await self.thread.run(self._started())
        child, output = self._waiting(number, loop, answer)
        output.watch(loop)
        try:
            child.send(encode_model(message))
        except OSError as error:  # it ended as the call was written: said as a death
            self._settle(number, error=ToolError(DIED.format(name=self.name, reason=error)))
        try:
            return _result(await answer, name=qualified_name(self.name, request.action))
        except asyncio.CancelledError:
            with self._guard:
                self._pending.pop(number, None)
            with contextlib.suppress(OSError):
                child.send(encode_model(Cancel(cancel=number)))
            raise

    def _waiting(
        self, number: int, loop: asyncio.AbstractEventLoop, answer: Answered
    ) -> tuple[ChildInput, ChildOutput]:
        """The running child's pipes, with `answer` waiting for call `number` of it."""
        with self._guard:
            child, output = self._input, self._output
            if child is None or not child.open or output is None:  # it ended before the call
                raise ToolError(DIED.format(name=self.name, reason="it ended"))
            self._pending[number] = (loop, answer)
            return child, output

    def _on_line(self, line: bytes) -> None:
        """An answer of the child (on whichever loop read it): to its call, or `ready` at start.

        One that is not an `Answer` means it no longer speaks the protocol: it is ended,
        and its calls fail.
        """
        ready = self._ready
        try:
            if ready is not None:
                self._ready = None
                hello = decode(line)
                ready.get_loop().call_soon_threadsafe(_hello_settled, ready, hello)
                return
            answer = Answer.model_validate_json(line)
        except ValueError as error:  # pydantic's ValidationError is one
            reason = f"unreadable answer: {_why(error)}"
            if ready is not None:  # said at once, not after the start's time is up
                failed: dict[str, object] = {"failed": reason}
                ready.get_loop().call_soon_threadsafe(_hello_settled, ready, failed)
            self._on_broken(reason)
            return
        self._settle(answer.id, message=answer)

    def _on_broken(self, reason: str) -> None:
        logger.warning("%s: %s; its process is ended", self.name, reason)
        child = self._child
        if child is not None and child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.kill()

    def _settle(
        self, number: int, *, message: Answer | None = None, error: Exception | None = None
    ) -> None:
        with self._guard:
            waiting = self._pending.pop(number, None)
        if waiting is not None:
            loop, answer = waiting
            if running_here(loop):  # read on the loop awaiting it: nothing to hand over
                _settled(answer, message, error)
            else:
                loop.call_soon_threadsafe(_settled, answer, message, error)

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
        # Plain pipes, not this loop's transports: any thread's loop writes calls and reads
        # their answers (see `pipes`).
        calls_out, calls_in = os.pipe()
        answers_out, answers_in = os.pipe()
        try:
            with open_private_log(self.log, levels=2) as log:
                child = await asyncio.create_subprocess_exec(
                    command,
                    *args,
                    stdin=calls_out,
                    stdout=answers_in,
                    stderr=log,
                    env=self._environment(),
                    cwd=self.folder.path,
                    start_new_session=True,  # the terminal's Ctrl-C is the orchestrator's only
                )
        except BaseException:
            os.close(calls_in)
            os.close(answers_out)
            raise
        finally:  # the child's ends: ours closed, so that its end is seen as the pipes' end
            os.close(calls_out)
            os.close(answers_in)
        given = ChildInput(calls_in)
        output = ChildOutput(answers_out, on_line=self._on_line, on_broken=self._on_broken)
        self._ready = asyncio.get_running_loop().create_future()
        output.watch(asyncio.get_running_loop())
        try:
            given.send(encode(self._hello()))
            answer = await asyncio.wait_for(asyncio.shield(self._ready), START_SECONDS)
        except (TimeoutError, OSError) as error:
            answer = {"failed": str(error) or "it did not answer"}
        if "ready" not in answer:  # its code failed to load (or the process to start)
            self._ready = None
            await _ended(child, given, output)
            reason = str(answer.get("failed"))
            raise ToolLoadError(NOT_STARTED.format(name=self.name, reason=reason, log=self.log))
        ready = answer["ready"]
        self.actions = _ACTIONS.validate_python(ready["actions"] if is_object(ready) else None)
        with self._guard:
            self._child, self._input, self._output = child, given, output
            self.starts += 1
        asyncio.create_task(self._watch(child, given, output), name=f"process-{self.name}")

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

    async def _watch(
        self, child: asyncio.subprocess.Process, given: ChildInput, output: ChildOutput
    ) -> None:
        """When the child ends: its last answers to their calls, then fail the calls it was
        running."""
        code = await child.wait()
        output.drain()
        reason = f"exit status {code}" if code else output.ended or "its output ended"
        with self._guard:
            if self._child is child:
                self._child, self._input, self._output = None, None, None
            ended, self._pending = self._pending, {}
        given.close()
        output.close()
        error = ToolError(DIED.format(name=self.name, reason=reason))
        for loop, answer in ended.values():
            loop.call_soon_threadsafe(_settled, answer, None, error)

    async def _stop(self) -> None:
        with self._guard:
            child, given, output = self._child, self._input, self._output
            self._child, self._input, self._output = None, None, None
        if child is not None and given is not None and output is not None:
            await _ended(child, given, output)


Answered = asyncio.Future[Answer]


def _settled(answer: Answered, message: Answer | None, error: Exception | None) -> None:
    """On the caller's loop: its call's answer, unless it stopped waiting."""
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    elif message is not None:
        answer.set_result(message)


def _hello_settled(ready: asyncio.Future[dict[str, object]], message: dict[str, object]) -> None:
    if not ready.done():
        ready.set_result(message)


def _why(error: ValueError) -> str:
    return validation_problems(error) if isinstance(error, ValidationError) else str(error)


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


def _result(answer: Answer, *, name: str) -> ToolResult:
    if answer.result is not None:
        return answer.result
    if answer.cancelled:
        raise asyncio.CancelledError
    error = answer.error or Failure(kind="bug", message="it answered neither a result nor an error")
    if error.kind == "tool":
        raise ToolError(error.message, code=error.code, recoverable=bool(error.recoverable))
    recoverable = error.kind == "os"  # as inline: the OS's errors are worth another try
    raise ToolError(FAILED.format(name=name, error=error.message), recoverable=recoverable)


async def _ended(
    child: asyncio.subprocess.Process, given: ChildInput, output: ChildOutput
) -> None:
    given.close()
    try:
        await asyncio.wait_for(child.wait(), CLOSE_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()
    output.close()


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
