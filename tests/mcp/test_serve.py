"""`orchestrator mcp serve`, a real process driven by the `mcp` client SDK over stdio and HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.session import RequestResponder
from mcp.types import CallToolResult, ClientResult, ServerNotification, ServerRequest, TextContent
from sqlalchemy import make_url, text

from orchestrator.folders.approvals import ApprovalStore
from orchestrator.folders.discovery import discover_tree, walk
from orchestrator.settings import load_settings
from orchestrator.sources.manifest import wait_for_manifests
from orchestrator.store import Database
from orchestrator.store.logins import Logins
from orchestrator.store.requests import request_history, request_tree
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import cli_env, server_env, tool_json
from tests.tool_folders import (
    AGENT_TOOL,
    ECHO_TOOL,
    NOISY_TOOL,
    marker_code,
    start_approved,
    write_folder,
)

START_SECONDS = 120  # the database, the tools, the server: far past any real start
# Every call of it needs the person's decision.
VAULT = {"name": "vault", "description": "Keeps.", "version": "1", "requires_approval": True}

TINY_SERVER = """
from mcp.server.fastmcp import FastMCP

app = FastMCP("tiny")


@app.tool()
def ping() -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"


app.run()
"""


def approve(home: Path, *, leave_out: tuple[str, ...] = ()) -> None:
    """Approve every folder under `home/sub_graphs` but those named in `leave_out`."""
    settings = load_settings(sub_graphs_dir=home / "sub_graphs", data_dir=home / "data")
    store = ApprovalStore.of(settings)
    for node in walk(discover_tree(settings.sub_graphs_dir).nodes):
        if node.folder.name not in leave_out:
            store.decide(node.folder, approved=True)


def serve_env(home: Path, logins: Logins, **extra: str) -> dict[str, str]:
    return {
        **cli_env(home),
        "XDG_DATA_HOME": os.environ["XDG_DATA_HOME"],  # where the approvals' key is
        "DATABASE_URL": logins.owner_url,
        "DATABASE_APP_URL": logins.app_url,
        "ORCHESTRATOR_EMBEDDINGS": "none",
        **extra,
    }


class Unreadable:
    """What the client could not read as protocol on the server's standard output.

    Not a list: the SDK takes an empty (false) handler for none at all.
    """

    def __init__(self) -> None:
        self.found: list[Exception] = []

    async def __call__(
        self,
        message: RequestResponder[ServerRequest, ClientResult] | ServerNotification | Exception,
    ) -> None:
        if isinstance(message, Exception):
            self.found.append(message)


@asynccontextmanager
async def stdio_session(
    home: Path,
    env: dict[str, str],
    *args: str,
    unreadable: Unreadable | None = None,
    launch: tuple[str, ...] = ("-m", "orchestrator"),
) -> AsyncIterator[ClientSession]:
    """`orchestrator mcp serve ARGS` over stdio, initialized; its stderr goes to home/err.txt.

    `launch`: how Python runs the command (`-c PROBE ...`: a probe that runs it).
    """
    server = StdioServerParameters(
        command=sys.executable,
        args=[*launch, "mcp", "serve", *args],
        env=env,
        cwd=home,
    )
    with open(home / "err.txt", "w") as errors:
        async with (
            stdio_client(server, errlog=errors) as (read, write),
            ClientSession(read, write, message_handler=unreadable) as session,
        ):
            await asyncio.wait_for(session.initialize(), START_SECONDS)
            yield session


def answer(result: CallToolResult) -> dict[str, object]:
    """The model text of a call's result, read back."""
    [content] = result.content
    return tool_json(content.text)  # type: ignore[union-attr]


async def session_of(database: Database, user: str, request_id: str) -> str:
    async with database.user_transaction(user) as connection:
        found = await connection.scalar(
            text("SELECT session_id FROM requests WHERE request_id = :r"), {"r": request_id}
        )
    return str(found)


