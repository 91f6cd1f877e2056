"""The real ChatOpenAI client against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.errors import ModelUnavailableError
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import EventLog

SCRIPT = [[("calculator", {"expression": "6*7"})], "The answer is 42."]


def runtime_for(base_url: str) -> Orchestrator:
    settings = load_settings(
        model="openai:test-model", openai_base_url=base_url, openai_api_key="test-key"
    )
    return Orchestrator.create(settings, checkpointer=InMemorySaver())


def assert_tool_round_trip(server: OpenAICompatibleServer) -> None:
    first, second = server.requests
    assert first["model"] == "test-model"
    assert {t["function"]["name"] for t in first["tools"]} == {
        "calculator", "current_time", "ask_human", "request_authorization", "create_execution_plan",
    }
    call = second["messages"][-2]["tool_calls"][0]
    reply = second["messages"][-1]
    assert reply["role"] == "tool" and reply["tool_call_id"] == call["id"]
    assert '"value": 42' in reply["content"]


async def test_tool_call_then_text_through_the_graph_alone():
    with OpenAICompatibleServer(SCRIPT) as server:
        runtime = runtime_for(server.base_url)
        state = await runtime.graph.ainvoke(
            {"messages": [("user", "what is 6*7?")]},
            {"configurable": {"thread_id": "t1"}},
        )

    assert state["messages"][-1].text == "The answer is 42."
    # The model node always streams: a reply is read within limits, and cuts show.
    assert all(r.get("stream") for r in server.requests)
    assert_tool_round_trip(server)


async def test_unstreamed_replies_are_served_too():
    from langchain_openai import ChatOpenAI

    with OpenAICompatibleServer(SCRIPT) as server:
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", max_retries=0)
        calls = await model.ainvoke("what is 6*7?")
        text = await model.ainvoke("and so?")

    (call,) = calls.tool_calls
    assert (call["name"], call["args"]) == ("calculator", {"expression": "6*7"})
    assert calls.response_metadata["finish_reason"] == "tool_calls"
    assert text.text == "The answer is 42." and text.response_metadata["finish_reason"] == "stop"
    assert not any(r.get("stream") for r in server.requests)


async def test_tool_call_then_text_streamed():
    events = EventLog()
    with OpenAICompatibleServer(SCRIPT) as server:
        session = runtime_for(server.base_url).session(user_id="u")
        result = await session.run("what is 6*7?", on_event=events)

    assert result.answer == "The answer is 42."
    assert [c.status for c in result.tool_calls] == ["success"]
    assert all(r.get("stream") for r in server.requests)
    tokens = [e["text"] for e in events if e["kind"] == "token"]
    assert len(tokens) > 1 and "".join(tokens) == "The answer is 42."
    assert_tool_round_trip(server)


async def test_unreachable_server_is_one_clear_error():
    with OpenAICompatibleServer() as server:
        base_url = server.base_url  # closed on exit: nothing listens there any more
    settings = load_settings(model="openai:m", openai_base_url=base_url, model_max_retries=0)
    session = Orchestrator.create(settings).session(user_id="u")

    with pytest.raises(ModelUnavailableError, match="Cannot reach the model server"):
        await session.run("hello")


async def test_server_error_status_is_one_clear_error():
    with OpenAICompatibleServer([]) as server:  # no reply scripted: it answers 400
        settings = load_settings(model="openai:m", openai_base_url=server.base_url)
        session = Orchestrator.create(settings).session(user_id="u")
        with pytest.raises(ModelUnavailableError, match="answered 400: no scripted reply left"):
            await session.run("hello")
