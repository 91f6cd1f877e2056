"""The child's side: load one approved folder, then run its actions as the orchestrator asks.

    python -m orchestrator.sources.isolated.child      (started by `process.FolderProcess`)

It reads `hello` (the folder's sources as hashed and approved: what runs is
what the person approved, never a second read of the disk), imports them,
answers `ready`, then runs each `call` in a task of its own until its
standard input ends. Standard output carries the protocol only: whatever the
tool prints goes to standard error (the folder's log).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import IO

from orchestrator.errors import ToolError, ToolLoadError
from orchestrator.folders.discovery import ToolFolder
from orchestrator.folders.loader import load_tool
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.sources.isolated.protocol import (
    MAX_LINE,
    TO_CHILD,
    Answer,
    Call,
    Cancel,
    Failure,
    decode,
    encode_model,
    is_object,
    send,
    unpack_sources,
)
from orchestrator.tools.agent import AgentTool
from orchestrator.tools.base import Tool, ToolContext
from orchestrator.tools.context import RunContext, running_in

AGENT = "it is an agent (an AgentTool), which runs inside the orchestrator: say `kind: agent`"


class Child:
    """One loaded tool, its calls under way, and the stream its answers go to."""

    def __init__(self, tool: Tool, out: IO[bytes]) -> None:
        self.tool = tool
        self.out = out
        self.calls: dict[int, asyncio.Task[None]] = {}

    def handle(self, message: Call | Cancel) -> None:
        """A message from the orchestrator: a call to start or one to cancel."""
        if isinstance(message, Cancel):
            task = self.calls.get(message.cancel)
            if task is not None:
                task.cancel()
            return
        self.calls[message.id] = asyncio.create_task(self._run(message))

    async def _run(self, call: Call) -> None:
        request, number = call.request, call.id
        context = RunContext(
            user_id=call.context.user_id or request.user_id or "local",
            session_id=request.session_id,
            request_id=request.request_id,
        )
        try:
            with running_in(context):
                result = await self.tool.execute(request)
            self._answer(Answer(id=number, result=result))
        except asyncio.CancelledError:
            self._answer(Answer(id=number, cancelled=True))
        except ToolError as error:
            failure = Failure(
                kind="tool", message=str(error), code=error.code, recoverable=error.recoverable
            )
            self._answer(Answer(id=number, error=failure))
        except Exception as error:  # a tool's bug, or the OS's refusal: said as inline
            kind = "os" if isinstance(error, OSError) else "bug"
            text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            self._answer(Answer(id=number, error=Failure(kind=kind, message=text)))
        finally:
            self.calls.pop(number, None)

    def _answer(self, answer: Answer) -> None:
        self.out.write(encode_model(answer))
        self.out.flush()


def load(hello: dict[str, object]) -> Tool:
    """The folder's tool, from the sources the orchestrator sent (those it approved)."""
    sources = hello["sources"]
    assert is_object(sources)
    folder = ToolFolder(
        path=Path(str(hello["path"])),
        key=str(hello["key"]),
        config=ToolConfig.model_validate(hello["config"]),
        digest=str(hello["digest"]),
        sources=unpack_sources(sources),
    )
    tool = load_tool(folder)
    if isinstance(tool, AgentTool):  # its graph is built over the orchestrator's, inline
        raise ToolLoadError(AGENT)
    tool.bind_context(ToolContext(data_dir=Path(str(hello["data_dir"]))))
    return tool


def ready(tool: Tool) -> dict[str, object]:
    """The `ready` message: each action's name, description, schema and the author's mark."""
    actions = [
        {
            "name": spec.name,
            "description": spec.description,
            "schema": spec.params.model_json_schema(),
            "sensitive": spec.sensitive,
        }
        for spec in tool.actions.values()
    ]
    return {"ready": {"version": tool.version, "description": tool.description, "actions": actions}}


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")  # the protocol's; fd 1 becomes standard error
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    line = sys.stdin.buffer.readline()
    if not line:
        return 0
    try:
        tool = load(decode(line))
    except Exception as error:  # the folder's code failed to load: said once, then gone
        send(out, {"failed": str(error) or type(error).__name__})
        return 1
    send(out, ready(tool))
    asyncio.run(serve(Child(tool, out)))
    return 0


async def serve(child: Child) -> None:
    """Run calls as their lines come, until standard input ends.

    Its lines are read on the loop itself, each call started as its line is read
    (no thread, nor a reading task, to hand it over: a call's way in is one
    wake-up and one turn of the loop). Nothing follows `hello` before `ready` is
    answered, so no line waits in the buffer `hello` was read through.
    """
    loop = asyncio.get_running_loop()
    calls = Calls(child, ended=loop.create_future())
    await loop.connect_read_pipe(lambda: calls, sys.stdin.buffer)
    try:
        await calls.ended
    finally:
        for task in list(child.calls.values()):
            task.cancel()


class Calls(asyncio.Protocol):
    """The orchestrator's lines, each handed to the child as it comes; `ended` when they end,
    with the error when a line is no message (the child then ends, as the orchestrator
    expects of one that no longer speaks the protocol)."""

    def __init__(self, child: Child, *, ended: asyncio.Future[None]) -> None:
        self.child = child
        self.ended = ended
        self._buffer = bytearray()
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        *lines, rest = self._buffer.split(b"\n")
        self._buffer = bytearray(rest)
        try:
            if len(self._buffer) > MAX_LINE:
                raise ValueError(f"a line over {MAX_LINE} bytes")
            for line in lines:
                self.child.handle(TO_CHILD.validate_json(line))
        except Exception as error:  # no message (the transport would only log it, and read on)
            self._end(error)
            if self._transport is not None:
                self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)

    def _end(self, error: Exception | None) -> None:
        if self.ended.done():
            return
        if error is None:
            self.ended.set_result(None)
        else:
            self.ended.set_exception(error)


if __name__ == "__main__":
    sys.exit(main())
