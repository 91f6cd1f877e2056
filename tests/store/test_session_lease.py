"""A running turn holds its session: a second process waits for it instead of running it again."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from langchain_core.tools import BaseTool

from orchestrator.folders.tool_config import ToolConfig
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.sources.adapter import langchain_tools
from orchestrator.store import Database, Storage
from orchestrator.store.sessions import SessionLeases, lease_key
from orchestrator.testing import call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from tests.dispatch.test_background import Nothing


class Counted(Tool):
    """Counts its runs; each run says it started, then waits for the test's gate."""

    name: str = "counted"
    description: str = "Counted work."
    entered: asyncio.Event
    gate: asyncio.Event
    runs: list[str]

    @action(Nothing)
    async def work(self, params: Nothing, request: ToolRequest) -> ToolResult:
        """Do the counted work."""
        self.runs.append(request.request_id)
        self.entered.set()
        await self.gate.wait()
        return request.result("counted work done")


@asynccontextmanager
async def process(
    database_url: str, tmp_path: Path, model: object, tools: list[BaseTool]
) -> AsyncIterator[Orchestrator]:
    """A runtime on its own storage: its own connections, as a second process would have."""
    settings = load_settings(
        database_url=database_url, data_dir=tmp_path, sub_graphs_dir=tmp_path / "none", embeddings="none"
    )
    storage = await Storage.open(settings)
    try:
        yield Orchestrator.create(settings, storage=storage, model=model, tools=tools)  # type: ignore[arg-type]
    finally:
        await storage.close()


async def test_a_second_process_waits_for_a_running_turn_instead_of_running_it_again(
    scripted, tmp_path: Path, database_url: str
):
    entered, gate = asyncio.Event(), asyncio.Event()
    counted = Counted(entered=entered, gate=gate, runs=[])
    tools = langchain_tools(counted, config=ToolConfig(name="counted", description="x", version="1"))
    first_model = scripted(call_tools(("counted_work", {})), "Done once.")
    second_model = scripted("Hello again.")
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    async with (
        process(database_url, tmp_path, first_model, tools) as first,
        process(database_url, tmp_path, second_model, tools) as second,
    ):
        running = asyncio.create_task(first.session(user_id="u", session_id=session_id).run("work"))
        await entered.wait()  # the first process is inside its tool call

        other = second.session(user_id="u", session_id=session_id)
        busy = asyncio.Event()
        other.on_busy = busy.set
        opening = asyncio.create_task(other.open())
        waiting = asyncio.create_task(busy.wait())
        finished, _ = await asyncio.wait({opening, waiting}, return_when=asyncio.FIRST_COMPLETED)
        assert finished == {waiting}, "the second process took the running turn for an unfinished one"

        gate.set()
        assert (await running).answer == "Done once."
        assert await opening is False, "after the wait, nothing is left to finish"
        assert (await other.run("hi")).answer == "Hello again."
    assert len(counted.runs) == 1, "the tool ran once"


async def test_a_lease_ends_with_its_connection(database: Database):
    holder, other = SessionLeases(database), SessionLeases(database)
    entered, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with holder.hold("s-1"):
            entered.set()
            await release.wait()

    held = asyncio.create_task(hold())
    await entered.wait()
    busy = asyncio.Event()
    taking = asyncio.create_task(_take(other, "s-1", on_wait=busy.set))
    await busy.wait()
    await holder.close()  # as when the holding process dies: its connection ends
    await taking
    release.set()
    await held  # releasing on a closed connection is not an error
    await other.close()
    assert lease_key("s-1") != lease_key("s-2")


async def _take(leases: SessionLeases, session_id: str, *, on_wait: object) -> None:
    async with leases.hold(session_id, on_wait=on_wait):  # type: ignore[arg-type]
        pass


async def test_leases_asked_for_together_go_in_one_round_trip(database: Database, monkeypatch):
    from orchestrator.store import sessions

    sent: list[int] = []
    send = sessions._send

    async def counted(driver: object, asked: list[sessions.Statement]) -> list[bool]:
        sent.append(len(asked))
        return await send(driver, asked)  # type: ignore[arg-type]

    monkeypatch.setattr(sessions, "_send", counted)
    leases, other = SessionLeases(database), SessionLeases(database)
    names = [f"together-{n}" for n in range(20)]
    inside = asyncio.Barrier(len(names) + 1)

    async def turn(name: str) -> None:
        async with leases.hold(name):
            await inside.wait()

    turns = [asyncio.create_task(turn(name)) for name in names]
    await inside.wait()  # every lease is held at once
    assert sum(sent) == 20 and len(sent) < 20, sent
    await asyncio.gather(*turns)
    await leases.close()  # its releases sent first

    taken = asyncio.Event()
    for name in names:  # all released: another process takes each at once
        await _take(other, name, on_wait=taken.set)
    await other.close()
    assert not taken.is_set()


async def test_a_lock_whose_turn_was_cancelled_is_not_kept(database: Database, monkeypatch):
    from orchestrator.store import sessions

    asked, gate = asyncio.Event(), asyncio.Event()
    send = sessions._send

    async def held_up(driver: object, statements: list[sessions.Statement]) -> list[bool]:
        answers = await send(driver, statements)  # type: ignore[arg-type]
        asked.set()
        await gate.wait()  # the server locked it; the answer is on its way
        return answers

    leases, other = SessionLeases(database), SessionLeases(database)
    monkeypatch.setattr(sessions, "_send", held_up)
    taking = asyncio.create_task(_take(leases, "cancelled-1", on_wait=lambda: None))
    await asked.wait()
    taking.cancel()
    gate.set()
    await asyncio.gather(taking, return_exceptions=True)
    monkeypatch.setattr(sessions, "_send", send)
    await asyncio.gather(*leases._releasing)

    free = await other._lock(lease_key("cancelled-1"))  # one try: is it taken?
    await asyncio.gather(leases.close(), other.close())
    assert free, "the lease was released, not left held by a turn that never ran"
