"""A model built at its first call: graphs over it compile without it, and it is the model they then call."""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.llm.deferred import DeferredChatModel
from orchestrator.llm.providers import deferred_chat_model
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.sources.builtin import calculator
from orchestrator.testing import OpenAICompatibleServer, ScriptedChatModel, call_tools
from tests.helpers import make_session


def counted(build: Callable[[], BaseChatModel]) -> tuple[DeferredChatModel, list[BaseChatModel]]:
    built: list[BaseChatModel] = []

    def building() -> BaseChatModel:
        built.append(build())
        return built[-1]

    return DeferredChatModel(build=building), built


async def test_a_graph_over_a_deferred_model_builds_it_at_its_first_call_once(scripted):
    real = scripted(call_tools(("calculator", {"expression": "6*7"})), "42.", "Again 42.")
    deferred, built = counted(lambda: real)

    session = make_session(deferred, [calculator])
    assert built == [], "compiling the graph builds no model"

    first = await session.run("what is 6*7?")
    second = await session.run("and again?")

    assert (first.answer, second.answer) == ("42.", "Again 42.")
    assert built == [real], "built once, then called"
    assert [c.status for c in first.tool_calls] == ["success"]


async def test_a_deferred_model_is_read_as_the_model_it_stands_in_for():
    """Its output cap and its client are the built model's: what reads them reads it, not the stand-in."""
    with OpenAICompatibleServer(["Hello."]) as server:
        settings = load_settings(
            model="openai:test-model",
            openai_base_url=server.base_url,
            openai_api_key="test-key",
            max_output_tokens=7,
        )
        model = deferred_chat_model(settings)
        runtime = Orchestrator.create(settings, model=model, checkpointer=InMemorySaver())
        assert isinstance(model, DeferredChatModel) and not model.built

        result = await runtime.session(user_id="u").run("hi")

    assert result.answer == "Hello."
    [request] = server.requests
    assert request["model"] == "test-model"
    assert request["max_completion_tokens"] == 7, "the cap is asked of the server"
    assert request["stream_options"] == {"include_usage": True}, "its usage is asked for"


def test_the_offline_model_is_never_deferred():
    model = deferred_chat_model(load_settings())
    assert not isinstance(model, DeferredChatModel)
    assert type(model).__name__ == "OfflineChatModel"


def test_a_deferred_model_passes_calls_on_whole():
    real = ScriptedChatModel(steps=["One.", "Two."])
    deferred = DeferredChatModel(build=lambda: real)

    assert deferred.invoke("hi").text == "One."
    assert "".join(chunk.text for chunk in deferred.stream("hi")) == "Two."
    assert deferred.built