async def test_over_stdio_the_approved_tools_are_served_and_each_call_is_logged_for_the_user(
    tmp_path: Path, database_logins: Logins, database: Database
):
    root = tmp_path / "sub_graphs"
    write_folder(root, "echo")
    write_folder(root, "noisy", code=NOISY_TOOL)
    write_folder(root, "vault", config=VAULT)
    write_folder(root, "unapproved")
    write_folder(
        root,
        "tiny",
        config={"name": "tiny", "description": "A tiny MCP server.", "version": "1",
                "mcp": {"command": sys.executable, "args": ["server.py"]}},
        code=TINY_SERVER,
        entry="server.py",
    )
    approve(tmp_path, leave_out=("unapproved",))  # tiny's folder, not its tool definitions
    unreadable = Unreadable()

    async with stdio_session(
        tmp_path, serve_env(tmp_path, database_logins), "--user", "rita", unreadable=unreadable
    ) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        said = await session.call_tool("echo_say", {"text": "hi", "times": 2})
        noisy = await session.call_tool("noisy_run", {})
        refused = await session.call_tool("vault_say", {"text": "open"})
        wrong = await session.call_tool("echo_say", {"times": 9})
    errors = (tmp_path / "err.txt").read_text()

    assert sorted(listed) == ["echo_say", "noisy_run", "vault_say"]  # no built-ins, none unapproved
    assert listed["echo_say"].inputSchema["required"] == ["text"]
    assert listed["echo_say"].annotations is None
    hints = listed["vault_say"].annotations
    assert hints is not None and (hints.destructiveHint, hints.readOnlyHint) == (True, False)

    assert not said.isError and answer(said) == {"status": "success", "message": "hi hi"}
    request_id = str(said.structuredContent["request_id"])  # type: ignore[index]
    [node] = await request_tree(database, request_id, user_id="rita")
    assert (node.tool, node.action, node.outcome) == ("echo", "say", "completed")
    assert node.message == "hi hi"
    assert (await session_of(database, "rita", request_id)).startswith("mcp-")
    assert await request_tree(database, request_id, user_id="local") == []

    assert not noisy.isError and unreadable.found == [], "stdout carries the protocol only"
    for noise in ("noise from print", "noise from file descriptor 1", "noise from a child process"):
        assert noise in errors

    assert refused.isError
    assert "--allow-sensitive" in str(answer(refused)["message"])
    assert refused.structuredContent["error_code"] == "rejected"  # type: ignore[index]
    assert wrong.isError and answer(wrong)["error_code"] == "invalid_arguments"

    [left_out] = [line for line in errors.splitlines() if "awaiting your decision" in line]
    assert left_out.endswith(
        "awaiting your decision: unapproved, tiny (`orchestrator chat` asks about them)"
    )


async def test_with_allow_sensitive_a_sensitive_call_runs_unasked_and_is_logged_so(
    tmp_path: Path, database_logins: Logins, database: Database
):
    write_folder(tmp_path / "sub_graphs", "vault", config=VAULT)
    approve(tmp_path)

    env = serve_env(tmp_path, database_logins)
    async with stdio_session(tmp_path, env, "--allow-sensitive") as session:
        opened = await session.call_tool("vault_say", {"text": "open"})

    assert not opened.isError and answer(opened)["message"] == "open"
    request_id = str(opened.structuredContent["request_id"])  # type: ignore[index]
    history = await request_history(database, request_id, user_id="local")
    [approved] = [json.loads(detail or "{}") for status, detail in history if status == "approved"]
    assert approved == {
        "decision": "approve", "args": {"text": "open"}, "by": "unattended",
        "risk_level": "medium", "urgency": "normal",
    }
    assert "awaiting your decision" not in (tmp_path / "err.txt").read_text()


async def test_an_agent_served_alone_cannot_ask_anyone_and_goes_on_without_an_answer(
    tmp_path: Path, database_logins: Logins, database: Database
):
    root = tmp_path / "sub_graphs"
    write_folder(root, "other")
    write_folder(root, "helper", code=AGENT_TOOL.format(name="Helper"))
    write_folder(root, "helper/src/sub_graphs/echo")
    approve(tmp_path)
    script = [[("ask_human", {"question": "Which colour?"})], "Nobody to ask, so I did nothing."]

    with OpenAICompatibleServer(script) as model:
        env = serve_env(tmp_path, database_logins, **server_env(model))
        async with stdio_session(tmp_path, env, "--agent", "helper") as session:
            listed = [tool.name for tool in (await session.list_tools()).tools]
            asked = await asyncio.wait_for(
                session.call_tool("helper_ask", {"request": "paint it"}), START_SECONDS
            )

    assert listed == ["helper_ask"]
    assert not asked.isError
    assert answer(asked)["message"] == "Nobody to ask, so I did nothing."
    tool_answer = model.requests[1]["messages"][-1]  # what the agent's model heard of ask_human
    assert tool_answer["role"] == "tool" and "no one can be asked here" in tool_answer["content"]
    request_id = str(asked.structuredContent["request_id"])  # type: ignore[index]
    tree = await request_tree(database, request_id, user_id="local")
    assert [(n.depth, n.tool, n.outcome) for n in tree] == [
        (0, "helper", "completed"),
        (1, "ask_human", "failed"),
    ]


