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
    decode,
    is_object,
    send,
    unpack_sources,
)
from orchestrator.tools.agent import AgentTool
from orchestrator.tools.base import Tool, ToolContext, ToolRequest
from orchestrator.tools.context import RunContext, running_in

AGENT = "it is an agent (an AgentTool), which runs inside the orchestrator: say `kind: agent`"


class Child:
    """One loaded tool, its calls under way, and the stream its answers go to."""

    def __init__(self, tool: Tool, out: IO[bytes]) -> None:
        self.tool = tool
        self.out = out
        self.calls: dict[int, asyncio.Task[None]] = {}

    def handle(self, message: dict[str, object]) -> None:
        """A message from the orchestrator: a call to start or one to cancel."""
        if "cancel" in message:
            task = self.calls.get(int(str(message["cancel"])))
            if task is not None:
                task.cancel()
            return
        number = int(str(message["id"]))
        self.calls[number] = asyncio.create_task(self._run(number, message))

    async def _run(self, number: int, message: dict[str, object]) -> None:
        request = ToolRequest.model_validate(message["request"])
        given = message.get("context")
        ids: dict[str, object] = given if is_object(given) else {}
        context = RunContext(
            user_id=str(ids.get("user_id") or request.user_id or "local"),
            session_id=request.session_id,
            request_id=request.request_id,
        )
        try:
            with running_in(context):
                result = await self.tool.execute(request)
            self._answer({"id": number, "result": result.model_dump(mode="json")})
        except asyncio.CancelledError:
            self._answer({"id": number, "cancelled": True})
        except ToolError as error:
            failure = {"kind": "tool", "message": str(error), "code": error.code}
            self._answer({"id": number, "error": {**failure, "recoverable": error.recoverable}})
        except Exception as error:  # a tool's bug, or the OS's refusal: said as inline
            kind = "os" if isinstance(error, OSError) else "bug"
            text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            self._answer({"id": number, "error": {"kind": kind, "message": text}})
        finally:
            self.calls.pop(number, None)

    def _answer(self, message: dict[str, object]) -> None:
        send(self.out, message)


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

    Its lines are read on the loop itself (no thread to hand them over: a call's way in
    is one wake-up, not two). Nothing follows `hello` before `ready` is answered, so no
    line waits in the buffer `hello` was read through.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    while line := await reader.readline():
        child.handle(decode(line))
    for task in list(child.calls.values()):
        task.cancel()


if __name__ == "__main__":
    sys.exit(main())
