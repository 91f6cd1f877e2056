"""The dispatch pipeline: LangGraph control flow passes through, one task per call, middleware order.

Interrupts raised inside a tool (or inside a tool of a nested agent) pause the
turn instead of becoming tool errors; calls of one model turn are tasks of
their own, so a resumed turn runs only the calls that had not ended.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections import Counter
from pathlib import Path

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from orchestrator.conversation.recovery import recover
from orchestrator.conversation.session import Session
from orchestrator.dispatch.dispatcher import default_middleware
from orchestrator.dispatch.middleware import CallRequest, Handler
from orchestrator.graph import AgentSpec, build_agent_graph
from orchestrator.graph.model_pipeline import ModelAnswer, ModelCall, ModelHandler
from orchestrator.graph.model_pipeline.model_call import STOPPED
from orchestrator.graph.prompts import ITERATION_LIMIT
from orchestrator.levels import Limits
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.store import Database
from orchestrator.store.checkpoints import PooledPostgresSaver
from orchestrator.store.requests import RequestLog, request_history
from orchestrator.store.storage import Storage
from orchestrator.testing import ScriptedChatModel, call_tools
from orchestrator.tools import ToolResult
from orchestrator.tools.context import current_context
from orchestrator.tools.request_log import CallRecord
from tests.helpers import storage_for, tool_json

entered: Counter[str] = Counter()


@tool
async def confirm(question: str) -> str:
    """Ask the person a yes/no question."""
    entered["confirm"] += 1
    return f"answer: {interrupt({'question': question})}"


@tool
async def quick() -> str:
    """Answer at once."""
    entered["quick"] += 1
    return "quick done"


def delegating_to(inner: CompiledStateGraph) -> BaseTool:
    """A tool `delegate` that runs `inner` as a nested agent, with the call's run context."""

    @tool
    async def delegate(request: str, config: RunnableConfig) -> str:
        """Hand the request to the inner agent."""
        state = await inner.ainvoke(
            {"messages": [("user", request)]}, config, context=current_context()
        )
        return state["messages"][-1].text

    return delegate


def session_over(model: ScriptedChatModel, tools: list[BaseTool], **settings: object) -> Session:
    runtime = Orchestrator.create(
        load_settings(**settings), model=model, tools=tools, checkpointer=InMemorySaver()
    )
    return runtime.session(user_id="u1")


async def resume(session: Session, answers: object) -> None:
    """Answer the pending interrupts and run the turn to its end."""
    async for _ in session.graph.astream(
        Command(resume=answers), session.config, context=session.context, durability="sync"
    ):
        pass


async def pending(session: Session) -> list[object]:
    state = await session.graph.aget_state(session.config)
    return [found.value for found in state.interrupts]


async def test_an_interrupt_in_a_tool_pauses_the_turn_and_resume_finishes_it(scripted):
    entered.clear()
    model = scripted(call_tools(("confirm", {"question": "send it?"})), "Sent.")
    session = session_over(model, [confirm])

    await session.run("send the mail")

    assert await pending(session) == [{"question": "send it?"}]
    assert not [m for m in await session.history() if isinstance(m, ToolMessage)], (
        "the interrupt is not an error tool message"
    )
    await resume(session, "yes")
    history = await session.history()
    answer = next(m for m in history if isinstance(m, ToolMessage))
    assert tool_json(answer.text) == {"status": "success", "message": "answer: yes"}
    assert history[-1].text == "Sent."
    assert await pending(session) == []
    model.assert_complete()


async def test_an_interrupt_is_not_retried_nor_a_failure(scripted):
    entered.clear()
    retried = confirm.model_copy(update={"metadata": {"max_retries": 3}})
    model = scripted(call_tools(("confirm", {"question": "ok?"})))
    session = session_over(model, [retried])

    await session.run("go")

    assert entered["confirm"] == 1, "an interrupt is LangGraph control flow, never retried"
    assert await pending(session) == [{"question": "ok?"}]


