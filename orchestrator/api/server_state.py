"""What every route of `orchestrator serve` reaches: storage, assistants, live runs, the caller."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from orchestrator.api.assistants import Assistants
from orchestrator.api.identity import Authenticator, Identity
from orchestrator.api.run_board import RunBoard
from orchestrator.store.storage import Storage


@dataclass
class ServerState:
    """One server's parts, made at its start (see `app.build_app`)."""

    storage: Storage
    assistants: Assistants
    board: RunBoard
    authenticator: Authenticator


def server_of(request: Request) -> ServerState:
    """The server a request came to."""
    state: ServerState = request.app.state.server
    return state


def caller(request: Request) -> Identity:
    """Who the request acts for (the authentication middleware set it; no route runs without)."""
    identity: Identity = request.state.identity
    return identity
