"""The model side's seam: middleware around every model call, and tool sources given to the runtime."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.graph import AgentSpec
from orchestrator.graph.model_pipeline import ModelAnswer, ModelCall, ModelHandler
from orchestrator.graph.model_pipeline.compaction import CompactionMiddleware
from orchestrator.graph.model_pipeline.defaults import default_model_middleware
from orchestrator.graph.model_pipeline.model_budget import ModelBudgetMiddleware
from orchestrator.graph.model_pipeline.model_call import STOPPED
from orchestrator.graph.model_pipeline.model_usage import ModelUsageMiddleware
from orchestrator.graph.model_pipeline.reply_check import ReplyCheckMiddleware
from orchestrator.graph.model_pipeline.reply_cut import ReplyCutMiddleware
from orchestrator.graph.model_pipeline.retrieval import RetrievalMiddleware
from orchestrator.graph.model_pipeline.round_limit import RoundLimitMiddleware
from orchestrator.graph.model_pipeline.written_calls import TextCallsMiddleware
from orchestrator.graph.prompts import ITERATION_LIMIT
from orchestrator.levels import Limits
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.sources.builtin import builtin_tools
from orchestrator.testing import ScriptedChatModel, call_tools
from tests.tool_folders import AGENT_TOOL, write_folder

NOTE = "Answer in French."


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def extra_tool() -> str:
    """A tool only the added source offers."""
    return "extra done"


class SystemNote:
    """Adds a system note to every model call; keeps what it saw of each call and answer."""

    def __init__(self) -> None:
        self.iterations: list[int] = []
        self.answers: list[ModelAnswer] = []

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        self.iterations.append(request.iterations)
        answer = await handler(request.override(messages=[SystemMessage(NOTE), *request.messages]))
        self.answers.append(answer)
        return answer


class Cache:
    """Answers every model call itself: the model is never called."""

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        return ModelAnswer(AIMessage("from the cache"))


class RecordingSource:
    """A tool source of the caller's own, recording its opening and closing."""

    name = "recording"

    def __init__(self, tools: Sequence[BaseTool]) -> None:
        self._tools = list(tools)
        self.opened = self.closed = 0

    async def open(self) -> None:
        self.opened += 1

    def tools(self) -> Sequence[BaseTool]:
        return self._tools

    async def close(self) -> None:
        self.closed += 1


def notes(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, SystemMessage) and m.text == NOTE]


def quiet_settings(tmp_path: Path, **overrides: object) -> Settings:
    return load_settings(
        sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data", **overrides
    )


async def test_an_added_model_middleware_sees_and_changes_every_model_call(scripted, tmp_path):
    def sum_reply(messages: list[BaseMessage]) -> str:
        return f"La somme est {json.loads(messages[-1].text)['data']}."

    model = scripted(call_tools(("add", {"a": 2, "b": 3})), sum_reply)
    note = SystemNote()
    runtime = Orchestrator.create(
        quiet_settings(tmp_path),
        model=model,
        tools=[add],
        checkpointer=InMemorySaver(),
        model_middleware=[note],
    )

    result = await runtime.session(user_id="u").run("What is 2 + 3?")

    assert result.answer == "La somme est 5."
    assert note.iterations == [0, 1], "it sees each call of the turn"
    assert [notes(sent) for sent in model.received] == [[NOTE], [NOTE]], "the model got its note"
    # it sees the answers checked: the first asks for the tool, the second does not
    assert [len(a.message.tool_calls) for a in note.answers] == [1, 0]


async def test_an_added_model_middleware_runs_at_every_level(scripted, tmp_path):
    write_folder(tmp_path / "sub_graphs", "top", code=AGENT_TOOL.format(name="Top"))
    model = scripted(call_tools(("top_ask", {"request": "go"})), "top done", "all done")
    note = SystemNote()
    runtime = Orchestrator.create(
        quiet_settings(tmp_path), model=model, ask=lambda *_: True, model_middleware=[note]
    )

    result = await runtime.session(user_id="u").run("go")

    assert result.answer == "all done"
    # the orchestrator's first call, the agent's, the orchestrator's second
    assert note.iterations == [0, 0, 1]
    assert [notes(sent) for sent in model.received] == [[NOTE]] * 3


async def test_an_added_model_middleware_can_answer_in_the_models_place(scripted, tmp_path):
    model = scripted()  # an empty script: any call of the model fails the test
    runtime = Orchestrator.create(
        quiet_settings(tmp_path),
        model=model,
        tools=[add],
        checkpointer=InMemorySaver(),
        model_middleware=[Cache()],
    )

    result = await runtime.session(user_id="u").run("What is 2 + 3?")

    assert result.answer == "from the cache" and result.tool_calls == []
    assert model.received == []


async def test_added_middleware_wraps_the_defaults_and_sees_the_round_limits_stop(
    scripted, tmp_path
):
    model = scripted(call_tools(("add", {"a": 1, "b": 1})), call_tools(("add", {"a": 2, "b": 2})))
    note = SystemNote()
    runtime = Orchestrator.create(
        quiet_settings(tmp_path, max_tool_iterations=1),
        model=model,
        tools=[add],
        checkpointer=InMemorySaver(),
        model_middleware=[note],
    )

    result = await runtime.session(user_id="u").run("add twice")

    assert result.answer == ITERATION_LIMIT.format(limit=1)
    assert note.answers[-1].ended == STOPPED and note.answers[-1].message.tool_calls == []


def test_the_default_chain_in_order():
    model = ScriptedChatModel()
    limits = Limits(max_iterations=3, max_result_chars=1000, timeout_seconds=60.0)

    async def retriever(query: str, *, user_id: str, session_id: str) -> str:
        return ""

    full = AgentSpec(model=model, tools=[add], limits=limits, retriever=retriever)
    bare = AgentSpec(model=model, tools=[add], limits=limits, text_tool_calls=False)

    assert [type(m) for m in default_model_middleware(full)] == [
        RoundLimitMiddleware,
        RetrievalMiddleware,
        ModelBudgetMiddleware,
        CompactionMiddleware,
        ReplyCutMiddleware,
        TextCallsMiddleware,
        ReplyCheckMiddleware,
        ModelUsageMiddleware,
    ]
    assert [type(m) for m in default_model_middleware(bare)] == [
        RoundLimitMiddleware,
        ModelBudgetMiddleware,
        CompactionMiddleware,
        ReplyCutMiddleware,
        ReplyCheckMiddleware,
        ModelUsageMiddleware,
    ], "no RAG without a retriever, no text calls when they are off"


async def test_a_source_given_to_the_runtime_adds_its_tools_to_the_defaults(scripted, tmp_path):
    model = scripted(call_tools(("extra_tool", {})), "done")
    source = RecordingSource([extra_tool])

    runtime = await Orchestrator.start(quiet_settings(tmp_path), model=model, sources=[source])
    try:
        result = await runtime.session(user_id="u").run("use the extra tool")
    finally:
        await runtime.close()

    names = [t.name for t in runtime.tools]
    assert names == [*(t.name for t in builtin_tools()), "extra_tool"], "after the defaults"
    assert source in runtime.sources and (source.opened, source.closed) == (1, 1)
    assert [(c.name, c.status) for c in result.tool_calls] == [("extra_tool", "success")]
    assert result.answer == "done"