async def test_an_interrupt_in_a_nested_agents_tool_pauses_the_whole_turn(scripted):
    entered.clear()
    limits = Limits(max_iterations=3, max_result_chars=4000, timeout_seconds=60.0)
    inner = build_agent_graph(
        AgentSpec(
            model=scripted(call_tools(("confirm", {"question": "delete?"})), "inner done"),
            tools=[confirm],
            limits=limits,
            name="inner",
        )
    )

    delegate = delegating_to(inner)

    outer = scripted(call_tools(("delegate", {"request": "clean up"})), "all done")
    session = session_over(outer, [delegate])

    await session.run("go")

    assert await pending(session) == [{"question": "delete?"}]
    assert not [m for m in await session.history() if isinstance(m, ToolMessage)]
    await resume(session, "yes")
    history = await session.history()
    assert json.loads(next(m for m in history if isinstance(m, ToolMessage)).text)["message"] == (
        "inner done"
    )
    assert history[-1].text == "all done"


async def test_parallel_pauses_surface_together_and_a_finished_sibling_runs_once(scripted):
    entered.clear()
    model = scripted(
        call_tools(("confirm", {"question": "one?"}), ("quick", {}), ("confirm", {"question": "two?"})),
        "Both answered.",
    )
    session = session_over(model, [confirm, quick])

    await session.run("go")

    state = await session.graph.aget_state(session.config)
    assert sorted(i.value["question"] for i in state.interrupts) == ["one?", "two?"]
    await resume(session, {i.id: f"yes to {i.value['question']}" for i in state.interrupts})

    answers = [json.loads(m.text)["message"] for m in await session.history() if isinstance(m, ToolMessage)]
    assert sorted(answers) == ["answer: yes to one?", "answer: yes to two?", "quick done"]
    assert entered["quick"] == 1, "the sibling that had finished was not run again"
    assert entered["confirm"] == 4, "each paused call ran once before and once after"
    model.assert_complete()


class Spy:
    """A middleware that notes every call it sees, and the result on its way out."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def awrap_tool_call(self, request: CallRequest, handler: Handler) -> ToolResult:
        result = await handler(request)
        self.seen.append((request.name, result.status))
        return result


async def test_middleware_sees_every_call_of_every_level_in_order(scripted):
    spy = Spy()
    limits = Limits(max_iterations=3, max_result_chars=4000, timeout_seconds=60.0)
    middleware = [spy]  # around the defaults
    inner = build_agent_graph(
        AgentSpec(
            model=scripted(call_tools(("quick", {})), "inner done"),
            tools=[quick],
            limits=limits,
            middleware=middleware,
            name="inner",
        )
    )

    delegate = delegating_to(inner)

    model = scripted(call_tools(("delegate", {"request": "x"}), ("nope", {})), "done")
    runtime = Orchestrator.create(
        load_settings(), model=model, tools=[delegate], checkpointer=InMemorySaver(),
        middleware=middleware,
    )
    await runtime.session(user_id="u1").run("go")

    assert sorted(spy.seen) == [("delegate", "success"), ("nope", "failure"), ("quick", "success")]


@tool
async def wire_money(amount: int) -> str:
    """Send money."""
    entered["wire_money"] += 1
    return f"sent {amount}"


def wiring_settings(**settings: object) -> Settings:
    """Settings under which a call named like `wire_money` needs the person's decision."""
    return load_settings(sensitive_patterns="wire", **settings)


async def approve_all(session: Session) -> list[object]:
    """Approve every pending question and run the turn on; the questions."""
    state = await session.graph.aget_state(session.config)
    await resume(session, {found.id: {"type": "approve"} for found in state.interrupts})
    return [found.value for found in state.interrupts]


class ModelSpy:
    """A model middleware that keeps every answer it sees on its way out."""

    def __init__(self) -> None:
        self.answers: list[ModelAnswer] = []

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        answer = await handler(request)
        self.answers.append(answer)
        return answer


async def test_the_documented_recipe_keeps_the_settings_sensitive_patterns(scripted):
    entered.clear()
    settings, spy = wiring_settings(), Spy()
    model = scripted(call_tools(("wire_money", {"amount": 5})), "Sent.")
    runtime = Orchestrator.create(
        settings, model=model, tools=[wire_money], checkpointer=InMemorySaver(),
        middleware=[spy, *default_middleware(settings)], replace_defaults=True,
    )
    session = runtime.session(user_id="u1")

    await session.run("send 5")

    [asked] = await pending(session)
    assert isinstance(asked, dict) and asked["kind"] == "approval" and "'wire'" in asked["why"]
    assert entered["wire_money"] == 0 and spy.seen == [], "the call waits for the decision"
    await approve_all(session)
    assert spy.seen == [("wire_money", "success")]


