"""`chat --agent NAME`: one agent folder alone, with its tools, model and instructions (issue 46, item 9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from orchestrator.errors import UserError
from orchestrator.graph.prompts import ORCHESTRATOR_PROMPT
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import ScriptedChatModel, call_tools
from tests.helpers import run_cli
from tests.tool_folders import approve_all, parrot_agent


def parrot_runtime(tmp_path: Path, model: ScriptedChatModel) -> Orchestrator:
    parrot_agent(tmp_path / "sub_graphs")
    settings = load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")
    approve_all(settings)
    return Orchestrator.create(settings, model=model, checkpointer=InMemorySaver())


async def test_the_agent_alone_answers_with_its_own_prompt_and_tools(tmp_path: Path):
    prompts: list[str] = []

    def step(messages: list[BaseMessage]) -> object:
        prompts.append(messages[0].text)
        if isinstance(messages[-1], ToolMessage):
            return f"Said: {messages[-1].text}"
        return call_tools(("echo_say", {"text": "polly"}))

    model = ScriptedChatModel(steps=[step, step])
    runtime = parrot_runtime(tmp_path, model).for_agent("parrot")
    result = await runtime.session(user_id="u").run("say polly")

    assert "polly" in result.answer
    assert prompts and all(p.startswith("You are parrot.") for p in prompts)
    assert not any(ORCHESTRATOR_PROMPT in p for p in prompts), "not the orchestrator's prompt"
    assert "echo_say" in model.bound_tools
    assert not {"parrot_ask", "calculator", "search_messages"} & set(model.bound_tools), (
        "the orchestrator's own tools are not the agent's"
    )


def test_a_name_that_is_no_approved_agent_says_which_are(tmp_path: Path):
    runtime = parrot_runtime(tmp_path, ScriptedChatModel())

    with pytest.raises(UserError, match=r"No approved top-level agent folder 'echo'.*agents: parrot"):
        runtime.for_agent("echo")


def test_chat_agent_on_the_command_line(cli, tmp_path: Path):
    parrot_agent(tmp_path / "sub_graphs")
    assert run_cli("tools", "approve", "parrot", cwd=tmp_path).returncode == 0

    done = cli("chat", "--agent", "parrot", cwd=tmp_path, stdin="hello\n")
    wrong = cli("chat", "--agent", "nobody", cwd=tmp_path, stdin="hello\n")

    assert done.returncode == 0, done.stderr
    assert "Chatting with the agent parrot alone." in done.stderr
    assert wrong.returncode != 0
    errors = [line for line in wrong.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: No approved top-level agent folder 'nobody' to chat with (agents: parrot)"]
