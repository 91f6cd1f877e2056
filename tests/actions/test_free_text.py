"""A request in words becomes an action's parameters: `key: value` as written, a sentence by the
model's structured output, or an error naming the field; fixed parameters stay fixed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from orchestrator.actions.address import Address
from orchestrator.actions.free_text import parameters_from_text, read_pairs, which_action
from orchestrator.errors import InvalidToolArgumentsError
from orchestrator.llm.providers import build_chat_model
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import RawReply, RawToolCall
from tests.actions.conftest import loaded_action
from tests.tool_folders import SHIPPED


class Mail(BaseModel):
    to: list[str] = Field(min_length=1, description="Recipient addresses.")
    subject: str
    body: str = Field(description="Plain-text body.")


def test_key_value_pairs_keep_commas_and_colons_inside_a_value_and_split_lists():
    text = "to: a@b.c, d@e.f, subject: Hello, body: Hi there, see you at 10:30; bye"

    assert read_pairs(text, Mail) == {
        "to": ["a@b.c", "d@e.f"],
        "subject": "Hello",
        "body": "Hi there, see you at 10:30; bye",
    }
    assert read_pairs("Subject = Hi\nBODY: two\nlines", Mail) == {"subject": "Hi", "body": "two\nlines"}
    assert read_pairs("just a sentence about subjects", Mail) is None


@pytest.fixture
def send(tmp_path: Path) -> Address:
    settings = load_settings(sub_graphs_dir=SHIPPED, data_dir=tmp_path / "data")
    return loaded_action(settings, "personal_assistant_agent/email_agent", "send")


async def test_a_shipped_action_reads_its_parameters_offline(send: Address):
    text = "to: ann@example.com, subject: Lunch, body: Noon at the usual place?"

    assert await parameters_from_text(text, send.tool, model=None) == {
        "to": ["ann@example.com"], "subject": "Lunch", "body": "Noon at the usual place?",
    }


async def test_a_missing_or_invalid_field_is_named_with_its_description(send: Address):
    with pytest.raises(InvalidToolArgumentsError) as missing:
        await parameters_from_text("subject: Lunch, body: Noon?", send.tool, model=None)
    assert str(missing.value) == "email_agent.send: to (Recipient addresses.) is missing"

    with pytest.raises(InvalidToolArgumentsError, match=r"to \(Recipient addresses\.\) is not valid: .*not an email"):
        await parameters_from_text("to: ann, subject: Lunch, body: Noon?", send.tool, model=None)


async def test_a_sentence_offline_says_how_to_write_the_request(send: Address):
    with pytest.raises(InvalidToolArgumentsError) as unread:
        await parameters_from_text("mail Ann about lunch", send.tool, model=None)
    message = str(unread.value)
    assert "write them as `key: value`" in message and "to: Recipient addresses." in message


@pytest.mark.process  # the example's folder, not shipped, runs in its held process
async def test_a_sentence_fills_an_actions_only_text_parameter(stamp: Address):
    assert await parameters_from_text("The quarterly report.", stamp.tool, model=None) == {
        "target": "The quarterly report."
    }


@pytest.mark.process  # the example's folder, not shipped, runs in its held process
async def test_a_fixed_parameter_cannot_be_set_by_the_text(stamp: Address):
    with pytest.raises(InvalidToolArgumentsError) as fixed:
        await parameters_from_text("target: report, mark: FORGED", stamp.tool, model=None)
    assert str(fixed.value) == (
        "mark of stamp_agent.stamp is fixed by the folder's configuration: the text cannot set it"
    )


def model_on(server: OpenAICompatibleServer):
    return build_chat_model(
        load_settings(
            model="openai:test-model", openai_base_url=server.base_url, openai_api_key="k",
            model_max_retries=0,
        )
    )


async def test_the_model_reads_a_sentence_with_structured_output(send: Address):
    filled = RawToolCall.of(
        "email_agent_send", {"to": ["ann@example.com"], "subject": "Lunch", "body": "Noon?"}
    )
    with OpenAICompatibleServer([RawReply(tool_calls=[filled])]) as server:
        parameters = await parameters_from_text(
            "Ask Ann (ann@example.com) whether noon works for lunch", send.tool, model=model_on(server)
        )
    assert parameters == {"to": ["ann@example.com"], "subject": "Lunch", "body": "Noon?"}
    (request,) = server.requests
    assert request["tools"][0]["function"]["name"] == "email_agent_send"
    assert "Never invent a value" in request["messages"][0]["content"]


async def test_what_the_model_leaves_out_is_named_not_guessed(send: Address):
    partial = RawToolCall.of("email_agent_send", {"subject": "Lunch", "body": "Noon?"})
    with (
        OpenAICompatibleServer([RawReply(tool_calls=[partial])]) as server,
        pytest.raises(InvalidToolArgumentsError, match="to .Recipient addresses.. is missing"),
    ):
        await parameters_from_text("Ask about lunch", send.tool, model=model_on(server))


async def test_the_action_is_named_first_said_as_a_pair_or_chosen_by_the_model(tmp_path: Path):
    settings = load_settings(sub_graphs_dir=SHIPPED, data_dir=tmp_path / "data")
    add = loaded_action(settings, "personal_assistant_agent/task_agent", "add")
    actions = [tool for tool in add.folder.langchain if hasattr(tool, "spec")]

    chosen, rest = await which_action("add title: Buy milk", actions, model=None)
    assert (chosen.spec.name, rest) == ("add", "title: Buy milk")
    chosen, rest = await which_action("action: complete, task_id: 3", actions, model=None)
    assert (chosen.spec.name, rest) == ("complete", "task_id: 3")
    with pytest.raises(InvalidToolArgumentsError, match="Which action of task_agent.*: add, complete, delete, edit, list"):
        await which_action("buy milk", actions, model=None)

    choice = RawToolCall.of("choose_action", {"action": "list"})
    with OpenAICompatibleServer([RawReply(tool_calls=[choice])]) as server:
        chosen, rest = await which_action("what is on my list?", actions, model=model_on(server))
    assert chosen.spec.name == "list" and rest == "what is on my list?"


@pytest.mark.process  # the example's folder, not shipped, runs in its held process
async def test_a_model_that_makes_no_call_leaves_a_sentence_to_the_offline_reading(stamp: Address):
    """A local model without function calling answers in words: "target is missing" was the error."""
    with OpenAICompatibleServer(["I would stamp the quarterly report."]) as server:
        parameters = await parameters_from_text(
            "The quarterly report.", stamp.tool, model=model_on(server)
        )
    assert parameters == {"target": "The quarterly report."}
    assert len(server.requests) == 1, "the model was asked first"


@pytest.mark.process  # the example's folder, not shipped, runs in its held process
async def test_a_model_without_tool_calling_leaves_a_sentence_to_the_offline_reading(stamp: Address):
    from langchain_core.language_models import FakeListChatModel

    no_tools = FakeListChatModel(responses=["words only"])
    with pytest.raises(NotImplementedError):
        no_tools.bind_tools([])
    assert await parameters_from_text("The quarterly report.", stamp.tool, model=no_tools) == {
        "target": "The quarterly report."
    }