async def test_middleware_and_model_middleware_both_run_around_the_defaults(scripted):
    entered.clear()
    spy, model_spy = Spy(), ModelSpy()
    model = scripted(
        call_tools(("wire_money", {"amount": 5})), call_tools(("wire_money", {"amount": 6}))
    )
    runtime = Orchestrator.create(
        wiring_settings(max_tool_iterations=1), model=model, tools=[wire_money],
        checkpointer=InMemorySaver(), middleware=[spy], model_middleware=[model_spy],
    )
    session = runtime.session(user_id="u1")

    await session.run("send 5, then 6")

    # the default approval gate, inside `spy`, with the settings' patterns
    assert [q["kind"] for q in await approve_all(session)] == ["approval"]  # type: ignore[index]
    assert spy.seen == [("wire_money", "success")] and entered["wire_money"] == 1
    # the default round limit, inside `model_spy`, stopped the second round
    assert model_spy.answers[-1].ended == STOPPED
    assert (await session.history())[-1].text == ITERATION_LIMIT.format(limit=1)
    assert [type(m) for m in runtime.middleware] == [
        Spy, *(type(m) for m in default_middleware(wiring_settings()))
    ]


class AnswersInTheModelsPlace:
    """A model middleware that calls `wire_money` once, then says it is done; no model."""

    async def awrap_model_call(self, request: ModelCall, handler: ModelHandler) -> ModelAnswer:
        if request.iterations == 0:
            return ModelAnswer(call_tools(("wire_money", {"amount": 7})))
        return ModelAnswer(AIMessage("Done."))


async def test_replace_defaults_makes_each_chain_given_the_whole_chain(scripted):
    entered.clear()
    spy = Spy()
    model = scripted()  # an empty script: any call of the model fails the test
    runtime = Orchestrator.create(
        wiring_settings(), model=model, tools=[wire_money], checkpointer=InMemorySaver(),
        middleware=[spy], model_middleware=[AnswersInTheModelsPlace()], replace_defaults=True,
    )
    session = runtime.session(user_id="u1")

    result = await session.run("send 7")

    assert runtime.middleware == [spy]
    assert result.answer == "Done." and model.received == []
    assert await pending(session) == [], "no approval gate: the defaults were replaced"
    assert spy.seen == [("wire_money", "success")] and entered["wire_money"] == 1


DEAD = f"{socket.gethostname()}:999999999:0"  # no such process


async def orphan(database: Database, *, idempotent: bool) -> CallRecord:
    """A call of `quick` that a dead process left running."""
    record = CallRecord(
        request_id=uuid.uuid4().hex, parent_request_id=None, session_id=f"s-{uuid.uuid4().hex[:8]}",
        user_id="u1", tool="quick", action=None, call_name="quick", parameters={},
        idempotent=idempotent,
    )
    await RequestLog(database).started(record)
    async with database.user_transaction("u1") as connection:
        await connection.execute(
            text("UPDATE requests SET owner = :owner WHERE request_id = :id"),
            {"owner": DEAD, "id": record.request_id},
        )
    return record


async def test_recovery_runs_through_the_same_pipeline(
    scripted, database_url: str, database: Database, tmp_path: Path
):
    entered.clear()
    spy = Spy()
    again, failed = await orphan(database, idempotent=True), await orphan(database, idempotent=False)
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(
            load_settings(), model=scripted(), tools=[quick], storage=storage,
            middleware=[spy],
        )
        outcomes = {r.call.request_id: r.outcome for r in await recover(runtime, user_id="u1")}
        await runtime.jobs.drain()

    assert outcomes == {again.request_id: "requeued", failed.request_id: "failed"}
    assert sorted(spy.seen) == [("quick", "failure"), ("quick", "partial")]
    assert entered["quick"] == 1, "the idempotent call ran again, the other did not"
    statuses = [s for s, _ in await request_history(database, again.request_id, user_id="u1")]
    assert statuses[-3:] == ["running", "completed", "closed"]


