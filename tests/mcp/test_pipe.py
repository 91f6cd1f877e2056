"""The stdio pipes of an MCP server, read and written directly (`sources.mcp.pipe`)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import StdioServerParameters
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage, JSONRPCRequest

from orchestrator.sources.mcp.pipe import pipe_client

# Answers one request with a line that is no JSON-RPC, then the response, then ends
# (or, given a file, writes its pid there and stays, deaf to its input closing and SIGTERM).
PEER = """
import json, os, signal, sys
if len(sys.argv) > 1:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    open(sys.argv[1], "w").write(str(os.getpid()))
    print("ready", flush=True)
    signal.pause()
request = json.loads(sys.stdin.readline())
print("not a message")
print(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"echo": request["method"]}}))
"""


def request(method: str) -> SessionMessage:
    return SessionMessage(JSONRPCMessage(JSONRPCRequest(jsonrpc="2.0", id=7, method=method)))


@pytest.mark.process
async def test_messages_go_out_as_lines_and_come_back_parsed_a_bad_line_as_an_error(
    tmp_path: Path,
):
    peer = StdioServerParameters(command=sys.executable, args=["-c", PEER])
    with (tmp_path / "err.log").open("w") as errlog:
        async with pipe_client(peer, errlog=errlog) as (incoming, outgoing):
            await outgoing.send(request("ping"))
            received = [item async for item in incoming]  # until its output ends
            await outgoing.aclose()
            with pytest.raises(anyio.ClosedResourceError):
                await outgoing.send(request("ping"))

    bad, answer = received
    assert isinstance(bad, Exception), "a line that is no message reaches the session as an error"
    assert isinstance(answer, SessionMessage)
    assert answer.message.model_dump()["result"] == {"echo": "ping"}


@pytest.mark.process
async def test_a_server_deaf_to_its_input_and_sigterm_is_killed_on_the_way_out(tmp_path: Path):
    pid_file = tmp_path / "pid"
    peer = StdioServerParameters(command=sys.executable, args=["-c", PEER, str(pid_file)])
    with (tmp_path / "err.log").open("w") as errlog:
        async with pipe_client(peer, errlog=errlog) as (incoming, _):
            ready = await incoming.receive()  # once it ignores SIGTERM
            pid = int(pid_file.read_text())
            assert psutil.pid_exists(pid)
    assert isinstance(ready, Exception), "'ready' is no message"
    assert not psutil.pid_exists(pid), "killed and reaped"
