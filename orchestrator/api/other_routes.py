"""`/assistants`, the store's search of the user's own memory, and what is asked without a key:
liveness (`/ok`), readiness (`/ready`) and `/info`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from orchestrator.api.bodies import StoreSearch
from orchestrator.api.request_body import body_of
from orchestrator.api.server_state import caller, server_of
from orchestrator.api.wire import json_response
from orchestrator.errors import RequestRefusedError
from orchestrator.store.messages import FoundMessage
from orchestrator.version import __version__

MEMORY = "memory"  # the store's namespace: the user's messages, searched
OPEN_PATHS = frozenset({"/ok", "/ready", "/info"})  # answered without a key


async def search_assistants(request: Request) -> Response:
    server = server_of(request)
    started = server.assistants.started
    return json_response([a.to_json(started=started) for a in server.assistants.all()])


async def get_assistant(request: Request) -> Response:
    server = server_of(request)
    assistant = server.assistants.named(request.path_params["assistant_id"])
    return json_response(assistant.to_json(started=server.assistants.started))


async def search_store(request: Request) -> Response:
    """The user's earlier messages, found by full-text search (`query`), as the store's items."""
    body = await body_of(request, StoreSearch)
    if body.namespace_prefix[:1] not in ([], [MEMORY]):
        return json_response({"items": []})  # no other namespace holds anything
    if not body.query:
        raise RequestRefusedError(422, "query is required: the store is your messages, searched")
    server = server_of(request)
    found = await server.storage.messages.search_messages(
        body.query, caller(request).user_id, limit=body.limit + body.offset
    )
    return json_response({"items": [_item(m) for m in found[body.offset :]]})


def _item(message: FoundMessage) -> dict[str, object]:
    created = message.created_at.isoformat()
    value = {"role": message.role, "content": message.content, "tool_name": message.tool_name}
    return {
        "namespace": [MEMORY, message.session_id],
        "key": message.message_id,
        "value": value,
        "created_at": created,
        "updated_at": created,
        "score": message.score,
    }


async def ok(_: Request) -> Response:
    """Liveness: the process answers."""
    return json_response({"ok": True})


async def ready(request: Request) -> Response:
    """Readiness: the database answers and the server takes runs (503 while it shuts down)."""
    server = server_of(request)
    if server.board.draining:
        return json_response({"ready": False, "reason": "shutting down"}, status=503)
    try:
        await server.storage.database.ping()
    except Exception as problem:  # any failure to answer is "not ready", said
        return json_response({"ready": False, "reason": f"database: {type(problem).__name__}"}, status=503)
    return json_response({"ready": True})


async def info(_: Request) -> Response:
    return json_response({"version": __version__, "flags": {"assistants": True, "crons": False}})


ROUTES = [
    Route("/assistants/search", search_assistants, methods=["POST"]),
    Route("/assistants/{assistant_id}", get_assistant, methods=["GET"]),
    Route("/store/items/search", search_store, methods=["POST"]),
    Route("/ok", ok, methods=["GET"]),
    Route("/ready", ready, methods=["GET"]),
    Route("/info", info, methods=["GET"]),
]
