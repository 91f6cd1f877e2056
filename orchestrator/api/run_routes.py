"""`/threads/{thread_id}/runs`: start a turn, stream it, wait for it, join it, cancel it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from orchestrator.api.assistants import ORCHESTRATOR
from orchestrator.api.bodies import RunCreate
from orchestrator.api.live_run import LiveRun
from orchestrator.api.request_body import body_of
from orchestrator.api.server_state import ServerState, caller, server_of
from orchestrator.api.wire import dumps, interrupts_of, json_response, run_json
from orchestrator.errors import RequestRefusedError
from orchestrator.store.runs import RunRow, get_run, thread_runs
from orchestrator.store.threads import get_thread


async def create(request: Request) -> Response:
    """A run in the background: answered at once with the run."""
    run = await _start(request)
    return json_response(run_json(run.row), headers=_where(run))


async def stream(request: Request) -> Response:
    """A run, its events streamed as they come (server-sent events)."""
    body = await body_of(request, RunCreate)
    run = await _start(request, body)
    cancel = body.on_disconnect == "cancel"
    return _event_stream(run, request, after=-1, cancel_on_disconnect=cancel)


async def wait(request: Request) -> Response:
    """A run, answered with the thread's values once it ended."""
    run = await _start(request)
    await run.ended()
    return json_response(await _values(request, run.row.thread_id, run), headers=_where(run))


async def join(request: Request) -> Response:
    """Wait for a run of the thread to end: the thread's values then."""
    server, row = await _own_run(request)
    live = server.board.live(row.run_id, identity=caller(request))
    if live is not None:
        await live.ended()
    return json_response(await _values(request, row.thread_id, live))


async def join_stream(request: Request) -> Response:
    """A run's events, from the start or after `Last-Event-ID`, until it ends."""
    server, row = await _own_run(request)
    live = server.board.live(row.run_id, identity=caller(request))
    if live is None:  # it ended before this server started, or long ago: only its end
        return _finished_stream(row)
    after = _last_event_id(request)
    return _event_stream(live, request, after=after, cancel_on_disconnect=False)


async def get(request: Request) -> Response:
    _, row = await _own_run(request)
    return json_response(run_json(row))


async def list_runs(request: Request) -> Response:
    server, thread_id = server_of(request), request.path_params["thread_id"]
    user_id = caller(request).user_id
    if await get_thread(server.storage.database, thread_id, user_id=user_id) is None:
        raise RequestRefusedError(404, f"thread {thread_id} not found")
    limit, offset = _int_param(request, "limit", 10), _int_param(request, "offset", 0)
    rows = await thread_runs(server.storage.database, thread_id, user_id=user_id, limit=limit, offset=offset)
    return json_response([run_json(row) for row in rows])


async def cancel(request: Request) -> Response:
    server, row = await _own_run(request)
    live = server.board.live(row.run_id, identity=caller(request))
    if live is None or live.done:
        raise RequestRefusedError(409, f"run {row.run_id} is not running")
    if request.query_params.get("wait", "").lower() in ("1", "true"):
        await server.board.cancel(live)
    elif live.task is not None:
        live.task.cancel()
    return Response(status_code=202 if not live.done else 204)


async def _start(request: Request, body: RunCreate | None = None) -> LiveRun:
    body = body or await body_of(request, RunCreate)
    server, thread_id = server_of(request), request.path_params["thread_id"]
    return await server.board.start(thread_id, body, identity=caller(request))


async def _own_run(request: Request) -> tuple[ServerState, RunRow]:
    server, params = server_of(request), request.path_params
    row = await get_run(
        server.storage.database, params["run_id"], thread_id=params["thread_id"], user_id=caller(request).user_id
    )
    if row is None:
        raise RequestRefusedError(404, f"run {params['run_id']} not found")
    live = server.board.live(row.run_id, identity=caller(request))
    return server, row if live is None else _with_status(row, live)


def _with_status(row: RunRow, live: LiveRun) -> RunRow:
    return replace(row, status=live.status)


async def _values(request: Request, thread_id: str, live: LiveRun | None) -> dict[str, object]:
    """The thread's values once the run ended, `__interrupt__` beside them while questions wait.

    A run that ended as its stream showed it answers from that; a cancelled or
    failed one (its history mended since), or one no longer held, from the thread.
    """
    if live is not None and live.values is not None and live.status in ("success", "interrupted") and not _cancelled(live):
        values, interrupts = dict(live.values), live.interrupts
    else:
        server = server_of(request)
        assistant = live.row.assistant_id if live is not None else ORCHESTRATOR
        session = server.board.session(assistant, thread_id, identity=caller(request))
        state = await session.graph.aget_state(session.config)
        values, interrupts = dict(state.values), state.interrupts
    if interrupts:
        values["__interrupt__"] = interrupts_of(interrupts)
    if live is not None and live.status == "error":
        values["__error__"] = next((data for name, data in live.events if name == "error"), None)
    return values


def _cancelled(live: LiveRun) -> bool:
    return live.status == "interrupted" and not live.interrupts


def _event_stream(run: LiveRun, request: Request, *, after: int, cancel_on_disconnect: bool) -> Response:
    async def events() -> AsyncIterator[str]:
        finished = False
        try:
            async for index, (name, data) in run.follow(after=after):
                yield f"event: {name}\ndata: {dumps(data)}\nid: {index}\n\n"
            finished = True
        finally:
            if not finished and cancel_on_disconnect and run.task is not None:
                run.task.cancel()  # the client went away, and asked that its run go too

    return StreamingResponse(events(), media_type="text/event-stream", headers=_where(run))


def _finished_stream(row: RunRow) -> Response:
    async def events() -> AsyncIterator[str]:
        yield f"event: metadata\ndata: {dumps({'run_id': row.run_id, 'attempt': 1})}\n\n"
        yield "event: end\ndata: null\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def _where(run: LiveRun) -> dict[str, str]:
    """Where the SDK finds the run's id (`Content-Location`) and reconnects to (`Location`)."""
    path = f"/threads/{run.row.thread_id}/runs/{run.run_id}"
    return {"Content-Location": path, "Location": f"{path}/stream"}


def _last_event_id(request: Request) -> int:
    given = request.headers.get("last-event-id", "")
    return int(given) if given.isdigit() else -1


def _int_param(request: Request, name: str, default: int) -> int:
    given = request.query_params.get(name)
    if given is None:
        return default
    if not given.isdigit() or int(given) > 1000:
        raise RequestRefusedError(422, f"{name} must be a whole number from 0 to 1000")
    return int(given)


ROUTES = [
    Route("/threads/{thread_id}/runs", create, methods=["POST"]),
    Route("/threads/{thread_id}/runs", list_runs, methods=["GET"]),
    Route("/threads/{thread_id}/runs/stream", stream, methods=["POST"]),
    Route("/threads/{thread_id}/runs/wait", wait, methods=["POST"]),
    Route("/threads/{thread_id}/runs/{run_id}", get, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/join", join, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/stream", join_stream, methods=["GET"]),
    Route("/threads/{thread_id}/runs/{run_id}/cancel", cancel, methods=["POST"]),
]
