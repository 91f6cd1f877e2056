"""OpenTelemetry traces of a turn through the tree, exported over OTLP to 127.0.0.1 (issue 34)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace.export import SpanExportResult

from orchestrator.redact import remember
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer, ScriptedChatModel, call_tools
from orchestrator.tracing import provider
from tests.otlp_receiver import Receiver
from tests.tool_folders import parrot_agent

SECRET = "sk-trace-secret-4242"


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """An OTLP receiver, and the process's tracing pointed at it (a provider of its own)."""
    with Receiver() as running:
        provider.shutdown()
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", running.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "orchestrator-test")
        yield running
        provider.shutdown()


def usage(text: str) -> dict[str, object]:
    """A scripted reply with the usage a server would report."""
    from langchain_core.messages import AIMessage

    return AIMessage(text, usage_metadata={"input_tokens": 11, "output_tokens": 3, "total_tokens": 14})


def step(messages):
    """The orchestrator asks the parrot, the parrot calls its echo, both answer."""
    if "You are parrot" in messages[0].text:
        if isinstance(messages[-1], ToolMessage):
            return usage("Repeated.")
        return call_tools(("echo_say", {"text": f"the key is {SECRET}"}))
    if isinstance(messages[-1], ToolMessage):
        return usage("The parrot repeated it.")
    return call_tools(("parrot_ask", {"request": "repeat the key"}))


async def nested_turn(tmp_path: Path) -> None:
    root = tmp_path / "sub_graphs"
    parrot_agent(root)
    settings = load_settings(sub_graphs_dir=root, data_dir=tmp_path / "data")
    runtime = Orchestrator.create(
        settings, model=ScriptedChatModel(steps=[step] * 6), checkpointer=InMemorySaver(),
        ask=lambda *_: True,
    )
    result = await runtime.session(user_id="ann", session_id="traced").run("have the parrot repeat")
    assert result.answer == "The parrot repeated it."
    provider.flush()


async def test_a_nested_turn_is_one_trace_with_the_agents_calls_below_their_caller(
    receiver: Receiver, tmp_path: Path
):
    await nested_turn(tmp_path)

    assert len({span.trace_id for span in receiver.spans}) == 1, "one trace for the turn"
    (turn,) = receiver.named("turn")
    assert turn.attributes["orchestrator.session_id"] == "traced"
    assert turn.attributes["enduser.id"] == "ann"
    (ask,) = receiver.named("execute_tool parrot_ask")
    (echo,) = receiver.named("execute_tool echo_say")
    assert ask in receiver.ancestors(echo), "the nested call is a descendant of its caller"
    (agent,) = receiver.named("invoke_agent parrot")
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "parrot"
    assert ask in receiver.ancestors(agent) and agent in receiver.ancestors(echo)
    assert turn in receiver.ancestors(ask)
    assert echo.attributes["orchestrator.parent_request_id"] == ask.attributes["orchestrator.request_id"]
    assert echo.attributes["gen_ai.tool.name"] == "echo_say"
    assert echo.attributes["orchestrator.status"] == "success"
    models = receiver.named("chat ")
    assert len(models) == 4, "two model calls at each level"
    for model in models:
        assert model.attributes["gen_ai.operation.name"] == "chat"
        assert model.attributes["gen_ai.request.model"]
    answered = [m for m in models if "gen_ai.usage.input_tokens" in m.attributes]
    assert answered and all(m.attributes["gen_ai.usage.input_tokens"] == 11 for m in answered)
    parrot_models = [m for m in models if agent in receiver.ancestors(m)]
    assert len(parrot_models) == 2, "the parrot's model calls are below the agent's run"
    repeated = {"orchestrator.session_id", "enduser.id"}
    assert not any(repeated & set(s.attributes) for s in [*models, ask, echo, agent]), (
        "the session and user are on the turn's span only"
    )
    assert not any(
        key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arguments"))
        for span in receiver.spans for key in span.attributes
    ), "no content by default"


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "whole"])
async def test_a_model_span_carries_the_providers_response_id_not_langchains(
    receiver: Receiver, tmp_path: Path, streaming: bool
):
    """(langchain-openai drops a streamed reply's id: `llm.response_ids` keeps it.)"""
    with OpenAICompatibleServer(["Hello."]) as server:
        settings = load_settings(
            openai_base_url=server.base_url,
            openai_api_key="test",
            model="openai:test-model",
            model_max_retries=0,
            model_streaming=streaming,
            sub_graphs_dir=tmp_path / "sub_graphs",
            data_dir=tmp_path / "data",
        )
        result = await Orchestrator.create(settings, checkpointer=InMemorySaver()).session(
            user_id="ann"
        ).run("hi")
    assert result.answer == "Hello."
    provider.flush()

    (chat,) = receiver.named("chat test-model")
    assert chat.attributes["gen_ai.response.id"] == "chatcmpl-test", "the server's id"
    assert chat.attributes["server.address"] == "127.0.0.1"