async def test_over_http_a_client_lists_and_calls_and_a_stop_ends_in_order(
    tmp_path: Path, database_logins: Logins
):
    write_folder(tmp_path / "sub_graphs", "echo")
    approve(tmp_path)
    args = ["mcp", "serve", "--transport", "http", "--port", "0", "-u", "sam"]
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=tmp_path, env=serve_env(tmp_path, database_logins), text=True, start_new_session=True,
    )
    try:
        url = await asyncio.wait_for(asyncio.to_thread(served_url, process.stderr), START_SECONDS)
        async with (
            streamable_http_client(url) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await asyncio.wait_for(session.initialize(), START_SECONDS)
            listed = [tool.name for tool in (await session.list_tools()).tools]
            said = await session.call_tool("echo_say", {"text": "over http"})
    finally:
        process.terminate()
        out, errors = process.communicate(timeout=60)

    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    assert listed == ["echo_say"]
    assert answer(said) == {"status": "success", "message": "over http"}
    assert process.returncode == 143 and out == ""
    assert "Traceback" not in errors


def served_url(stream: IO[str] | None) -> str:
    """The URL the server says it serves at (read line by line until it says so)."""
    assert stream is not None
    for line in stream:
        found = re.search(r" at (http://\S+) as user", line)
        if found:
            return found.group(1)
    raise AssertionError("the server ended without serving")


def test_an_unknown_agent_is_one_line_and_nothing_is_served(cli, tmp_path: Path):
    write_folder(tmp_path / "sub_graphs", "echo")
    approve(tmp_path)

    done = cli("mcp", "serve", "--transport", "http", "--agent", "nope", cwd=tmp_path)

    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "error: No approved top-level tool folder 'nope' to serve (approved: echo)"
    )
    assert "serving" not in done.stderr


# Imports as long as FLAG does not exist; with it, its import fails.
FLAGGED_TOOL = "from pathlib import Path\nif Path({flag!r}).exists():\n    raise RuntimeError('broken on purpose')\n" + ECHO_TOOL


@asynccontextmanager
async def held_database(logins: Logins) -> AsyncIterator[tuple[dict[str, str], asyncio.Event]]:
    """The database's URLs through a relay on 127.0.0.1 that lets no connection through until
    the event is set."""
    gate = asyncio.Event()
    url = make_url(logins.owner_url)
    socket_path = f"{url.query['host']}/.s.PGSQL.{url.query.get('port', '5432')}"

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await gate.wait()
        upstream_reader, upstream_writer = await asyncio.open_unix_connection(socket_path)
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    def relayed(login: str) -> str:
        given = make_url(login)
        return given.set(host="127.0.0.1", port=port, query={}).render_as_string(hide_password=False)

    urls = {"DATABASE_URL": relayed(logins.owner_url), "DATABASE_APP_URL": relayed(logins.app_url)}
    async with server:
        yield urls, gate


# Runs `orchestrator ARGS` (after the path of a file), writing to that file the modules
# loaded when the first `tools/list` comes, before the answer.
FIRST_LISTING_PROBE = """
import sys
from pathlib import Path

from orchestrator.serve.server_thread import ServerThread

written, listing = Path(sys.argv[1]), ServerThread.listing


async def first_listing(self):
    if not written.exists():
        written.write_text("\\n".join(sorted(sys.modules)))
    return await listing(self)


ServerThread.listing = first_listing
sys.argv = ["orchestrator", *sys.argv[2:]]
from orchestrator.launch import main

main()
"""
# What the runtime loads, and the database's drivers.
NOT_BEFORE_THE_FIRST_ANSWER = ("langchain", "langchain_core", "langgraph", "sqlalchemy", "psycopg", "openai")