async def test_a_paused_call_is_logged_once_and_runs_again_on_resume(
    scripted, database_url: str, database: Database, tmp_path: Path
):
    entered.clear()
    model = scripted(call_tools(("confirm", {"question": "go?"})), "Went.")
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(load_settings(), model=model, tools=[confirm], storage=storage)
        session = runtime.session(user_id="u1")
        await session.run("go")
        assert await pending(session) == [{"question": "go?"}]
        await resume(session, "yes")
        answer = next(m for m in await session.history() if isinstance(m, ToolMessage))

    request_id = answer.artifact["request_id"]
    statuses = [s for s, _ in await request_history(database, request_id, user_id="u1")]
    assert statuses == ["created", "running", "paused", "resumed", "running", "completed", "closed"]
    async with database.user_transaction("u1") as connection:
        rows = await connection.scalar(
            text("SELECT count(*) FROM requests WHERE session_id = :s"), {"s": session.session_id}
        )
    assert rows == 1


async def test_the_run_context_carries_the_users_database_and_meters_tool_billing(
    scripted, database_url: str, tmp_path: Path
):
    seen: dict[str, object] = {}

    @tool
    async def billed() -> ToolResult:
        """Cost something, and look at the database as the run's user."""
        database = current_context().database
        async with database.transaction() as connection:
            seen["user"] = await connection.scalar(text("SELECT current_setting('app.user_id', true)"))
        return ToolResult(message="done", billing={"total_cost_usd": 0.25})

    model = scripted(call_tools(("billed", {}), ("billed", {})), "Paid.")
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(load_settings(), model=model, tools=[billed], storage=storage)
        session = runtime.session(user_id="u7")
        await session.run("pay twice")

    assert seen["user"] == "u7"
    billed_calls = session.usage.session.tools["billed"]
    assert (billed_calls.calls, billed_calls.cost_usd) == (2, 0.5)
    assert session.usage.session.tool_cost_usd == 0.5


async def writes_holding(connection: AsyncConnection, session: str, kind: str) -> list[str]:
    """The transactions (xmin) of the session's checkpoint writes that hold a `kind` message."""
    rows = await connection.execute(
        text(
            "SELECT DISTINCT xmin::text FROM checkpoint_writes "
            "WHERE thread_id = :session AND position(CAST(:kind AS bytea) in blob) > 0"
        ),
        {"session": session, "kind": kind},
    )
    return list(rows.scalars().all())


async def test_an_inline_calls_end_commits_with_the_checkpoint_writes_of_its_result(
    scripted, database_url: str, tmp_path: Path
):
    """No transaction of its own: the end and the result it records are saved together or not at all.

    Its start commits before it runs, on its own (a call that may not run
    twice is known to have started whatever happens next).
    """
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(
            load_settings(), model=scripted(call_tools(("quick", {})), "Done."), tools=[quick], storage=storage
        )
        session = runtime.session(user_id="u1")
        await session.run("go")
        async with storage.database.admin_transaction() as connection:
            ended, running = (
                await connection.execute(
                    text(
                        "SELECT requests.xmin::text, events.xmin::text FROM requests "
                        "JOIN request_events AS events USING (request_id) "
                        "WHERE requests.session_id = :session AND events.status = 'running'"
                    ),
                    {"session": session.session_id},
                )
            ).one()
            result_writes = await writes_holding(connection, session.session_id, "ToolMessage")

    assert result_writes == [ended], "the end commits in the transaction of the task's writes"
    assert running != ended, "the start committed before, on its own"


async def test_a_model_calls_usage_commits_with_the_checkpoint_writes_of_its_reply(
    scripted, database_url: str, tmp_path: Path
):
    """No transaction of its own: each model call's usage row is saved with the step's writes."""
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(
            load_settings(), model=scripted(call_tools(("quick", {})), "Done."), tools=[quick], storage=storage
        )
        session = runtime.session(user_id="u1")
        await session.run("go")
        async with storage.database.admin_transaction() as connection:
            usage = (
                await connection.execute(
                    text("SELECT xmin::text FROM request_usage WHERE session_id = :session AND kind = 'model'"),
                    {"session": session.session_id},
                )
            ).scalars().all()
            replies = await writes_holding(connection, session.session_id, "AIMessage")

    assert len(usage) == len(set(usage)) == 2, "two model calls, each kept once, apart"
    assert set(usage) <= set(replies), "each commits in the transaction of its step's writes"


