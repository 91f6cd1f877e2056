"""The connection of `chat --server` and `ask --server` to an `orchestrator serve`.

It speaks the LangGraph Agent Server's API through its official client
(`langgraph-sdk`): a session is a thread, a turn a run of the assistant
`orchestrator` (or of an agent folder the server serves as its own assistant,
`serve --agents`) streamed with the modes the terminal shows. What goes wrong
with the server (down, the key refused, a session that is not the person's)
is a `ServerConnectionError` (orchestrator.errors): one line for the person.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import httpx

from orchestrator.cli.server_client.turn import NOT_ANSWERED
from orchestrator.errors import ServerConnectionError
from orchestrator.tools.hitl import Decision
from orchestrator.version import __version__

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient
    from langgraph_sdk.schema import (
        Command,
        Input,
        RunCreateMetadata,
        StreamMode,
        StreamPart,
        Thread,
        ThreadState,
    )

logger = logging.getLogger(__name__)

ASSISTANT = "orchestrator"
# `updates`, not `values`: each step's new messages, not the whole history again and again.
STREAM_MODES: list[StreamMode] = ["messages-tuple", "custom", "updates"]
# Connecting and each read; a turn's stream may be quiet while a tool runs, so reads wait long.
TIMEOUT = (30.0, None, 30.0, 30.0)  # connect, read, write, pool
CONNECT_RETRIES = 1  # a refused connection tried once more (a blip), not five times
NO_KEY = "set ORCHESTRATOR_API_KEY to the key `orchestrator users key NAME` gave you"
UNREACHABLE = "cannot reach the server at {url} ({reason}); is `orchestrator serve` running there?"
REFUSED_KEY = "the server refused the API key ({detail}): check ORCHESTRATOR_API_KEY"
NOT_FOUND = "the server has no session {session} of yours"
NOT_YOURS = "session {session} is not yours: give another id, or none for a new session"
BUSY = "session {session} is running a turn already (another chat?): try again when it ends"
NO_AGENT = "the server offers no agent {agent}"
NOT_OFFERED = "the server offers no agent {agent} (it offers {offered}; agent folders are offered with `serve --agents`)"
OTHER_AGENT = "session {session} is a chat with another assistant ({detail}): give another session"
BAD_REQUEST = "the server refused the request: {detail}"
RATE_LIMITED = "the server limits how often your key may ask: try again in {wait}"
SERVER_FAILED = "the server failed ({status}): {detail}"
RUN_FAILED = "the turn failed on the server: {detail}"
NOT_A_URL = "--server takes the server's http:// or https:// URL, not {url!r}"
NOT_THE_API = "what answers at {url} is not an `orchestrator serve` (it answered {status}, not the API's JSON)"


def server_error(
    error: Exception, *, url: str, session: str | None = None, agent: str = ASSISTANT
) -> ServerConnectionError:
    """The one line for a failed request (an HTTP error status, or a connection that failed)."""
    if isinstance(error, httpx.HTTPStatusError):
        return _status_error(error.response, url=url, session=session, agent=agent)
    reason = type(error).__name__ if not str(error).strip() else str(error).strip().splitlines()[0]
    return ServerConnectionError(UNREACHABLE.format(url=url, reason=reason))


def _status_error(
    response: httpx.Response, *, url: str, session: str | None, agent: str
) -> ServerConnectionError:
    status = response.status_code
    detail = _detail(response)
    named = session if session is not None else "?"
    # The API's refusals are `{"detail": ...}`; a proxy's 429 and 5xx are said as the server's.
    if (400 <= status < 500 and status != 429 or status == 501) and not _refusal(response):
        return ServerConnectionError(NOT_THE_API.format(url=url, status=status))
    if status == 401:
        return ServerConnectionError(REFUSED_KEY.format(detail=detail))
    if status == 404 and detail.startswith("assistant "):
        return ServerConnectionError(NO_AGENT.format(agent=agent))
    if status == 404:
        return ServerConnectionError(NOT_FOUND.format(session=named))
    if status == 409 and "belongs to assistant" in detail:
        return ServerConnectionError(OTHER_AGENT.format(session=named, detail=detail))
    if status == 409:
        return ServerConnectionError(BUSY.format(session=named))
    if status == 422:
        return ServerConnectionError(BAD_REQUEST.format(detail=detail))
    if status == 429:
        after = response.headers.get("retry-after", "").strip()
        wait = f"{after} s" if after.isdigit() else "a moment"
        return ServerConnectionError(RATE_LIMITED.format(wait=wait))
    return ServerConnectionError(SERVER_FAILED.format(status=status, detail=detail))


def _refusal(response: httpx.Response) -> bool:
    """Whether the answer is a refusal of the API's: JSON with its `detail`."""
    try:
        body: object = response.json()
    except (ValueError, httpx.ResponseNotRead):
        return False
    return isinstance(body, dict) and "detail" in body


