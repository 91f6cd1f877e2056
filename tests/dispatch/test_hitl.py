"""Human in the loop: approval before sensitive calls, ask_human, request_authorization, the audit.

A call that needs the person's decision pauses the turn with a question; the
answer (keyed by the interrupt's id) resumes it: approve runs the call, edit
runs it with the person's arguments, reject answers the model with an error.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Interrupt
from pydantic import BaseModel, Field

from orchestrator.conversation.session import Session
from orchestrator.dispatch.dispatcher import Dispatcher
from orchestrator.errors import ToolLoadError
from orchestrator.folders.sensitivity import WHY_AUTHOR, WHY_CONFIG, WHY_FOLDER, SensitivityRules
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.levels import Limits
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.sources.adapter import langchain_tools
from orchestrator.sources.builtin import ask_human, builtin_tools, request_authorization
from orchestrator.store import Database
from orchestrator.store.requests import request_history
from orchestrator.testing import ScriptedChatModel, call_tools
from orchestrator.tools import Tool, ToolRequest, ToolResult, action
from orchestrator.tools.context import RunContext
from tests.helpers import storage_for, tool_json
from tests.tool_folders import three_levels, write_folder

ran: Counter[str] = Counter()
received: list[str] = []


@tool
async def files_delete(path: str) -> str:
    """Delete a file."""
    ran["files_delete"] += 1
    received.append(path)
    return f"deleted {path}"


@tool
async def quick() -> str:
    """Answer at once."""
    ran["quick"] += 1
    return "quick done"


@pytest.fixture(autouse=True)
def counted() -> None:
    ran.clear()
    received.clear()


def session_over(model: ScriptedChatModel, tools: list[BaseTool], **settings: object) -> Session:
    runtime = Orchestrator.create(
        load_settings(**settings), model=model, tools=tools, checkpointer=InMemorySaver()
    )
    return runtime.session(user_id="u1")


async def questions(session: Session) -> list[Interrupt]:
    """The questions the paused turn waits on."""
    return list((await session.graph.aget_state(session.config)).interrupts)


async def answer(session: Session, answers: dict[str, object]) -> None:
    """Resume the turn with `answers` (by interrupt id) and run it on until it ends or pauses."""
    async for _ in session.graph.astream(
        Command(resume=answers), session.config, context=session.context, durability="sync"
    ):
        pass


async def answer_only(session: Session, decision: object) -> Interrupt:
    """Answer the one pending question with `decision`; the question."""
    [asked] = await questions(session)
    await answer(session, {asked.id: decision})
    return asked


def edit_to(name: str, args: dict[str, object]) -> dict[str, object]:
    """The person's edit of a call of `name`: run it with `args`."""
    return {"type": "edit", "edited_action": {"name": name, "args": args}}


async def tool_answers(session: Session) -> list[dict[str, object]]:
    return [tool_json(m.text) for m in await session.history() if isinstance(m, ToolMessage)]


async def test_approve_runs_the_call_after_the_question(scripted):
    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), "Deleted.")
    session = session_over(model, [files_delete])

    await session.run("delete a.txt")

    [asked] = await questions(session)
    assert ran["files_delete"] == 0, "nothing runs before the answer"
    question = asked.value
    assert question["kind"] == "approval"
    assert question["action"]["name"] == "files_delete"
    assert question["action"]["args"] == {"path": "a.txt"}
    assert question["agent_path"] == []
    assert question["allowed"] == ["approve", "edit", "reject"]
    assert "'delete'" in question["why"]
    assert list(question["args_schema"]["properties"]) == ["path"]

    await answer(session, {asked.id: {"type": "approve"}})

    assert ran["files_delete"] == 1
    [result] = await tool_answers(session)
    assert result == {"status": "success", "message": "deleted a.txt"}
    message = next(m for m in await session.history() if isinstance(m, ToolMessage))
    assert message.artifact["request_id"] == question["request_id"]
    assert (await session.history())[-1].text == "Deleted."


async def test_edit_runs_the_call_with_the_persons_arguments(scripted):
    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), "Deleted b.")
    session = session_over(model, [files_delete])
    await session.run("delete a.txt")

    edit = edit_to("files_delete", {"path": "b.txt"})
    await answer_only(session, edit)

    assert received == ["b.txt"]
    [result] = await tool_answers(session)
    assert result["status"] == "success"
    assert result["message"].startswith("The user changed the arguments before the call ran")
    assert '{"path": "b.txt"}' in result["message"] and result["message"].endswith("deleted b.txt")


