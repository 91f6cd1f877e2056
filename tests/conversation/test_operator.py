"""An operator level lists the user's pending authorization requests and answers them.

A run paused on `request_authorization` in one session is answered by an
operator's `approve_authorization` in another: the paused run resumes as after
the person's answer. The level that asked never answers its own request, and
another user's requests are never seen.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from orchestrator.conversation.session import Session
from orchestrator.errors import ToolError
from orchestrator.folders.tool_config import ToolConfig
from orchestrator.levels import LevelConfig, Limits
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.sources.builtin import request_authorization
from orchestrator.sources.level_resolver import LevelResolver
from orchestrator.sources.operator_tools import approve_authorization
from orchestrator.store import Database
from orchestrator.store.requests import request_history
from orchestrator.testing import ScriptedChatModel, call_tools
from orchestrator.testing.scripted import Step
from orchestrator.tools.authorizations import PendingAuthorization
from orchestrator.tools.context import RunContext, running_in
from orchestrator.tools.decisions import Decision
from tests.helpers import storage_for, tool_json
from tests.tool_folders import AGENT_TOOL, write_folder

OPERATOR_TOOLS = {"get_authorization_requests", "approve_authorization"}
PAY: dict[str, object] = {"tool_name": "payments", "reason": "Pay the invoice of 12 EUR.", "risk_level": "high", "urgency": "high"}


def listed(messages: list[BaseMessage]) -> list[dict[str, object]]:
    """The requests the last `get_authorization_requests` result listed."""
    last = next(m for m in reversed(messages) if isinstance(m, ToolMessage))
    return json.loads(last.text).get("data") or []


def approve_the_one_listed(messages: list[BaseMessage]) -> AIMessage:
    """A model step: grant the one request `get_authorization_requests` listed."""
    [request] = listed(messages)
    arguments = {"request_id": request["request_id"], "approve": True, "reason": "fine by me"}
    return call_tools(("approve_authorization", arguments))


def tool_results(messages: list[BaseMessage], name: str) -> list[dict[str, object]]:
    return [json.loads(m.text) for m in messages if isinstance(m, ToolMessage) and m.name == name]


async def waiting_kinds(session: Session) -> list[str]:
    return [q.question["kind"] for q in await session.pending()]


async def test_an_operator_agent_grants_a_pending_request_of_the_same_user_and_the_run_resumes(
    scripted, database_url: str, database: Database, tmp_path: Path
):
    root = tmp_path / "sub_graphs"
    config = {"name": "ops", "description": "The operator.", "version": "1", "operator": True}
    write_folder(root, "ops", config=config, code=AGENT_TOOL.format(name="Ops"))
    model: ScriptedChatModel = scripted(
        call_tools(("request_authorization", PAY)),  # session A: the orchestrator asks
        call_tools(("ops_ask", {"request": "answer what waits"})),  # session B: the orchestrator
        call_tools(("get_authorization_requests", {})),  # ops
        approve_the_one_listed,  # ops: grants it, and session A resumes:
        "Paid the invoice.",  # session A's orchestrator, after the grant
        "ops: granted the payment",  # ops
        "Done.",  # session B's orchestrator
    )
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(settings, model=model, ask=lambda folder, status: True, storage=storage)
        asker = runtime.session(user_id="u1")
        await asker.run("pay the invoice")
        assert await waiting_kinds(asker) == ["authorization"]

        operator = runtime.session(user_id="u1")
        await operator.run("answer what waits")

        assert await waiting_kinds(asker) == [], "the operator's answer resumed the paused run"
        history = await asker.history()
    own_tools = {tool.name for tool in runtime.tools}
    assert history[-1].text == "Paid the invoice."
    [granted] = tool_results(history, "request_authorization")
    assert granted["message"] == "The user granted the authorization for payments."
    assert OPERATOR_TOOLS.isdisjoint(own_tools), "a level not configured as an operator has neither"
    [listing] = [json.loads(m.text) for m in model.received[3] if isinstance(m, ToolMessage)]
    [request] = listing["data"]
    assert request["session_id"] == asker.session_id
    assert (request["asked_by"], request["tool_name"]) == ("orchestrator", "payments")
    assert (request["risk_level"], request["urgency"]) == ("high", "high")
    answered = [json.loads(m.text) for m in model.received[5] if isinstance(m, ToolMessage)][-1]
    assert answered["status"] == "success"
    assert "granted" in answered["message"] and "Paid the invoice." in answered["message"]
    log = await request_history(database, str(request["request_id"]), user_id="u1")
    assert "granted" in [status for status, _ in log]


async def test_the_level_that_asked_is_refused_and_another_user_sees_nothing(
    scripted, database_url: str, tmp_path: Path
):
    model: ScriptedChatModel = scripted()
    remembered: list[str] = []

    def remember(messages: list[BaseMessage]) -> AIMessage:
        [request] = listed(messages)
        remembered.append(str(request["request_id"]))
        return call_tools(("approve_authorization", {"request_id": remembered[0], "approve": True}))

    def as_another_user(_: list[BaseMessage]) -> AIMessage:
        return call_tools(("approve_authorization", {"request_id": remembered[0], "approve": False}))

    steps: list[Step] = [
        call_tools(("request_authorization", PAY)),  # u1, session A, the orchestrator's level
        call_tools(("get_authorization_requests", {})),  # u1, session B, the same level
        remember,
        "Could not.",
        call_tools(("get_authorization_requests", {})),  # u2
        as_another_user,
        "Nothing for me.",
    ]
    model.steps = steps
    settings = load_settings(operator=True, data_dir=tmp_path / "data")
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(
            settings, model=model, tools=[request_authorization], storage=storage
        )
        assert {tool.name for tool in runtime.tools} >= OPERATOR_TOOLS
        asker = runtime.session(user_id="u1")
        await asker.run("pay the invoice")
        await runtime.session(user_id="u1").run("answer what waits")
        still_u1 = await waiting_kinds(asker)
        await runtime.session(user_id="u2").run("answer what waits")
        still_u2 = await waiting_kinds(asker)

    refused = [json.loads(m.text) for m in model.received[3] if isinstance(m, ToolMessage)][-1]
    assert refused["status"] == "failure" and refused["error_code"] == "refused"
    assert "asked by this level (orchestrator)" in refused["message"]
    assert still_u1 == ["authorization"], "a refused answer resumes nothing"
    [nothing] = [tool_json(m.text) for m in model.received[5] if isinstance(m, ToolMessage)]
    assert nothing == {"status": "success", "message": "No authorization request waits.", "data": []}
    unknown = [json.loads(m.text) for m in model.received[6] if isinstance(m, ToolMessage)][-1]
    assert unknown["status"] == "failure" and unknown["error_code"] == "not_found"
    assert still_u2 == ["authorization"], "another user's answer reaches nothing"


async def test_without_the_database_the_operator_tools_say_so(scripted):
    model = scripted(call_tools(("get_authorization_requests", {})), "No database.")
    runtime = Orchestrator.create(load_settings(operator=True), model=model, tools=[])
    session = runtime.session(user_id="u1")

    await session.run("what waits?")

    [said] = tool_results(await session.history(), "get_authorization_requests")
    assert said["status"] == "failure"
    assert "needs the database" in str(said["message"])


class OneRequestDesk:
    """A desk holding one pending request, which records the answers it is given."""

    def __init__(self, request: PendingAuthorization) -> None:
        self.request = request
        self.answers: list[Decision] = []

    async def pending(self, *, user_id: str) -> list[PendingAuthorization]:
        return [self.request]

    async def answer(self, request: PendingAuthorization, decision: Decision, *, user_id: str) -> str:
        self.answers.append(decision)
        return "Its run resumed and ended."


async def test_a_request_of_the_operators_own_conversation_is_left_to_the_person():
    request = PendingAuthorization(
        request_id="r1", session_id="s1", question_id="q1", agent_path=("top",),
        tool_name="payments", reason="Pay.", risk_level="high", urgency="normal",
    )
    desk = OneRequestDesk(request)
    arguments = {"request_id": "r1", "approve": True}

    with (
        running_in(RunContext(user_id="u1", session_id="s1", authorizations=desk)),
        pytest.raises(ToolError, match="waits in this very conversation") as refused,
    ):
        await approve_authorization.ainvoke(arguments)
    with running_in(RunContext(user_id="u1", session_id="s2", authorizations=desk)):
        elsewhere = await approve_authorization.ainvoke(arguments)

    assert refused.value.code == "refused"
    assert desk.answers == [{"type": "approve"}], "only the answer from another conversation went through"
    assert "r1 granted. Its run resumed and ended." in str(elsewhere)


def test_an_operator_is_its_own_agents_level_only():
    settings = load_settings()
    resolver = LevelResolver(settings)
    top = LevelConfig(model=ScriptedChatModel(), limits=Limits.from_settings(settings))

    def folder(name: str, **fields: object) -> ToolConfig:
        return ToolConfig.model_validate({"name": name, "description": "A folder.", "version": "1", **fields})

    ops = resolver.child(top, folder("ops", operator=True), agent=True)
    below = resolver.child(ops, folder("helper"), agent=True)
    tool = resolver.child(top, folder("files", operator=True), agent=False)

    assert (top.operator, ops.operator, below.operator, tool.operator) == (False, True, False, False)
