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
