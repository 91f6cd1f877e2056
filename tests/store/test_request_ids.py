"""Every tool call has a request id of its own, whatever tool-call ids the model server reuses."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from langchain_core.messages import AIMessage
from sqlalchemy import text

from orchestrator.dispatch.replay import PriorCall, decide
from orchestrator.llm.offline import OfflineChatModel
from orchestrator.sources.builtin import builtin_tools
from orchestrator.store import Database
from orchestrator.store.requests import RequestLog
from orchestrator.testing import OpenAICompatibleServer
from orchestrator.testing.openai_server import RawReply, RawToolCall
from orchestrator.tools.request_log import CallRecord
from tests.helpers import server_env, start_and_kill
from tests.tool_folders import GATED_TOOL, parrot_agent, write_folder


def reused(name: str, args: dict[str, object]) -> RawReply:
    """A reply calling `name` under the id `call_0`, as some servers write every call."""
    return RawReply(tool_calls=[RawToolCall(name=name, arguments=json.dumps(args), id="call_0")])


def tool_reply(server: OpenAICompatibleServer, request: int) -> dict[str, object]:
    """What the tool said, as the model got it in request `request`."""
    message = server.requests[request]["messages"][-1]
    assert message["role"] == "tool"
    return json.loads(message["content"])


async def logged(database: Database, session: str) -> list[tuple[str, str, str]]:
    """The session's requests in the order they started: tool, outcome, id."""
    async with database.user_transaction("local") as connection:
        rows = await connection.execute(
            text("SELECT tool, outcome, request_id FROM requests WHERE session_id = :s ORDER BY created_at"),
            {"s": session},
        )
        return [tuple(row) for row in rows]


async def test_a_reused_call_id_gets_its_own_result_in_the_next_turn(
    cli, tmp_path: Path, database: Database
):
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [
        reused("calculator", {"expression": "12*7"}), "84.",
        reused("current_time", {"timezone": "Asia/Tokyo"}), "It is late in Tokyo.",
    ]
    with OpenAICompatibleServer(script) as server:
        env = server_env(server)
        first = cli("ask", "-s", session, "what is 12*7", cwd=tmp_path, env_extra=env)
        second = cli("ask", "-s", session, "what time is it in Asia/Tokyo", cwd=tmp_path, env_extra=env)

    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "84" in json.dumps(tool_reply(server, 1))
    clock = tool_reply(server, 3)
    assert clock["status"] == "success" and "Asia/Tokyo" in json.dumps(clock)
    assert "84" not in json.dumps(clock.get("data"))
    calls = [(tool, status) for tool, status, _ in await logged(database, session)]
    assert calls == [("calculator", "completed"), ("current_time", "completed")]


def test_a_nested_agent_reusing_call_ids_runs_each_call(cli, tmp_path: Path):
    """The agent's own model reuses `call_0` on its level, across two turns of the top."""
    parrot_agent(tmp_path / "sub_graphs")
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [
        reused("parrot_ask", {"request": "say one"}), reused("echo_say", {"text": "one"}), "said one", "one",
        reused("parrot_ask", {"request": "say two"}), reused("echo_say", {"text": "two"}), "said two", "two",
    ]
    with OpenAICompatibleServer(script) as server:
        env = server_env(server)
        first = cli("ask", "--answers-from-stdin", "-s", session, "say one", cwd=tmp_path, stdin="y\ny\n", env_extra=env)
        second = cli("ask", "-s", session, "say two", cwd=tmp_path, env_extra=env)

    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert tool_reply(server, 2)["message"] == "one"
    assert tool_reply(server, 6)["message"] == "two"  # not the first turn's "one"
    assert tool_reply(server, 7)["message"] == "said two"


