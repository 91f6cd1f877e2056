"""`orchestrator mcp serve`: approved tools to any MCP client; `mcp add`: an MCP server folder.

`serve` never asks anything (over stdio, standard input is the protocol):
folders and MCP server definitions awaiting a decision are left out and named
on standard error, and calls that need a decision are refused unless
`--allow-sensitive` is given.
"""

from __future__ import annotations

import asyncio
import os
import re
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli.common import err, identifier, out, settings_or_exit, user_errors
from orchestrator.cli.startup import DatabaseStart, Startup, prepare_unattended, run_command
from orchestrator.errors import UserError
from orchestrator.settings import Settings
from orchestrator.terminal.text import display_path, shown

if TYPE_CHECKING:
    from orchestrator.runtime import Orchestrator
    from orchestrator.serve.server_thread import ServerThread
    from orchestrator.serve.transports import StdioProtocol

mcp_app = typer.Typer(
    no_args_is_help=True,
    help="Serve the approved tools over MCP; add an MCP server as a tool folder.",
)

ALLOW_ADVICE = "`orchestrator mcp serve --allow-sensitive` lets such calls run without asking."
LEFT_OUT = "note: not served, awaiting your decision: {keys} (`orchestrator chat` asks about them)"
SERVING = "serving {count} tool(s) over MCP {where} as user {user}"
NO_TOOLS = "note: no approved tools to serve (`orchestrator tools list` shows the folders)"
OPEN_HOST = (
    "note: listening on {host}, beyond this machine, with no authentication: "
    "whoever reaches it can call these tools"
)
ADDED = "created {folder}; `orchestrator chat` asks you to approve it at its next start"
BAD_NAME = (
    "{name!r} is not a valid tool name: lowercase letters, digits and _, "
    "starting with a letter, at most 40 characters"
)
# How long `mcp serve` over stdio waits for its client's first request before it loads the
# rest (the database, the model, the folders): a client asks at once, or is idle at first.
FIRST_REQUEST_SECONDS = 1.0
ONE_TRANSPORT = (
    "give the server's command after `--` (stdio) or --url URL (streamable HTTP), not both"
)


class Transport(StrEnum):
    """How clients reach the served tools."""

    stdio = "stdio"
    http = "http"


@mcp_app.command("serve")
def serve(
    agent: Annotated[
        str | None,
        typer.Option(help="Serve one top-level folder only (an agent: its ask and its actions)."),
    ] = None,
    transport: Annotated[
        Transport, typer.Option(help="stdio, or streamable HTTP.")
    ] = Transport.stdio,
    host: Annotated[str, typer.Option(help="HTTP: the address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="HTTP: the port (0: a free one, printed).")
    ] = 8000,
    user: Annotated[
        str,
        typer.Option(
            "--user", "-u", help="Whose calls these are, in the request log.", callback=identifier
        ),
    ] = "local",
    allow_sensitive: Annotated[
        bool,
        typer.Option(
            "--allow-sensitive",
            help="Run the calls that need a decision without asking (by default they are refused).",
        ),
    ] = False,
) -> None:
    """Serve the approved top-level tools (or one agent's) to MCP clients; asks nothing."""
    from orchestrator.serve.transports import claim_stdio

    # Before anything can write to standard output: it is the protocol's alone.
    protocol = claim_stdio() if transport is Transport.stdio else None
    started: list[ServerThread] = []

    def serve_first(settings: Settings) -> None:
        # Serving first, from the manifests; the database, the model and the middleware load
        # once the client has its first answer (over HTTP clients come later: at once).
        started.append(
            _start_server(settings, agent=agent, protocol=protocol, host=host, port=port)
        )
        if protocol is not None:
            started[0].asked(timeout=FIRST_REQUEST_SECONDS)

    def prepare(settings: Settings, database: DatabaseStart | None) -> Startup:
        from orchestrator.serve.mcp_server import unattended_middleware

        middleware = unattended_middleware(
            settings, allow_sensitive=allow_sensitive, advice=ALLOW_ADVICE
        )
        return prepare_unattended(settings, database, middleware=middleware)

    async def command(startup: Startup, runtime: Orchestrator) -> int:
        return await _serve(startup, runtime, started[0], agent=agent, user=user, host=host)

    try:
        code = run_command(command, prepare=prepare, first=serve_first)
    finally:
        for server in started:
            server.stop()
    raise typer.Exit(code)


def _start_server(
    settings: Settings, *, agent: str | None, protocol: StdioProtocol | None, host: str, port: int
) -> ServerThread:
    """The MCP server, serving on its thread: the first listing from the folders' manifests.

    Raises (as one line) UserError for an unknown `agent` or an address that cannot be listened on.
    """
    from orchestrator.folders.approvals import review_folders
    from orchestrator.listening import listen
    from orchestrator.serve.listing import offered_tools
    from orchestrator.serve.server_thread import Endpoint, ServerThread

    with user_errors():
        offered = offered_tools(settings, review_folders(settings, _decide_nothing), agent=agent)
        listening = listen(host, port) if protocol is None else None
    server = ServerThread(Endpoint(protocol, listening, host), offered=offered)
    server.start()
    return server


def _decide_nothing(*_: object) -> None:
    return None  # as at the end of input: what awaits a decision stays undecided


async def _serve(
    startup: Startup,
    runtime: Orchestrator,
    server: ServerThread,
    *,
    agent: str | None,
    user: str,
    host: str,
) -> int:
    from orchestrator.serve.mcp_server import ServedTools
    from orchestrator.serve.selection import awaiting_decision, served_tools
    from orchestrator.serve.server_thread import RuntimeTools

    tools = served_tools(runtime, agent)
    left_out = awaiting_decision(startup.settings, startup.reviewed, runtime)
    if left_out:
        _note(LEFT_OUT.format(keys=", ".join(left_out)))
    if not tools:
        _note(NO_TOOLS)
    served = ServedTools.of(runtime, tools, user=user)
    server.ready(RuntimeTools(served.listing(), served.call, asyncio.get_running_loop()))
    try:
        if server.endpoint.protocol is not None:
            where = "on standard input and output"
        else:
            if host not in ("127.0.0.1", "localhost", "::1"):
                _note(OPEN_HOST.format(host=host))
            where = f"at {await server.address()}"
        _note(SERVING.format(count=len(tools), where=where, user=user))
        await server.finished()
    except (
        asyncio.CancelledError
    ):  # a signal ends the command: no call runs on as the runtime closes
        await asyncio.to_thread(server.stop)
        raise
    return 0


def _note(line: str) -> None:
    err.print(line, markup=False, highlight=False)


@mcp_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The folder's name, e.g. time_server.")],
    command: Annotated[
        list[str] | None,
        typer.Argument(help="After `--`: the command that runs the server, and its arguments."),
    ] = None,
    url: Annotated[str | None, typer.Option(help="A streamable-HTTP server's URL.")] = None,
    description: Annotated[str | None, typer.Option(help="What the server is for.")] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(help="VAR=ENVNAME: the server's VAR is our environment variable ENVNAME."),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(help="NAME=ENVNAME (HTTP): header NAME is our environment variable ENVNAME."),
    ] = None,
    read: Annotated[
        list[str] | None, typer.Option(help="A path the sandboxed server may read (repeatable).")
    ] = None,
    write: Annotated[
        list[str] | None,
        typer.Option(help="A path the sandboxed server may read and change (repeatable)."),
    ] = None,
    connect: Annotated[
        list[int] | None,
        typer.Option(min=1, max=65535, help="A TCP port the sandboxed server may connect to."),
    ] = None,
) -> None:
    """Write sub_graphs/NAME/tool_config.yaml for an MCP server (approved at the next chat).

    A stdio server runs sandboxed (docs/sandbox.md): --read, --write and --connect
    add to what it may reach.
    """
    launched = url or " ".join(command or [])
    with user_errors():
        section = server_section(
            _from_here(command or []), url=url, env=env or [], headers=header or []
        )
        sandbox = {
            "read": _paths_from_here(read),
            "write": _paths_from_here(write),
            "connect": connect,
        }
        folder = write_server_folder(
            name,
            directory=settings_or_exit().sub_graphs_dir,
            section=section,
            description=description or f"MCP server: {launched}",
            sandbox={key: value for key, value in sandbox.items() if value},
        )
    out.print(ADDED.format(folder=shown(display_path(folder))), highlight=False)


