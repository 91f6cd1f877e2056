"""`/threads`: a user's conversations, their state and history (another user's are 404)."""

from __future__ import annotations

import uuid

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from orchestrator.api.assistants import ORCHESTRATOR
from orchestrator.api.bodies import HistoryRequest, ThreadCreate, ThreadPatch, ThreadSearch
from orchestrator.api.request_body import body_of
from orchestrator.api.server_state import ServerState, caller, server_of
from orchestrator.api.wire import json_response, state_json, thread_json
from orchestrator.conversation.session import Session
from orchestrator.errors import RequestRefusedError
from orchestrator.store.threads import (
    ThreadRow,
    create_thread,
    delete_thread,
    get_thread,
    search_threads,
    update_thread,
)


async def create(request: Request) -> Response:
    body = await body_of(request, ThreadCreate)
    server, user_id = server_of(request), caller(request).user_id
    thread_id = body.thread_id or str(uuid.uuid4())
    made = await create_thread(server.storage.database, thread_id, user_id=user_id, metadata=body.metadata)
    if made is None:
        mine = await get_thread(server.storage.database, thread_id, user_id=user_id)
        if mine is None or body.if_exists == "raise":
            raise RequestRefusedError(409, f"thread {thread_id} already exists")
        made = mine
    return json_response(thread_json(made, status="idle"))


async def get(request: Request) -> Response:
    server, thread = await _own_thread(request)
    session = _session(server, thread, request)
    state = await session.graph.aget_state(session.config)
    return json_response(thread_json(thread, status=_status(server, thread, bool(state.interrupts)), values=state.values))


async def search(request: Request) -> Response:
    body = await body_of(request, ThreadSearch)
    server, user_id = server_of(request), caller(request).user_id
    found = await search_threads(
        server.storage.database, user_id=user_id, metadata=body.metadata, limit=body.limit, offset=body.offset
    )
    return json_response([thread_json(t, status=_status(server, t, False)) for t in found])


async def patch(request: Request) -> Response:
    body = await body_of(request, ThreadPatch)
    server, user_id = server_of(request), caller(request).user_id
    thread_id = request.path_params["thread_id"]
    changed = await update_thread(server.storage.database, thread_id, user_id=user_id, metadata=body.metadata)
    if changed is None:
        raise _not_found(thread_id)
    return json_response(thread_json(changed, status=_status(server, changed, False)))


async def delete(request: Request) -> Response:
    server, thread = await _own_thread(request)
    if server.board.busy(thread.thread_id) is not None:
        raise RequestRefusedError(409, f"thread {thread.thread_id} is running: cancel its run first")
    user_id = caller(request).user_id
    if await delete_thread(server.storage.database, thread.thread_id, user_id=user_id):
        server.board.forget(thread.thread_id, user_id=user_id)
        await server.storage.checkpointer.adelete_thread(thread.thread_id)
    return Response(status_code=204)


async def state(request: Request) -> Response:
    server, thread = await _own_thread(request)
    session = _session(server, thread, request)
    return json_response(state_json(await session.graph.aget_state(session.config)))


async def history(request: Request) -> Response:
    limit = (await body_of(request, HistoryRequest)).limit if request.method == "POST" else _limit(request)
    server, thread = await _own_thread(request)
    session = _session(server, thread, request)
    states = [state_json(s) async for s in session.graph.aget_state_history(session.config, limit=limit)]
    return json_response(states)


async def _own_thread(request: Request) -> tuple[ServerState, ThreadRow]:
    server, thread_id = server_of(request), request.path_params["thread_id"]
    thread = await get_thread(server.storage.database, thread_id, user_id=caller(request).user_id)
    if thread is None:
        raise _not_found(thread_id)
    return server, thread


def _session(server: ServerState, thread: ThreadRow, request: Request) -> Session:
    assistant = str(thread.metadata.get("assistant_id") or ORCHESTRATOR)
    return server.board.session(assistant, thread.thread_id, identity=caller(request))


def _status(server: ServerState, thread: ThreadRow, waiting: bool) -> str:
    if server.board.busy(thread.thread_id) is not None:
        return "busy"
    return "interrupted" if waiting else "idle"


def _limit(request: Request) -> int:
    try:
        return HistoryRequest.model_validate({"limit": request.query_params.get("limit")}).limit
    except ValueError as problem:
        raise RequestRefusedError(422, f"limit: {problem}") from problem


def _not_found(thread_id: str) -> RequestRefusedError:
    return RequestRefusedError(404, f"thread {thread_id} not found")


ROUTES = [
    Route("/threads", create, methods=["POST"]),
    Route("/threads/search", search, methods=["POST"]),
    Route("/threads/{thread_id}", get, methods=["GET"]),
    Route("/threads/{thread_id}", patch, methods=["PATCH"]),
    Route("/threads/{thread_id}", delete, methods=["DELETE"]),
    Route("/threads/{thread_id}/state", state, methods=["GET"]),
    Route("/threads/{thread_id}/history", history, methods=["GET", "POST"]),
]