async def test_a_resumed_turn_keeps_its_call_and_a_later_one_is_new(
    cli, tmp_path: Path, database_url: str, database: Database
):
    """Killed mid-call, the turn resumes under the same id; the next turn's `call_0` is another."""
    started, gate = tmp_path / "started", tmp_path / "gate"
    write_folder(tmp_path / "sub_graphs", "gated", code=GATED_TOOL.format(started=str(started), gate=str(gate)))
    session = f"s-{uuid.uuid4().hex[:8]}"
    script = [
        reused("gated_run", {}), "The gated run was cut off.",
        reused("calculator", {"expression": "6*7"}), "42.",
    ]
    with OpenAICompatibleServer(script) as server:
        env = {
            **os.environ, **server_env(server),
            "DATABASE_URL": database_url, "ORCHESTRATOR_EMBEDDINGS": "none", "HOME": str(tmp_path),
        }
        killed = await start_and_kill(tmp_path, session, env, started)
        gate.write_text("open")
        resumed = cli("chat", "-s", session, cwd=tmp_path, env_extra=server_env(server))
        later = cli("ask", "-s", session, "what is 6*7", cwd=tmp_path, env_extra=server_env(server))

    assert resumed.returncode == 0 and later.returncode == 0, resumed.stderr + later.stderr
    assert tool_reply(server, 1)["error_code"] == "interrupted"
    assert tool_reply(server, 3)["status"] == "success" and "42" in json.dumps(tool_reply(server, 3))
    calls = await logged(database, session)
    assert [(tool, status) for tool, status, _ in calls] == [("gated", "failed"), ("calculator", "completed")]
    assert calls[0][2] == killed  # the resumed turn found the call it had started


class _Log:
    """A request log that holds one record for every id: another call's."""

    def __init__(self, prior: PriorCall) -> None:
        self.prior_call = prior

    async def prior(self, call: CallRecord) -> PriorCall | None:
        return self.prior_call

    async def requeued(self, call: CallRecord) -> None: ...

    async def resumed(self, call: CallRecord) -> None: ...

    async def interrupted(self, call: CallRecord) -> None: ...


async def test_a_logged_result_of_another_call_is_never_the_answer():
    call = CallRecord(
        request_id="r1", parent_request_id=None, session_id="s", user_id="u",
        tool="current_time", action=None, call_name="current_time", parameters={"timezone": "UTC"},
    )
    other = PriorCall(
        status="completed", outcome="completed", body={"message": "84"},
        owner_alive=False, ours=True, same_call=False,
    )
    decision = await decide(call, log=_Log(other), runner=None)
    assert decision.run and decision.taken and decision.answer is None
    same = await decide(call, log=_Log(PriorCall(**{**other.__dict__, "same_call": True})), runner=None)
    assert not same.run and same.answer is not None and same.answer.message == "84"


async def test_the_offline_model_never_repeats_a_call_id():
    model = OfflineChatModel().bind_tools(builtin_tools())
    ids = set()
    for _ in range(3):
        reply = await model.ainvoke([("user", "what is 12*7")])
        assert isinstance(reply, AIMessage) and reply.tool_calls
        ids.add(reply.tool_calls[0]["id"])
    assert len(ids) == 3


async def test_the_log_tells_its_call_from_another_under_the_same_id(database: Database):
    log = RequestLog(database)
    call = CallRecord(
        request_id=uuid.uuid4().hex, parent_request_id=None, session_id="s", user_id="u",
        tool="calculator", action=None, call_name="calculator",
        parameters={"expression": "12*7", "nested": {"x": [1, 2.5, "\u00e9"]}},
    )
    assert await log.started(call)
    same = await log.prior(call)
    assert same is not None and same.same_call
    for other in ({"expression": "6*7"}, {**call.parameters, "extra": 1}):
        moved = CallRecord(**{**call.__dict__, "parameters": other})
        assert not (await log.prior(moved)).same_call
    renamed = CallRecord(**{**call.__dict__, "tool": "current_time", "call_name": "current_time"})
    assert not (await log.prior(renamed)).same_call