async def test_a_reply_without_a_providers_id_has_no_response_id(receiver: Receiver, tmp_path: Path):
    """A scripted model gives no id: LangChain's own (`lc_run-...`) is no provider's."""
    await nested_turn(tmp_path)

    models = receiver.named("chat ")
    assert models and not any("gen_ai.response.id" in m.attributes for m in models)


async def test_content_is_recorded_only_when_asked_and_then_redacted(
    receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    remember(SECRET)
    monkeypatch.setenv("ORCHESTRATOR_TRACE_CONTENT", "1")

    await nested_turn(tmp_path)

    (echo,) = receiver.named("execute_tool echo_say")
    arguments = str(echo.attributes["gen_ai.tool.call.arguments"])
    assert "the key is [redacted]" in arguments and SECRET not in arguments
    assert all(SECRET not in str(v) for span in receiver.spans for v in span.attributes.values())
    assert any("gen_ai.input.messages" in span.attributes for span in receiver.named("chat "))


@pytest.mark.process
def test_without_an_endpoint_no_exporter_loads_and_no_span_is_made(tmp_path: Path):
    """(langsmith, which LangChain imports, loads OpenTelemetry's SDK classes itself when the
    package is installed: what must not load is the tracing this product sets up.)"""
    script = """
import asyncio, sys
from langgraph.checkpoint.memory import InMemorySaver
from orchestrator.runtime import Orchestrator
from orchestrator.settings import load_settings
from orchestrator.testing import OpenAICompatibleServer, ScriptedChatModel, call_tools

async def main():
    model = ScriptedChatModel(steps=[call_tools(("calculator", {"expression": "2+2"})), "4"])
    runtime = Orchestrator.create(load_settings(), model=model, checkpointer=InMemorySaver())
    print((await runtime.session(user_id="u").run("2+2?")).answer)

asyncio.run(main())
from orchestrator.tracing import provider
loaded = [m for m in sys.modules if m.startswith(("opentelemetry.exporter", "opentelemetry.sdk.trace.export"))]
print(sorted(loaded), provider._provider, provider._tracer)
"""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ORCHESTRATOR_HOME": str(tmp_path)}
    import os

    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["4", "[] None None"]


LANGSMITH_TURN = """
import asyncio, sys
from pathlib import Path
from langchain_core.tracers.langchain import wait_for_all_tracers
from tests.tracing.test_traces import nested_turn

asyncio.run(nested_turn(Path(sys.argv[1])))
wait_for_all_tracers()
"""


@pytest.mark.process  # LangSmith reads its variables once a process: a process of its own
def test_langsmith_runs_reach_its_endpoint_with_the_session_and_request_ids(tmp_path: Path):
    import os

    with Receiver() as langsmith:
        env = {
            **os.environ,
            "HOME": str(tmp_path),
            "ORCHESTRATOR_HOME": str(tmp_path),
            "LANGSMITH_TRACING": "true",
            "LANGSMITH_ENDPOINT": langsmith.url,
            "LANGSMITH_API_KEY": "ls-test-key",
            "LANGSMITH_PROJECT": "orchestrator-tests",
        }
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        done = subprocess.run(
            [sys.executable, "-c", LANGSMITH_TURN, str(tmp_path)],
            capture_output=True, text=True, env=env, timeout=120, cwd=Path(__file__).parents[2],
        )
    assert done.returncode == 0, done.stderr

    posted = b"".join(body for path, body in langsmith.bodies if "/runs" in path)
    assert posted, [path for path, _ in langsmith.bodies]
    assert b'"session_id":"traced"' in posted.replace(b" ", b"") and b"ann" in posted
    assert b"request_id" in posted, "the parrot's runs carry the call that asked it"


async def test_a_plans_tasks_are_spans_of_their_own_with_their_calls_below(receiver: Receiver):
    from langchain_core.tools import tool

    from orchestrator.plans import PLAN_TOOL

    @tool
    async def step(name: str) -> str:
        """Do one named step."""
        return f"{name} ok"

    tasks = [
        {"id": t, "description": f"do {t}", "tool": "step", "arguments": {"name": t}, "depends_on": []}
        for t in ("t1", "t2")
    ]
    model = ScriptedChatModel(steps=[call_tools((PLAN_TOOL, {"goal": "two steps", "tasks": tasks})), "Both done."])
    runtime = Orchestrator.create(load_settings(), model=model, tools=[step], checkpointer=InMemorySaver())
    result = await runtime.session(user_id="ann").run("do two steps")
    provider.flush()

    assert result.answer == "Both done."
    plan_tasks = receiver.named("plan_task ")
    assert sorted(span.name for span in plan_tasks) == ["plan_task t1", "plan_task t2"]
    for task_span in plan_tasks:
        (call,) = [s for s in receiver.named("execute_tool step") if task_span in receiver.ancestors(s)]
        assert call.attributes["orchestrator.status"] == "success"
    assert {span.trace_id for span in receiver.spans} == {plan_tasks[0].trace_id}, "one trace"


async def test_a_background_job_carries_the_span_of_the_call_that_handed_it_over(
    receiver: Receiver, scripted, tmp_path: Path, database_url: str, database
):
    from dataclasses import replace

    from orchestrator.jobs.queue import JobQueue
    from orchestrator.jobs.runner import JobRunner
    from orchestrator.tracing.spans import linked
    from tests.jobs.test_handover import open_runtime

    model = scripted(call_tools(("brewer_brew", {})), "Brewing.")
    runtime, storage, _, _ = await open_runtime(tmp_path, database_url, model)
    runner = JobRunner(runtime, takes_jobs=False)  # the job waits in the queue
    try:
        session = replace(runtime, jobs=runner).session(user_id="traced-jobs")
        result = await session.run("make coffee")
        queue = JobQueue(database)
        await queue.open()
        job = await queue.job_of(result.tool_calls[0].request_id)
        await queue.close()
    finally:
        await runner.close()
        await storage.close()
    provider.flush()

    (handing_over,) = receiver.named("execute_tool brewer_brew")
    assert job is not None and job.args.trace is not None
    assert job.args.trace.split("-")[1:3] == [handing_over.trace_id, handing_over.span_id]
    (link,) = linked(job.args.trace)
    assert format(link.span_id, "016x") == handing_over.span_id, "the job's span links to it"


CANARY = "bob's balance is 250 (canary-7731)"


async def failing_turn(*, model_fails: bool) -> None:
    from langchain_core.tools import tool

    from orchestrator.errors import ToolError

    @tool
    async def balance(owner: str) -> str:
        """Read an owner's balance."""
        raise ToolError(CANARY, code="refused", recoverable=False)

    def fail(messages):
        raise RuntimeError(CANARY)

    steps = [fail] if model_fails else [call_tools(("balance", {"owner": "bob"})), "Refused."]
    runtime = Orchestrator.create(
        load_settings(), model=ScriptedChatModel(steps=steps), tools=[balance],
        checkpointer=InMemorySaver(),
    )
    try:
        await runtime.session(user_id="ann").run("bob's balance?")
    except RuntimeError:
        assert model_fails
    provider.flush()


@pytest.mark.parametrize("model_fails", [False, True], ids=["tool fails", "model raises"])
async def test_a_failures_message_leaves_only_with_content_on(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch, model_fails: bool
):
    await failing_turn(model_fails=model_fails)
    failed = [span for span in receiver.spans if span.status]
    monkeypatch.setenv("ORCHESTRATOR_TRACE_CONTENT", "1")
    receiver.spans.clear()
    await failing_turn(model_fails=model_fails)
    told = [span for span in receiver.spans if span.status]

    assert failed, "the failure is marked"
    for span in failed:
        assert span.status in ("refused", "RuntimeError"), span.status
        assert span.attributes["error.type"] == span.status
        assert CANARY not in str(span.events) and CANARY not in str(span.attributes)
    assert any(CANARY in span.status for span in told), "with content on, the message too"
    if not model_fails:
        (call,) = [span for span in failed if span.name == "execute_tool balance"]
        assert call.attributes["orchestrator.status"] == "failure"


class StuckExporter:
    """An exporter whose collector never answers (a minute at most, so a test cannot hang)."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.done = threading.Event()

    def export(self, spans: object) -> SpanExportResult:
        self.answer.wait(60)
        self.done.set()
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        pass  # a request in flight is not called back


def test_the_exit_waits_for_a_collector_no_longer_than_its_setting(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    stuck = StuckExporter()
    provider.shutdown()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9/stuck")
    monkeypatch.setattr(provider, "_exporter", lambda: stuck)
    monkeypatch.setattr(provider, "_exit_timeout", 0.01)
    tracer = provider.tracer()
    assert tracer is not None
    tracer.start_span("waiting").end()

    provider.shutdown()
    returned_while_held = not stuck.done.is_set()
    stuck.answer.set()

    assert returned_while_held, "the exit does not wait for the collector past its setting"
    assert caplog.messages == ["traces could not be sent to http://127.0.0.1:9/stuck"]


EXIT_WITH_A_COLLECTOR_DOWN = """
import asyncio
from langgraph.checkpoint.memory import InMemorySaver
from orchestrator.cli.common import settings_or_exit
from orchestrator.runtime import Orchestrator
from orchestrator.testing import OpenAICompatibleServer, ScriptedChatModel, call_tools

async def main():
    settings = settings_or_exit()
    model = ScriptedChatModel(steps=[call_tools(("calculator", {"expression": "2+2"})), "4"])
    runtime = Orchestrator.create(settings, model=model, checkpointer=InMemorySaver())
    print((await runtime.session(user_id="u").run("2+2?")).answer)

asyncio.run(main())
"""


@pytest.mark.process  # what a process says as it exits
def test_a_collector_that_is_down_is_one_line_at_exit(tmp_path: Path):
    import os

    with socket.socket() as closed:  # a port on 127.0.0.1 that nothing listens on
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "ORCHESTRATOR_HOME": str(tmp_path),
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "3600",  # the SDK alone would retry for a minute
    }
    done = subprocess.run(
        [sys.executable, "-c", EXIT_WITH_A_COLLECTOR_DOWN],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["4"]
    assert done.stderr.splitlines() == [f"note: traces could not be sent to {endpoint}"]


@pytest.mark.process  # the whole exit of a real process: the SDK's threads, the interpreter's end
def test_a_collector_that_never_answers_holds_the_exit_no_longer_than_its_setting(tmp_path: Path):
    import os

    with socket.socket() as silent:  # takes connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = {
            **os.environ,
            "HOME": str(tmp_path),
            "ORCHESTRATOR_HOME": str(tmp_path),
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_TIMEOUT": "3600",  # the SDK alone would wait an hour
            "ORCHESTRATOR_TRACE_EXIT_TIMEOUT_SECONDS": "0.5",
        }
        done = subprocess.run(  # the timeout fails the test rather than hang it
            [sys.executable, "-c", EXIT_WITH_A_COLLECTOR_DOWN],
            capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
        )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["4"]
    assert done.stderr.splitlines() == [f"note: traces could not be sent to {endpoint}"]