def _detail(response: httpx.Response) -> str:
    """What the server said about the failure: its `detail` or `message`, else the status."""
    try:
        body = response.json()
    except (ValueError, httpx.ResponseNotRead):
        body = None
    if isinstance(body, dict):
        for key in ("detail", "message"):
            said = body.get(key)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]  # any JSON
            if isinstance(said, str) and said.strip():
                return " ".join(said.split())
    return f"{response.status_code} {response.reason_phrase}".strip()


def checked_url(url: str) -> str:
    """`url` without a trailing slash, if it is an http(s) URL; else a one-line error."""
    try:
        parsed = httpx.URL(url) if url.startswith(("http://", "https://")) else None
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or not parsed.host:
        raise ServerConnectionError(NOT_A_URL.format(url=url))
    return url.rstrip("/")


@dataclass
class Server:
    """An `orchestrator serve` at `url`, asked with the person's key; its turns are runs of
    `assistant` (the orchestrator, or an agent folder's name)."""

    url: str
    client: LangGraphClient
    assistant: str = ASSISTANT

    @classmethod
    def connect(cls, url: str, *, api_key: str | None, assistant: str = ASSISTANT) -> Server:
        """The server at `url` (nothing is sent yet); no key is a one-line error."""
        from langgraph_sdk.client import LangGraphClient

        url = checked_url(url)
        if not api_key:
            raise ServerConnectionError(NO_KEY)
        # Not `get_client`'s transport, which retries a refused connection five times with
        # backoff: a server that is down is said at once, not after some 10 s (each of the
        # SDK's own reconnects of a cut stream would wait as long again).
        http = httpx.AsyncClient(
            base_url=url,
            transport=httpx.AsyncHTTPTransport(retries=CONNECT_RETRIES),
            timeout=httpx.Timeout(TIMEOUT),
            headers={"x-api-key": api_key, "User-Agent": f"orchestrator/{__version__}"},
        )
        return cls(url, LangGraphClient(http), assistant)

    @property
    def flags(self) -> str:
        """The command line's flags that reach this server and assistant again."""
        agent = f" --agent {self.assistant}" if self.assistant != ASSISTANT else ""
        return f"--server {self.url}{agent}"

    async def close(self) -> None:
        """Close the connections (nothing the server runs is stopped)."""
        with suppress(Exception):  # closing: nothing more is sent
            await self.client.aclose()

    @contextmanager
    def _asked(self, session: str | None = None) -> Iterator[None]:
        """What goes wrong asking the server, as one line (a `ServerConnectionError`)."""
        try:
            yield
        except (httpx.HTTPError, OSError) as error:
            raise server_error(error, url=self.url, session=session, agent=self.assistant) from None
        except ValueError:  # a body that is no JSON: something else answers at that URL
            raise ServerConnectionError(NOT_THE_API.format(url=self.url, status=200)) from None

    async def session(self, session_id: str | None) -> str:
        """The thread a chat goes on with: `session_id`'s (made when it is new), or a new one."""
        with self._asked(session_id):
            if session_id is None:
                return (await self.client.threads.create())["thread_id"]
            try:
                return (await self.client.threads.get(session_id))["thread_id"]
            except httpx.HTTPStatusError as error:
                if error.response.status_code != 404:
                    raise
            try:
                thread = await self.client.threads.create(thread_id=session_id, if_exists="do_nothing")
            except httpx.HTTPStatusError as error:
                if error.response.status_code in (404, 409):  # the id is another user's
                    raise ServerConnectionError(NOT_YOURS.format(session=session_id)) from None
                raise
            return thread["thread_id"]

    async def check_assistant(self) -> None:
        """The server offers `assistant` (by its name); else a one-line error naming those it does."""
        with self._asked():
            offered = await self.client.assistants.search(limit=100)
        names = [assistant["graph_id"] for assistant in offered]
        if self.assistant not in names:
            shown = ", ".join(names) or "none"
            raise ServerConnectionError(NOT_OFFERED.format(agent=self.assistant, offered=shown))

    async def sessions(self, *, limit: int) -> list[Thread]:
        """The person's sessions with this assistant on the server, latest first."""
        # A thread is bound to its assistant's graph at its first run (`api.run_board`); one
        # without a run yet (or made by a local chat) may go on with the orchestrator.
        if self.assistant != ASSISTANT:
            with self._asked():
                return await self.client.threads.search(
                    metadata={"graph_id": self.assistant}, limit=limit, sort_by="updated_at", sort_order="desc"
                )
        with self._asked():
            found = await self.client.threads.search(limit=100, sort_by="updated_at", sort_order="desc")
        return [t for t in found if (t.get("metadata") or {}).get("graph_id", ASSISTANT) == ASSISTANT][:limit]

    async def waiting(self, session_id: str) -> list[dict[str, object]]:
        """The interrupts (`id`, `value`) the session's turn waits on."""
        return _interrupts((await self._state(session_id)).get("interrupts"))

    async def messages(self, session_id: str) -> list[object]:
        """The session's messages, as the server's state holds them (dicts)."""
        values: object = (await self._state(session_id)).get("values")
        found: object = values.get("messages") if isinstance(values, dict) else None  # pyright: ignore[reportUnknownMemberType]  # any JSON
        return list(found) if isinstance(found, list) else []  # pyright: ignore[reportUnknownArgumentType]  # any JSON

    async def _state(self, session_id: str) -> ThreadState:
        with self._asked(session_id):
            return await self.client.threads.get_state(session_id)

    async def turn(
        self,
        session_id: str,
        *,
        text: str | None = None,
        decisions: Mapping[str, Decision] | None = None,
        on_run: Callable[[str], None] | None = None,
    ) -> AsyncIterator[StreamPart]:
        """A run's stream: a new message (`text`), or the answers to the waiting questions.

        `on_run` gets the run's id as soon as the server has made it. A client gone
        before it knew the id (Ctrl-C at once) has the server cancel the run itself.
        """

        def created(run: RunCreateMetadata) -> None:
            if on_run is not None:
                on_run(run["run_id"])

        command: Command | None = None
        message: Input | None = None
        if decisions is not None:
            command = {"resume": dict(decisions)}
        else:
            message = cast("Input", {"messages": [{"role": "user", "content": text or ""}]})
        with self._asked(session_id):
            parts = self.client.runs.stream(
                session_id,
                self.assistant,
                input=message,
                command=command,
                stream_mode=STREAM_MODES,
                on_disconnect="cancel",
                on_run_created=created,
            )
            async for part in parts:
                if part.event == "error":
                    raise ServerConnectionError(RUN_FAILED.format(detail=_said(part.data)))
                yield part

    async def forget(self, session_id: str) -> None:
        """Delete a session this chat made and used for nothing; a failure is logged, never raised."""
        try:
            await self.client.threads.delete(session_id)
        except (httpx.HTTPError, OSError) as error:
            logger.warning("could not delete the empty session %s on the server: %s", session_id, error)

    async def run_status(self, session_id: str, run_id: str) -> str:
        """The run's status now (`success`, `interrupted`...); `NOT_ANSWERED` if the server does
        not say (gone, or shutting down)."""
        try:
            run = await asyncio.wait_for(self.client.runs.get(session_id, run_id), 10)
        except (httpx.HTTPError, OSError, TimeoutError, ValueError):
            return NOT_ANSWERED
        return str(run.get("status"))

    async def cancel(self, session_id: str, run_id: str) -> None:
        """Cancel the session's run, waiting for it to end; a failure is logged, never raised."""
        try:
            await asyncio.wait_for(self.client.runs.cancel(session_id, run_id, wait=True), 30)
        except httpx.HTTPStatusError as error:
            if error.response.status_code != 409:  # 409: it had ended already
                logger.warning("could not cancel run %s on the server: %s", run_id, error)
        except (httpx.HTTPError, OSError, TimeoutError) as error:
            logger.warning("could not cancel run %s on the server: %s", run_id, error)


def _said(data: object) -> str:
    """An `error` event's message (else the error's name)."""
    if isinstance(data, dict):
        for key in ("message", "error"):
            said: object = data.get(key)  # pyright: ignore[reportUnknownMemberType]  # any JSON
            if isinstance(said, str) and said.strip():
                return " ".join(said.split())
    return str(data)


def _interrupts(found: object) -> list[dict[str, object]]:
    """The `{"id", "value"}` entries of a list from the server (anything else left out)."""
    if not isinstance(found, list):
        return []
    return [
        {"id": entry["id"], "value": entry.get("value")}  # pyright: ignore[reportUnknownMemberType]  # any JSON
        for entry in found  # pyright: ignore[reportUnknownVariableType]  # any JSON
        if isinstance(entry, dict) and isinstance(entry.get("id"), str)  # pyright: ignore[reportUnknownMemberType]  # any JSON
    ]