def _from_here(command: list[str]) -> list[str]:
    """The command, a relative path to its program (`./node_modules/.bin/x`) made absolute:
    you name it from here; the server starts in its folder."""
    if command and os.sep in command[0] and not os.path.isabs(command[0]):
        return [os.path.abspath(command[0]), *command[1:]]
    return command


def _paths_from_here(paths: list[str] | None) -> list[str] | None:
    """Relative sandbox paths made absolute from here (`~` and `${VAR}` are kept, for later)."""
    kept = ("~", "$", os.sep)
    return [p if p.startswith(kept) else os.path.abspath(p) for p in paths] if paths else paths


def server_section(
    command: list[str], *, url: str | None, env: list[str], headers: list[str]
) -> dict[str, object]:
    """The `mcp:` section of a tool_config.yaml, with the empty keys left out."""
    if bool(command) == (url is not None):
        raise UserError(ONE_TRANSPORT)
    section: dict[str, object] = {"url": url}
    if command:
        section = {"command": command[0], "args": command[1:]}
    section["env"] = _pairs(env, option="--env")
    section["headers"] = _pairs(headers, option="--header")
    return {key: value for key, value in section.items() if value}


def write_server_folder(
    name: str,
    *,
    directory: Path,
    section: dict[str, object],
    description: str,
    sandbox: dict[str, object] | None = None,
) -> Path:
    """Write `directory/name/tool_config.yaml` for the MCP server `section` describes.

    Raises UserError for a bad name, a folder that exists, or a section the
    configuration would refuse.
    """
    import yaml
    from pydantic import ValidationError

    from orchestrator.errors import validation_problems
    from orchestrator.folders.tool_config import NAME_PATTERN, ToolConfig

    if not re.match(NAME_PATTERN, name):
        raise UserError(BAD_NAME.format(name=name))
    folder = directory / name
    if folder.exists() or folder.is_symlink():  # a dangling link too: writing would follow it
        raise UserError(f"{display_path(folder)} already exists")
    config = {
        "name": name,
        "description": description,
        "version": "1",
        "mcp": section,
        **({"sandbox": sandbox} if sandbox else {}),
    }
    try:
        ToolConfig.model_validate(config)
    except ValidationError as error:
        raise UserError(f"not written: {validation_problems(error)}") from None
    folder.mkdir(parents=True)
    text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
    (folder / "tool_config.yaml").write_text(text, encoding="utf-8")
    return folder


def _pairs(given: list[str], *, option: str) -> dict[str, str]:
    pairs = {}
    for item in given:
        key, sign, variable = item.partition("=")
        if not (key and sign and variable):
            raise UserError(f"{option} {item!r}: expected NAME=ENVNAME")
        pairs[key] = variable
    return pairs