async def test_reject_does_not_run_the_call_and_the_model_hears_why(scripted):
    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), "Not deleted.")
    session = session_over(model, [files_delete])
    await session.run("delete a.txt")

    await answer_only(session, {"type": "reject", "message": "too risky"})

    assert ran["files_delete"] == 0
    [result] = await tool_answers(session)
    assert result == {
        "status": "failure",
        "type": "error",
        "message": "The user rejected this call: too risky",
        "error_code": "rejected",
        "recoverable": False,
    }
    assert "retry_strategy" not in result
    assert (await session.history())[-1].text == "Not deleted."


async def test_an_invalid_edit_asks_again_saying_what_was_wrong(scripted):
    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), "Deleted.")
    session = session_over(model, [files_delete])
    await session.run("delete a.txt")

    bad = edit_to("files_delete", {"path": 5})
    first = await answer_only(session, bad)

    [again] = await questions(session)
    assert again.id != first.id
    assert "path" in again.value["problem"] and "string" in again.value["problem"]
    assert again.value["action"]["args"] == {"path": "a.txt"}
    assert ran["files_delete"] == 0
    good = edit_to("files_delete", {"path": "c.txt"})
    await answer(session, {again.id: good})

    assert received == ["c.txt"]
    assert await questions(session) == []


async def test_an_unreadable_answer_is_a_rejection(scripted):
    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), "Not deleted.")
    session = session_over(model, [files_delete])
    await session.run("delete a.txt")

    await answer_only(session, "sure, go ahead")

    assert ran["files_delete"] == 0
    [result] = await tool_answers(session)
    assert result["error_code"] == "rejected"
    assert result["message"].startswith("The user rejected this call: the answer could not be read")


async def test_an_answer_the_question_does_not_allow_is_a_rejection(scripted):
    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), "Not deleted.")
    session = session_over(model, [files_delete])
    await session.run("delete a.txt")

    await answer_only(session, {"type": "respond", "message": "whatever"})

    assert ran["files_delete"] == 0
    [result] = await tool_answers(session)
    assert "respond is not an answer to this question" in result["message"]


async def test_ask_human_gives_the_model_the_persons_answer(scripted):
    model = scripted(
        call_tools(("ask_human", {"question": "Which city?", "context": "Two offices."})),
        "Booked Oslo.",
    )
    session = session_over(model, [ask_human])
    await session.run("book the trip")

    asked = await answer_only(session, {"type": "respond", "message": "Oslo"})

    assert asked.value["kind"] == "question"
    assert asked.value["allowed"] == ["respond", "reject"]
    assert asked.value["action"]["args"] == {"question": "Which city?", "context": "Two offices."}
    last_round = model.received[-1]
    [answered] = [tool_json(m.text) for m in last_round if isinstance(m, ToolMessage)]
    assert answered == {"status": "success", "message": "Oslo"}


async def test_a_question_is_never_handed_to_the_background(scripted):
    # With no inline budget every call goes on in the background at once; a question
    # handed over would pause nothing and be lost.
    model = scripted(call_tools(("ask_human", {"question": "Which city?"})), "Booked Oslo.")
    session = session_over(model, [ask_human], inline_budget_seconds=0)
    await session.run("book the trip")

    await answer_only(session, {"type": "respond", "message": "Oslo"})

    assert await tool_answers(session) == [{"status": "success", "message": "Oslo"}]


async def test_ask_human_declined_is_an_error_the_model_can_handle(scripted):
    model = scripted(call_tools(("ask_human", {"question": "Your PIN?"})), "Understood.")
    session = session_over(model, [ask_human])
    await session.run("pay")

    await answer_only(session, {"type": "reject", "message": "private"})

    [result] = await tool_answers(session)
    assert result["status"] == "failure" and result["error_code"] == "declined"
    assert result["message"] == "The user declined to answer: private"


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        ({"type": "approve"}, ("granted", "The user granted the authorization for payments.")),
        (
            {"type": "reject", "message": "not this month"},
            ("refused", "The user refused the authorization for payments: not this month"),
        ),
    ],
)
async def test_request_authorization_is_granted_or_refused(scripted, decision, expected):
    model = scripted(
        call_tools(("request_authorization", {"tool_name": "payments", "reason": "rent"})), "OK."
    )
    session = session_over(model, [request_authorization])
    await session.run("pay the rent")

    asked = await answer_only(session, decision)

    assert asked.value["kind"] == "authorization"
    assert asked.value["allowed"] == ["approve", "reject"]
    [result] = await tool_answers(session)
    assert (result["data"]["decision"], result["message"]) == expected