async def test_a_calls_end_whose_task_never_saved_its_writes_is_written_when_the_run_ends(
    scripted, database_url: str, tmp_path: Path, monkeypatch
):
    """The call ended but its task's writes were cut off: the log still says how, once the run ends."""
    import asyncio

    put_writes = PooledPostgresSaver._put_writes

    async def cut_off(self: PooledPostgresSaver, statement: str, rows: list, riders: list) -> None:
        if riders:  # the call's task
            raise asyncio.CancelledError
        await put_writes(self, statement, rows, riders)

    monkeypatch.setattr(PooledPostgresSaver, "_put_writes", cut_off)
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(
            load_settings(), model=scripted(call_tools(("quick", {})), "Done."), tools=[quick], storage=storage
        )
        session = runtime.session(user_id="u1")
        await session.run("go")  # LangGraph goes on without the writes it could not save
        status, outcome = await _request_of(storage, session.session_id)

    assert (status, outcome) == ("closed", "completed")


async def test_a_calls_end_is_its_own_transaction_when_the_graph_saves_elsewhere(
    scripted, database_url: str, tmp_path: Path
):
    """A graph given another checkpointer: no write of the storage's would ever take the end along."""
    async with storage_for(database_url, tmp_path) as storage:
        runtime = Orchestrator.create(
            load_settings(),
            model=scripted(call_tools(("quick", {})), "Done."),
            tools=[quick],
            storage=storage,
            checkpointer=InMemorySaver(),
        )
        session = runtime.session(user_id="u1")
        await session.run("go")
        status, outcome = await _request_of(storage, session.session_id)

    assert (status, outcome) == ("closed", "completed")


async def _request_of(storage: Storage, session_id: str) -> tuple[str, str]:
    """The status and outcome of the session's one request, as the owner reads them."""
    async with storage.database.admin_transaction() as connection:
        query = text("SELECT status, outcome FROM requests WHERE session_id = :session")
        status, outcome = (await connection.execute(query, {"session": session_id})).one()
    return status, outcome


async def test_statements_riding_along_commit_with_the_writes_or_are_written_alone(
    database_url: str, tmp_path: Path
):
    """A rider whose statement fails is written on its own at once; one whose task never writes, at the run's end."""
    from orchestrator.store.checkpoints import Rider

    async with storage_for(database_url, tmp_path) as storage:
        saver = storage.checkpointer
        assert isinstance(saver, PooledPostgresSaver)
        alone: list[str] = []

        def rider(name: str, sql: str, thread: str = "t1") -> Rider:
            async def write_alone() -> None:
                alone.append(name)

            return Rider(thread, ((sql, ()),), write_alone)

        config: RunnableConfig = {"configurable": {"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": "c1"}}
        saver.ride_along("task-ok", rider("ok", "SELECT 1"))
        saver.ride_along("task-bad", rider("bad", "SELECT 1 / 0"))
        saver.ride_along("task-never", rider("never", "SELECT 1"))
        saver.ride_along("task-other", rider("other", "SELECT 1", thread="t2"))
        await saver.aput_writes(config, [("messages", "ok")], "task-ok")
        await saver.aput_writes(config, [("messages", "bad")], "task-bad")  # its writes are kept all the same
        failed_alone = list(alone)
        await saver.drop_off("t1")
        async with storage.database.admin_transaction() as connection:
            query = text("SELECT task_id FROM checkpoint_writes WHERE thread_id = 't1' ORDER BY 1")
            written = (await connection.execute(query)).scalars().all()

    assert written == ["task-bad", "task-ok"]
    assert failed_alone == ["bad"], "the failed one at once, before the writes go again"
    assert alone == ["bad", "never"], "then, at the run's end, the one whose task never wrote; not t2's"