async def test_the_first_listing_is_answered_before_the_runtime_or_the_database_loads(
    tmp_path: Path, database_logins: Logins
):
    root = tmp_path / "sub_graphs"
    write_folder(root, "echo")
    approve(tmp_path)
    start_approved(load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data"))
    wait_for_manifests()  # the folder's tools, recorded: the listing needs no import
    loaded_file = tmp_path / "loaded.txt"

    probe = ("-c", FIRST_LISTING_PROBE, str(loaded_file))
    async with stdio_session(tmp_path, serve_env(tmp_path, database_logins), launch=probe) as session:
        listed = [tool.name for tool in (await session.list_tools()).tools]
        said = await asyncio.wait_for(session.call_tool("echo_say", {"text": "hi"}), START_SECONDS)

    loaded = loaded_file.read_text().split()
    early = [
        m for m in loaded if any(m == n or m.startswith(f"{n}.") for n in NOT_BEFORE_THE_FIRST_ANSWER)
    ]
    assert listed == ["echo_say"]
    assert "orchestrator.serve.server_thread" in loaded, "the probe saw the server"
    assert early == [], "loaded before the first answer"
    assert not said.isError, "then the runtime loads, and calls run"


async def test_tools_are_listed_from_their_manifests_before_the_database_answers_and_imported_at_their_first_call(
    tmp_path: Path, database_logins: Logins
):
    root = tmp_path / "sub_graphs"
    marker, flag = tmp_path / "spy-imported", tmp_path / "break-flaky"
    write_folder(root, "spy", code=marker_code(marker))
    write_folder(root, "flaky", code=FLAGGED_TOOL.format(flag=str(flag)))
    approve(tmp_path)
    # An earlier start imported both and recorded their tools (their manifests).
    start_approved(load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data"))
    wait_for_manifests()
    marker.unlink()
    flag.write_text("")  # from now on flaky's import fails

    async with held_database(database_logins) as (urls, gate):
        env = serve_env(tmp_path, database_logins, **urls)
        async with stdio_session(tmp_path, env) as session:
            listed = {tool.name: tool for tool in (await session.list_tools()).tools}
            imported_when_listed = marker.exists()
            ready_when_listed = "serving" in (tmp_path / "err.txt").read_text()
            gate.set()
            broken = await asyncio.wait_for(
                session.call_tool("flaky_say", {"text": "hi"}), START_SECONDS
            )
            said = await session.call_tool("spy_say", {"text": "hi", "times": 2})
            again = await session.call_tool("flaky_say", {"text": "hi"})

    assert sorted(listed) == ["flaky_say", "spy_say"]
    assert listed["spy_say"].inputSchema["required"] == ["text"]
    assert not imported_when_listed, "listed from the manifest: no folder imported"
    assert not ready_when_listed, "listed while the database let no one in"

    assert broken.isError and answer(broken)["error_code"] == "folder_unavailable"
    message = str(answer(broken)["message"])
    assert "flaky could not be imported at its first call" in message
    assert "broken on purpose" in message
    assert not said.isError and answer(said) == {"status": "success", "message": "hi hi"}
    assert marker.exists(), "imported at its first call"
    assert again.isError  # the server kept running; the folder stays unavailable
    assert "Traceback" not in (tmp_path / "err.txt").read_text()


def test_a_served_result_too_long_says_the_whole_is_the_structured_content():
    from orchestrator.serve.mcp_server import call_result
    from orchestrator.tools.results import READ_RESULT_TOOL, RESULT_HANDLE, ToolResult

    long = ToolResult(message="x" * 10_000, metadata={RESULT_HANDLE: "result:abc"})

    served = call_result(long, max_chars=1000)

    [content] = served.content
    assert isinstance(content, TextContent)
    assert content.text.startswith(long.model_text()[:1000])
    assert content.text.endswith("The whole result is this answer's structured content]")
    assert READ_RESULT_TOOL not in content.text, "a client of the server has no reader"
    assert served.structuredContent is not None and served.structuredContent["message"] == "x" * 10_000