async def test_parallel_questions_are_answered_in_one_resume_and_a_sibling_runs_once(scripted):
    model = scripted(
        call_tools(
            ("files_delete", {"path": "a.txt"}), ("quick", {}), ("files_delete", {"path": "b.txt"})
        ),
        "Done.",
    )
    session = session_over(model, [files_delete, quick])
    await session.run("clean up")

    pending = await questions(session)
    assert sorted(q.value["action"]["args"]["path"] for q in pending) == ["a.txt", "b.txt"]
    assert ran == {"quick": 1}
    decisions = {
        q.id: {"type": "approve"}
        if q.value["action"]["args"]["path"] == "a.txt"
        else {"type": "reject", "message": "keep it"}
        for q in pending
    }
    await answer(session, decisions)

    assert received == ["a.txt"]
    assert ran == {"quick": 1, "files_delete": 1}, "the finished sibling did not run again"
    messages = sorted(r["message"] for r in await tool_answers(session))
    assert messages == ["The user rejected this call: keep it", "deleted a.txt", "quick done"]
    model.assert_complete()


SENSITIVE_LEAF = '''
from pathlib import Path

from pydantic import BaseModel, Field

from orchestrator.tools import Tool, ToolRequest, ToolResult, action

RUNS = Path({runs!r})


class ClearParams(BaseModel):
    what: str = Field(description="What to clear.")


class Leaf(Tool):
    @action(sensitive=True)
    async def clear(self, params: ClearParams, request: ToolRequest) -> ToolResult:
        """Clear something for good."""
        with RUNS.open("a") as runs:
            runs.write(params.what + "\\n")
        return request.result("cleared " + params.what)
'''


async def test_a_sensitive_call_three_levels_down_resumes_inside_the_sub_agent(
    scripted, tmp_path: Path
):
    root, runs = tmp_path / "sub_graphs", tmp_path / "runs.txt"
    three_levels(root, leaf_code=SENSITIVE_LEAF.format(runs=str(runs)))
    model = scripted(
        call_tools(("top_ask", {"request": "clear the cache"})),
        call_tools(("mid_ask", {"request": "clear the cache"})),
        call_tools(("leaf_clear", {"what": "cache"})),
        "mid: cleared",
        "top: cleared",
        "The cache is cleared.",
    )
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True)
    session = runtime.session(user_id="u1")

    await session.run("clear the cache")

    [asked] = await questions(session)
    assert asked.value["agent_path"] == ["top", "mid"]
    assert asked.value["action"]["name"] == "leaf_clear"
    assert asked.value["why"] == WHY_AUTHOR
    assert len(model.received) == 3 and not runs.exists()

    await answer(session, {asked.id: {"type": "approve"}})

    assert runs.read_text() == "cache\n", "the sensitive call ran once, after the answer"
    assert len(model.received) == 6, "no model round of any level ran again"
    assert (await session.history())[-1].text == "The cache is cleared."
    mid_round = model.received[3]
    [cleared] = [tool_json(m.text) for m in mid_round if isinstance(m, ToolMessage)]
    assert cleared == {"status": "success", "message": "cleared cache"}


async def test_nested_agents_may_ask_the_person_too(scripted, tmp_path: Path):
    root = tmp_path / "sub_graphs"
    three_levels(root)
    model = scripted(
        call_tools(("top_ask", {"request": "say hi"})),
        call_tools(("ask_human", {"question": "To whom?"})),
        "top: said hi to Ada",
        "Done.",
    )
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True)
    session = runtime.session(user_id="u1")
    await session.run("say hi")

    asked = await answer_only(session, {"type": "respond", "message": "Ada"})

    assert asked.value["agent_path"] == ["top"]
    top_round = model.received[2]
    [answered] = [tool_json(m.text) for m in top_round if isinstance(m, ToolMessage)]
    assert answered == {"status": "success", "message": "Ada"}


