"""`mcp serve`'s server before its runtime is ready: what waits for it, and what a cancelled wait leaves."""

from __future__ import annotations

import asyncio

from mcp import types

from orchestrator.serve.server_thread import Endpoint, RuntimeTools, ServerThread

OFFERED = [types.Tool(name="echo_say", description="From the manifest.", inputSchema={"type": "object"})]


def ran(name: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"ran {name}")])


async def test_a_call_cancelled_while_it_waits_for_the_runtime_leaves_the_next_calls_theirs():
    server = ServerThread(Endpoint(), offered=OFFERED)
    waiting = asyncio.create_task(server.call("echo_say", {}))
    await asyncio.sleep(0)  # one turn of the loop: the call runs up to its wait for the runtime
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    listed_before = await server.listing()

    async def call(name: str, arguments: dict[str, object]) -> types.CallToolResult:
        return ran(name)

    runtime_listing = [*OFFERED, types.Tool(name="late_one", inputSchema={"type": "object"})]
    server.ready(RuntimeTools(runtime_listing, call, asyncio.get_running_loop()))
    result = await server.call("echo_say", {})

    assert waiting.cancelled()
    assert listed_before == OFFERED  # from the manifests, without waiting
    assert result == ran("echo_say")
    assert await server.listing() == runtime_listing  # the runtime's once it is ready


async def test_the_command_learns_when_a_client_first_lists_or_calls_and_waits_no_longer_than_told():
    listed, called, silent = (ServerThread(Endpoint(), offered=OFFERED) for _ in range(3))
    before = listed.asked(timeout=0)
    await listed.listing()
    calling = asyncio.create_task(called.call("echo_say", {}))
    await asyncio.sleep(0)  # one turn of the loop: the call runs up to its wait for the runtime

    assert before is False
    assert listed.asked(timeout=0) is True, "a listing"
    assert called.asked(timeout=0) is True, "a call, before the runtime is ready"
    assert silent.asked(timeout=0.01) is False, "nothing asked: the wait ends all the same"
    calling.cancel()
    await asyncio.gather(calling, return_exceptions=True)
