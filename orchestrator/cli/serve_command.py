"""`orchestrator serve`: the orchestrator over HTTP for a team (see docs/server.md).

It starts as `chat` does (the owner approves folders at the terminal; without
one, what awaits a decision stays undecided), then serves the LangGraph Agent
Server API to authenticated users (`orchestrator users`) until SIGTERM or Ctrl-C.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from orchestrator.cli.common import err
from orchestrator.cli.startup import JobOptions, Startup, run_command

if TYPE_CHECKING:
    from orchestrator.api.server import Listen
    from orchestrator.runtime import Orchestrator

HostOption = Annotated[str, typer.Option("--host", help="The address to listen on.")]
PortOption = Annotated[
    int, typer.Option("--port", min=0, max=65535, help="The port to listen on (0: a free one).")
]
CertOption = Annotated[
    Path | None, typer.Option("--tls-cert", help="A PEM certificate: serve HTTPS (with --tls-key).")
]
KeyOption = Annotated[Path | None, typer.Option("--tls-key", help="The certificate's PEM private key.")]
AgentsOption = Annotated[
    bool, typer.Option("--agents", help="Offer each approved agent folder as an assistant of its own.")
]
GraceOption = Annotated[
    int,
    typer.Option("--grace", help="Seconds running turns get to finish at shutdown; the rest are stopped (interrupted)."),
]
TLS_PAIR = "--tls-cert and --tls-key go together"
NOT_LOOPBACK = (
    "note: listening on {host}: every request needs a key, but without --tls-cert keys cross "
    "the network in clear text; put a TLS reverse proxy in front (docs/server.md)"
)


def serve(
    host: HostOption = "127.0.0.1",
    port: PortOption = 8123,
    tls_cert: CertOption = None,
    tls_key: KeyOption = None,
    agents: AgentsOption = False,
    grace: GraceOption = 30,
) -> None:
    """Serve the orchestrator over HTTP (the LangGraph Agent Server's API) to authenticated users."""
    if (tls_cert is None) != (tls_key is None):
        raise typer.BadParameter(TLS_PAIR)
    if tls_cert is not None and tls_key is not None:
        _check_tls(tls_cert, tls_key)
    from orchestrator.api.server import Listen as ListenAt

    listen = ListenAt(host, port, tls_cert, tls_key, grace)

    async def command(startup: Startup, runtime: Orchestrator) -> int:
        return await _serve(runtime, listen, agents=agents)

    raise typer.Exit(run_command(command, jobs=JobOptions(), reads_words=False, loop_factory=_event_loop()))


def _check_tls(cert: Path, key: Path) -> None:
    """The certificate and key load as a pair, or a one-line error naming what is wrong, before
    anything starts (uvicorn would fail only once it said it serves)."""
    import ssl

    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.is_file():
            raise typer.BadParameter(f"{path} is not a file", param_hint=flag)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as error:
        reason = getattr(error, "reason", None) or error.strerror or str(error)
        raise typer.BadParameter(
            f"{cert} and {key} are not a PEM certificate and its private key ({reason})",
            param_hint="--tls-cert/--tls-key",
        ) from None


def _event_loop() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (not on Windows): a server's every request,
    turn and database round trip is a turn of its loop, and uvloop's are the cheaper."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _serve(runtime: Orchestrator, listen: Listen, *, agents: bool) -> int:
    from orchestrator.api.assistants import Assistants
    from orchestrator.api.auth import ServerAuthenticator
    from orchestrator.api.recovery import settle_left_runs
    from orchestrator.api.run_board import RunBoard
    from orchestrator.api.server import serve as serve_http
    from orchestrator.api.server_state import ServerState

    storage = runtime.storage
    if storage is None:  # run_command always opens it; said in case that ever changes
        err.print("error: `orchestrator serve` needs its database", highlight=False)
        return 1
    _access_log_on_stderr()
    assistants = Assistants(runtime, agents=agents)
    board = RunBoard(storage, assistants)
    authenticator = ServerAuthenticator.from_settings(runtime.settings, storage.database)
    server = ServerState(storage, assistants, board, authenticator)
    for line in await settle_left_runs(board, storage):
        err.print(f"[yellow]note:[/yellow] {escape(line)}", highlight=False)
    if listen.host not in ("127.0.0.1", "localhost", "::1") and listen.tls_cert is None:
        err.print(NOT_LOOPBACK.format(host=listen.host), markup=False, highlight=False)
    names = ", ".join(a.graph_id for a in assistants.all())
    try:
        await serve_http(server, listen, on_ready=lambda url: _ready(url, names))
    except asyncio.CancelledError:
        # Only the command's signal (SIGTERM, Ctrl-C) cancels it, and the server has stopped in
        # order: a process manager's stop is a success (systemd counts status 143 a failure),
        # as for `orchestrator worker`.
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        err.print("[dim]stopped[/dim]")
    return 0


def _ready(url: str, names: str) -> None:
    err.print(f"serving {names} at {url} (Ctrl-C stops)", markup=False, highlight=False)


def _access_log_on_stderr() -> None:
    """One line per request, whatever the log level of the rest (see `api.access_log`)."""
    access = logging.getLogger("orchestrator.access")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False