FIXED_LEAF = '''
from typing import Annotated

from pydantic import BaseModel, Field

from orchestrator.tools import NotAI, Tool, ToolRequest, ToolResult, action


class DropParams(BaseModel):
    table: str = Field(description="Which table.")
    api_key: Annotated[str, NotAI] = Field(description="The service's key.")


class Db(Tool):
    @action
    async def truncate(self, params: DropParams, request: ToolRequest) -> ToolResult:
        """Empty a table."""
        return request.result(f"emptied {params.table} with {params.api_key}")
'''


async def test_an_edit_sets_only_what_the_model_may_set(scripted, tmp_path: Path):
    root = tmp_path / "sub_graphs"
    config = {
        "name": "db", "description": "A database.", "version": "1",
        "sensitive_actions": ["truncate"], "parameters": {"api_key": {"value": "key-123"}},
    }
    write_folder(root, "db", config=config, code=FIXED_LEAF)
    model = scripted(call_tools(("db_truncate", {"table": "users"})), "Emptied.")
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True)
    session = runtime.session(user_id="u1")
    await session.run("empty users")

    first = await answer_only(session, edit_to("db_truncate", {"table": "t", "api_key": "x"}))
    assert first.value["why"] == WHY_CONFIG
    assert list(first.value["args_schema"]["properties"]) == ["table"]
    assert "key-123" not in json.dumps(first.value)
    [again] = await questions(session)
    assert "'api_key'" in again.value["problem"]
    await answer(session, {again.id: edit_to("db_truncate", {"table": "logs"})})

    [result] = await tool_answers(session)
    assert result["message"] == (  # the note shows the person's arguments, no fixed value
        'The user changed the arguments before the call ran; it ran with {"table": "logs"}. '
        "emptied logs with key-123"
    )


async def test_a_call_run_outside_a_conversation_is_not_approved_silently():
    limits = Limits(max_iterations=3, max_result_chars=4000, timeout_seconds=60.0)
    dispatcher = Dispatcher([files_delete], limits=limits)
    call = {"name": "files_delete", "args": {"path": "a.txt"}, "id": "c1", "type": "tool_call"}

    result = await dispatcher.dispatch(dispatcher.request(call, RunContext(user_id="u1")))

    assert ran["files_delete"] == 0
    assert result.error_code == "rejected" and "no conversation to ask in" in result.message


class PathParams(BaseModel):
    path: str = Field(description="Which file.")


class Files(Tool):
    name: str = "files"
    description: str = "Files."

    @action(sensitive=True)
    async def shred(self, params: PathParams, request: ToolRequest) -> ToolResult:
        """Shred a file."""
        return request.result("shredded")

    @action
    async def archive(self, params: PathParams, request: ToolRequest) -> ToolResult:
        """Archive a file."""
        return request.result("archived")

    @action(PathParams)
    async def show(self, params: PathParams, request: ToolRequest) -> ToolResult:
        """Show a file."""
        return request.result("shown")


def reasons(**fields: object) -> dict[str, str | None]:
    """Why each action of `Files` needs a decision, with a tool_config.yaml of `fields`."""
    config = ToolConfig(name="files", description="Files.", version="1", **fields)
    rules = SensitivityRules()
    return {t.name: rules.why(t.name, t.metadata) for t in langchain_tools(Files(), config=config)}


def test_which_calls_need_a_decision_and_why():
    assert reasons(sensitive_actions=["archive"]) == {
        "files_archive": WHY_CONFIG, "files_shred": WHY_AUTHOR, "files_show": None,
    }
    assert set(reasons(requires_approval=True).values()) == {
        WHY_FOLDER, f"{WHY_FOLDER}; {WHY_AUTHOR}",
    }
    with pytest.raises(ToolLoadError, match="'shout'"):
        reasons(sensitive_actions=["shout"])

    rules = SensitivityRules()
    assert rules.matching("files_delete") == "delete"
    assert rules.matching("removeItem") == "remove"
    assert rules.matching("deleted_items") is None
    assert rules.matching("dropdown_list") is None
    assert SensitivityRules.of(["drop_table"]).matching("db_drop_table") == "drop_table"
    assert SensitivityRules.of(["drop_table"]).matching("drop_view") is None
    assert SensitivityRules.of([]).why("files_delete") is None
    assert [t.name for t in builtin_tools() if rules.why(t.name, t.metadata)] == []


