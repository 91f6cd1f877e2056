"""The built-in offline model picks tools by their descriptions and is honest about itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool

from orchestrator.cli.scaffold import create_agent_folder
from orchestrator.conversation.follow_ups import BACKGROUND_NOTE, FOLLOW_UP
from orchestrator.dispatch.background import ACKNOWLEDGED
from orchestrator.llm import OfflineChatModel
from orchestrator.notes import note
from orchestrator.sources.adapter import langchain_tools
from orchestrator.sources.builtin import builtin_tools
from orchestrator.testing import load_tool_folder
from orchestrator.tools import ToolResult
from tests.helpers import make_session
from tests.tool_folders import SHIPPED

TASKS = SHIPPED / "personal_assistant_agent" / "src" / "sub_graphs" / "task_agent"


@pytest.fixture
def model() -> OfflineChatModel:
    return OfflineChatModel()


async def test_arithmetic_goes_to_the_calculator(model):
    result = await make_session(model, builtin_tools()).run("what is (12 + 30) * 2?")
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("calculator", {"expression": "(12 + 30) * 2"})
    ]
    assert "value: 84" in result.answer and "offline model" in result.answer


async def test_time_question_fills_the_time_zone(model):
    result = await make_session(model, builtin_tools()).run("what time is it in Asia/Tokyo")
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("current_time", {"timezone": "Asia/Tokyo"})
    ]
    assert "Asia/Tokyo" in result.answer


async def test_no_matching_tool_says_what_it_is(model):
    result = await make_session(model, builtin_tools()).run("write me a poem")
    assert result.tool_calls == []
    assert "offline model" in result.answer and "calculator" in result.answer


async def test_failure_is_summarised_as_failed(model):
    result = await make_session(model, builtin_tools()).run("what is 1/0 calculated")
    assert result.tool_calls[0].status == "failure"
    assert "calculator failed: Division by zero." in result.answer


@pytest.fixture
def greeter(tmp_path: Path) -> list[BaseTool]:
    """The action the `new-agent` template ships: my_agent_greet, whose `who` is required."""
    return langchain_tools(load_tool_folder(create_agent_folder("my_agent", directory=tmp_path)))


@pytest.fixture
def task_tools() -> list[BaseTool]:
    """The shipped to-do list (task_agent_add/list/complete); only the choice is tested here."""
    return langchain_tools(load_tool_folder(TASKS))


def choose(model: OfflineChatModel, tools: list[BaseTool], request: str) -> AIMessage:
    return model.bind_tools(tools).invoke([HumanMessage(request)])


@pytest.mark.parametrize("request_text", ["greet Ada", "greet: Ada", "please greet Ada."])
async def test_template_greet_takes_the_rest_of_the_request(model, greeter, request_text):
    result = await make_session(model, greeter).run(request_text)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("my_agent_greet", {"who": "Ada"})
    ]
    assert "Hello, Ada!" in result.answer


@pytest.mark.parametrize("request_text", ["greet", "greet someone"])
def test_template_greet_with_nothing_left_names_the_missing_argument(
    model, greeter, request_text
):
    reply = choose(model, greeter, request_text)
    assert reply.tool_calls == []
    assert "could not find its who" in reply.text


@pytest.mark.parametrize(
    "request_text", ["add a task: buy milk", "add a task buy milk", "Add a to-do - buy milk"]
)
def test_task_title_is_the_rest_of_the_request(model, task_tools, request_text):
    reply = choose(model, task_tools, request_text)
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("task_agent_add", {"title": "buy milk"})
    ]


def test_title_after_a_separator_is_kept_as_written(model, task_tools):
    reply = choose(model, task_tools, "add a task: the report for Ada")
    assert reply.tool_calls[0]["args"] == {"title": "the report for Ada"}


def test_agent_ask_gets_the_whole_request(model):
    # The agent below needs every word ("add a task") to choose its own tool.
    assistant = langchain_tools(load_tool_folder(SHIPPED / "personal_assistant_agent"))
    reply = choose(model, assistant, "add a task: buy milk")
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("personal_assistant_agent_ask", {"request": "add a task: buy milk"})
    ]


@pytest.mark.parametrize(
    ("request_text", "expression", "value"),
    [
        ("what is 12*7", "12*7", 84),
        ("what is (2+3)*4?", "(2+3)*4", 20),
        ("compute 2**10", "2**10", 1024),
        ("how much is 3 - 1", "3 - 1", 2),
    ],
)
async def test_wholly_arithmetic_requests_reach_the_calculator(
    model, request_text, expression, value
):
    result = await make_session(model, builtin_tools()).run(request_text)
    assert [(c.name, c.arguments, c.status) for c in result.tool_calls] == [
        ("calculator", {"expression": expression}, "success")
    ]
    assert f"value: {value}" in result.answer


@pytest.mark.parametrize(
    "request_text", ["what is 2**10 + ½", "what is 2 + 3 apples", "what is 2^10"]
)
async def test_arithmetic_it_cannot_wholly_read_is_refused(model, request_text):
    result = await make_session(model, builtin_tools()).run(request_text)
    assert result.tool_calls == []
    assert "cannot read your request as arithmetic" in result.answer


@pytest.mark.parametrize("request_text", ["what is 2**10 + ½", "what is 12"])
def test_a_number_alone_does_not_pick_a_tool(model, task_tools, request_text):
    # Not "complete task 2" (or 12): a tool that read one number read part of the request.
    reply = choose(model, [*builtin_tools(), *task_tools], request_text)
    assert reply.tool_calls == []


def test_a_possessive_is_not_a_shared_word(model, task_tools):
    # The "s" of "what's" once matched the "s" of "user's" in a task description.
    reply = choose(model, [*builtin_tools(), *task_tools], "what's 5%3")
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("calculator", {"expression": "5%3"})
    ]


def test_a_background_report_is_passed_on_not_matched_again():
    result = '{"status": "success", "message": "Woke up after 3 seconds."}'
    notice = FOLLOW_UP.format(
        job_id="t1", tool="nap_sleep", status="completed", at="2026-11-29T08:30:00+00:00", result=result
    )
    bound = OfflineChatModel().bind_tools(builtin_tools())

    reply = bound.invoke([HumanMessage("what is 2*3"), SystemMessage(notice)])

    assert not reply.tool_calls, "the request that started the task is not run again"
    assert reply.text == (
        "(offline model) Background job t1 has ended:\n- nap_sleep returned: Woke up after 3 seconds."
    )


def test_a_background_report_in_a_note_says_the_result_not_the_notice():
    # The session writes the notice as a note, in the user's role, behind a lead-in of its own.
    result = ToolResult(message="", data={"slept": 3}).to_model_text(max_chars=10_000)
    notice = FOLLOW_UP.format(
        job_id="t1", tool="sleeper_nap", status="completed", at="2026-11-29T08:30:00+00:00", result=result
    )
    bound = OfflineChatModel().bind_tools(builtin_tools())

    reply = bound.invoke([HumanMessage("nap"), note(notice, kind=BACKGROUND_NOTE)])

    assert reply.text == "(offline model) Background job t1 has ended:\n- sleeper_nap returned: slept: 3"


def test_a_call_handed_to_the_background_is_said_without_the_models_instructions():
    handed = ToolResult(
        type="status",
        status="partial",
        message=ACKNOWLEDGED.format(name="sleeper_nap", job_id="t1"),
        data={"job_id": "t1", "status": "acknowledged"},
    )
    call = {"name": "sleeper_nap", "args": {}, "id": "call_1"}
    bound = OfflineChatModel().bind_tools(builtin_tools())

    reply = bound.invoke([
        HumanMessage("nap"),
        AIMessage(content="", tool_calls=[call]),
        ToolMessage(handed.to_model_text(max_chars=10_000), tool_call_id="call_1", name="sleeper_nap"),
    ])

    assert reply.text == (
        "(offline model) Here is what the tools returned:\n"
        "- sleeper_nap goes on in the background as job t1"
    )
