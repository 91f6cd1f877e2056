"""A reply that never ends is bounded: in time by the model timeout, in length by the output cap.

Against the scripted OpenAI-compatible server on 127.0.0.1, through the real
client: a model caught in a loop streams forever (and ignores the cap it is
sent). The turn ends with one line naming the setting, nothing of the
conversation is lost, and the next turn works; a reply cut at its length
limit says so and why.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.conversation.session import Session
from orchestrator.errors import ModelTimeoutError
from orchestrator.graph.prompts import CUT_AT_CAP, CUT_BY_SERVER
from orchestrator.llm.reply import ReplyLimits, read_reply
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import Endless, OpenAICompatibleServer, RawReply
from orchestrator.testing.openai_server import Reply
from tests.tool_folders import approve_all, parrot_agent

TIMEOUT = 0.5  # seconds: the replies here never end, so this is how long each test waits
NEXT_ANSWER = "Here it is."
LOOP = Endless(text="12*7-12 ")


def origin(server: OpenAICompatibleServer) -> str:
    return server.base_url.removesuffix("/v1")


def session_for(server: OpenAICompatibleServer, *, streaming: bool = True, **settings: object) -> Session:
    loaded = load_settings(
        model="openai:test-model",
        openai_base_url=server.base_url,
        openai_api_key="test-key",
        model_max_retries=0,
        model_streaming=streaming,
        **settings,
    )
    return Orchestrator.create(loaded, checkpointer=InMemorySaver()).session(user_id="u")


async def fails_then_works(failure: Reply, *, streaming: bool) -> tuple[str, OpenAICompatibleServer]:
    """The failed turn's line; the next turn answered, with the failed turn's question kept."""
    with OpenAICompatibleServer([failure, NEXT_ANSWER]) as server:
        session = session_for(server, streaming=streaming, model_timeout_seconds=TIMEOUT)
        with pytest.raises(ModelTimeoutError) as caught:
            await session.run("count for me")
        result = await session.run("once more")

    assert result.answer == NEXT_ANSWER, "the session goes on"
    retried = [(m["role"], m["content"]) for m in server.requests[1]["messages"]]
    assert ("user", "count for me") in retried, "the failed turn's question is kept"
    assert not any(m["role"] == "assistant" for m in server.requests[1]["messages"])
    return str(caught.value), server


# --- the timeout bounds the whole reply ---------------------------------------------------


async def test_a_reply_that_streams_forever_ends_at_the_model_timeout():
    line, server = await fails_then_works(LOOP, streaming=True)

    # Whether a token came before the end depends on the machine's speed: either is told.
    assert re.fullmatch(
        rf"The model server at {re.escape(origin(server))} did not (answer|finish its reply) "
        r"within 0\.5s \(ORCHESTRATOR_MODEL_TIMEOUT_SECONDS\)(\.|: it was stopped after \d+ "
        r"characters and not kept\. Try again, or raise the setting\.)",
        line,
    ), line


async def test_a_reply_stopped_mid_stream_says_how_much_came():
    class Looping:
        """A model that sends a piece of its reply, then nothing more, ever."""

        async def astream(self, messages: object, config: object) -> AsyncIterator[AIMessageChunk]:
            yield AIMessageChunk(content="12*7-12")
            await asyncio.Event().wait()

    limits = ReplyLimits(timeout_seconds=0.01)
    with pytest.raises(ModelTimeoutError) as caught:
        await read_reply(Looping(), [HumanMessage("count")], {}, limits=limits)  # type: ignore[arg-type]

    assert str(caught.value) == (
        "The model server did not finish its reply within 0.01s "
        "(ORCHESTRATOR_MODEL_TIMEOUT_SECONDS): it was stopped after 7 characters and not kept. "
        "Try again, or raise the setting."
    )


async def test_a_stream_that_never_sends_a_token_ends_at_the_model_timeout():
    line, server = await fails_then_works(Endless(text=""), streaming=True)

    assert line == (
        f"The model server at {origin(server)} did not answer within 0.5s "
        "(ORCHESTRATOR_MODEL_TIMEOUT_SECONDS)."
    )


async def test_a_whole_reply_that_never_comes_ends_at_the_model_timeout():
    line, server = await fails_then_works(LOOP, streaming=False)

    assert line == (
        f"The model server at {origin(server)} did not answer within 0.5s "
        "(ORCHESTRATOR_MODEL_TIMEOUT_SECONDS)."
    )


# --- the output cap ------------------------------------------------------------------------


async def test_a_server_that_ignores_the_cap_is_stopped_at_it_and_the_answer_says_so():
    with OpenAICompatibleServer([LOOP, NEXT_ANSWER]) as server:
        session = session_for(server, max_output_tokens=5)
        result = await session.run("count for me")
        after = await session.run("once more")

    line = CUT_AT_CAP.format(limit=5, setting="ORCHESTRATOR_MAX_OUTPUT_TOKENS")
    assert result.answer == LOOP.text * 5 + "\n\n" + line
    assert server.requests[0]["max_completion_tokens"] == 5, "the cap is asked of the server"
    assert after.answer == NEXT_ANSWER
    kept = server.requests[1]["messages"]
    assert (kept[-2]["role"], kept[-2]["content"]) == ("assistant", result.answer)


async def test_a_reply_the_server_cut_at_its_length_limit_says_so():
    cut = RawReply(text="The first three", finish_reason="length")
    with OpenAICompatibleServer([cut, cut]) as server:
        capped = await session_for(server, max_output_tokens=3).run("count")
        uncapped = await session_for(server).run("count")

    assert capped.answer == "The first three\n\n" + CUT_BY_SERVER.format(
        limit="; ORCHESTRATOR_MAX_OUTPUT_TOKENS is 3"
    )
    assert uncapped.answer == "The first three\n\n" + CUT_BY_SERVER.format(limit="")
    assert "max_completion_tokens" not in server.requests[1], "no cap is sent when none is set"


async def test_a_folder_caps_its_own_levels_replies(tmp_path: Path):
    root = tmp_path / "sub_graphs"
    parrot_agent(root, llm={"inherit": "inherit", "max_output_tokens": 3})
    script = [[("parrot_ask", {"request": "count for me"})], LOOP, "The parrot rambled."]
    with OpenAICompatibleServer(script) as server:
        settings = load_settings(
            model="openai:test-model",
            openai_base_url=server.base_url,
            openai_api_key="test-key",
            model_max_retries=0,
            sub_graphs_dir=root,
            data_dir=tmp_path / "data",
        )
        approve_all(settings)
        runtime = Orchestrator.create(settings, checkpointer=InMemorySaver())
        result = await runtime.session(user_id="u").run("ask the parrot to count")

    top, agent, top_again = server.requests
    assert "max_completion_tokens" not in top, "the orchestrator's level sets no cap"
    assert agent["max_completion_tokens"] == 3
    report = json.loads(top_again["messages"][-1]["content"])
    line = CUT_AT_CAP.format(
        limit=3, setting="llm.max_output_tokens (or ORCHESTRATOR_MAX_OUTPUT_TOKENS)"
    )
    assert report["message"] == LOOP.text * 3 + "\n\n" + line
    assert result.answer == "The parrot rambled."
