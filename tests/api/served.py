"""`orchestrator serve`'s application in this process, on a real port, for the official SDK.

The keys are a table of the test's (the real ones are `users`' and have tests of
their own): what is under test here is the API every key reaches.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool, tool
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from orchestrator.api.assistants import Assistants
from orchestrator.api.identity import Identity
from orchestrator.api.run_board import RunBoard
from orchestrator.api.server import Listen, serve
from orchestrator.api.server_state import ServerState
from orchestrator.errors import AuthenticationError
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.store.logins import Logins
from orchestrator.store.storage import Storage


class KeyTable:
    """An authenticator of fixed keys: key -> user."""

    def __init__(self, keys: Mapping[str, str]) -> None:
        self.keys = dict(keys)

    async def authenticate(self, headers: Mapping[str, str]) -> Identity:
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        user = self.keys.get(key)
        if user is None:
            raise AuthenticationError("no valid API key")
        return Identity(user_id=user, key_id=f"test-{user}", via="api_key")


@dataclass
class Served:
    """A server of the test's: its URL, its parts, a client per key."""

    url: str
    state: ServerState

    def client(self, key: str | None) -> LangGraphClient:
        return get_client(url=self.url, api_key=key)


@asynccontextmanager
async def served(
    logins: Logins,
    tmp_path: Path,
    model: BaseChatModel,
    *,
    tools: Sequence[BaseTool] = (),
    keys: Mapping[str, str],
    sub_graphs: Path | None = None,
    listen: Listen | None = None,
) -> AsyncIterator[Served]:
    """Serve a runtime of `model` and `tools` on the test's database until the block ends;
    with `sub_graphs`, its folders too (approved), each agent an assistant (`--agents`)."""
    settings = load_settings(
        database_url=logins.owner_url,
        database_app_url=logins.app_url,
        data_dir=tmp_path,
        sub_graphs_dir=sub_graphs or tmp_path / "none",
        embeddings="none",
    )
    storage = await Storage.open(settings)
    given = {"tools": list(tools)} if tools else {}  # tools given replace the folders
    runtime = await Orchestrator.start(settings, storage=storage, model=model, ask=lambda *_: True, **given)
    assistants = Assistants(runtime, agents=sub_graphs is not None)
    state = ServerState(storage, assistants, RunBoard(storage, assistants), KeyTable(keys))
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(serve(state, listen or Listen(port=0, grace_seconds=5), on_ready=ready.set_result))
    try:
        yield Served(await ready, state)
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await runtime.close()
        await storage.close()


def blocking_tool() -> tuple[BaseTool, asyncio.Event, asyncio.Event]:
    """A tool that says it started and then waits to be released: a run held mid-turn."""
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def wait_here(note: str) -> str:
        """Wait until released."""
        started.set()
        await release.wait()
        return f"released {note}"

    return wait_here, started, release