def test_the_sensitive_patterns_setting(monkeypatch: pytest.MonkeyPatch):
    assert load_settings().sensitive_words == ("delete", "remove", "destroy", "drop", "purge")
    monkeypatch.setenv("ORCHESTRATOR_SENSITIVE_PATTERNS", " wipe , drop_table ,")
    assert load_settings().sensitive_words == ("wipe", "drop_table")
    monkeypatch.setenv("ORCHESTRATOR_SENSITIVE_PATTERNS", "none")
    assert load_settings().sensitive_words == ()


async def test_no_pattern_means_no_question(scripted):
    model = scripted(call_tools(("files_delete", {"path": "a.txt"})), "Deleted.")
    session = session_over(model, [files_delete], sensitive_patterns="none")

    await session.run("delete a.txt")

    assert await questions(session) == [] and ran["files_delete"] == 1


def events(history: list[tuple[str, str | None]]) -> list[tuple[str, dict[str, object] | None]]:
    return [(status, json.loads(detail) if detail else None) for status, detail in history]


async def test_every_question_and_decision_is_in_the_request_log(
    scripted, database_url: str, database: Database, tmp_path: Path
):
    model = scripted(
        call_tools(
            ("files_delete", {"path": "a.txt"}),
            ("ask_human", {"question": "Why?"}),
            ("request_authorization", {"tool_name": "mail", "reason": "tell Bob", "urgency": "high"}),
        ),
        "Done.",
    )
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(
            load_settings(), model=model, tools=[files_delete, ask_human, request_authorization],
            storage=storage,
        )
        session = runtime.session(user_id="u1")
        await session.run("delete a.txt")
        pending = {q.value["kind"]: q for q in await questions(session)}
        bad = edit_to("files_delete", {"path": 5})
        await answer(session, {
            pending["approval"].id: bad,
            pending["question"].id: {"type": "respond", "message": "it is old"},
            pending["authorization"].id: {"type": "reject", "message": "not Bob"},
        })
        [again] = await questions(session)
        await answer(session, {again.id: edit_to("files_delete", {"path": "b.txt"})})
        messages = {m.name: m for m in await session.history() if isinstance(m, ToolMessage)}

    assert received == ["b.txt"]
    deleted = events(await request_history(
        database, messages["files_delete"].artifact["request_id"], user_id="u1"
    ))
    assert [status for status, _ in deleted] == [
        "created", "running", "paused", "resumed", "running", "invalid_edit", "paused",
        "resumed", "running", "edited", "completed", "closed",
    ]
    first_pause, invalid, second_pause, edited = (deleted[i][1] for i in (2, 5, 6, 9))
    [first_question] = first_pause["asked"]
    assert first_question["interrupt_id"] == pending["approval"].id
    assert first_question["question"]["action"]["args"] == {"path": "a.txt"}
    assert invalid["decision"] == "edit" and invalid["edited_args"] == {"path": 5}
    assert "path" in invalid["problem"]
    assert second_pause["asked"][0]["question"]["problem"] == invalid["problem"]
    assert (first_question["question"]["risk_level"], first_question["question"]["urgency"]) == (
        "medium", "normal",
    )
    assert edited == {
        "decision": "edit", "args": {"path": "a.txt"}, "edited_args": {"path": "b.txt"},
        "risk_level": "medium", "urgency": "normal",
    }

    asked = events(await request_history(
        database, messages["ask_human"].artifact["request_id"], user_id="u1"
    ))
    assert [status for status, _ in asked] == [
        "created", "running", "paused", "resumed", "running", "answered", "completed", "closed",
    ]
    assert asked[5][1] == {
        "decision": "respond", "question": "Why?", "answer": "it is old",
        "risk_level": "low", "urgency": "normal",
    }

    authorized = events(await request_history(
        database, messages["request_authorization"].artifact["request_id"], user_id="u1"
    ))
    assert [status for status, _ in authorized][5] == "refused"
    assert authorized[5][1] == {
        "decision": "reject", "tool_name": "mail", "reason": "tell Bob", "answer": "not Bob",
        "risk_level": "medium", "urgency": "high",
    }
