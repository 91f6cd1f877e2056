"""A level's settings from a URL (`remote_config:`): remote, else the cached copy, else the file.

A real HTTP server on 127.0.0.1 serves the document; it changes, goes away and comes back.
"""

from __future__ import annotations

import io
import json
import socket
import stat
from pathlib import Path

import pytest
import yaml
from langchain_core.messages import SystemMessage
from rich.console import Console

from orchestrator.errors import RemoteConfigError, ToolConfigError
from orchestrator.folders.approvals import ApprovalStore, Status, discover_approved_first
from orchestrator.folders.discovery import ToolFolder
from orchestrator.folders.remote_config import Source
from orchestrator.folders.remote_fetch import FETCH_TIMEOUT_SECONDS, fetch_document
from orchestrator.folders.tool_config import parse_tool_config
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.terminal.prompt_history import FolderHistory
from orchestrator.terminal.tty_questions import ApprovalPrompt
from orchestrator.testing import ScriptedChatModel, call_tools
from tests.helpers import run_cli
from tests.remote_config_server import ConfigServer, free_port
from tests.tool_folders import write_folder

LOCAL_INSTRUCTIONS = "You are {name}, from the local file."


def settings_for(tmp_path: Path) -> Settings:
    return load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")


def remote_agent(root: Path, url: str, *, refresh_seconds: int = 0, **fields: object) -> Path:
    """A YAML-only agent `parrot` over an echo tool, its settings also at `url` (its own model
    unless `fields` says otherwise)."""
    config: dict[str, object] = {
        "name": "parrot",
        "description": "Repeats things.",
        "version": "1.0",
        "kind": "agent",
        "instructions": LOCAL_INSTRUCTIONS,
        "llm": {"inherit": "local", "model": "openai:local-model"},
        "limits": {"max_iterations": 3},
        "remote_config": {"url": url, "refresh_seconds": refresh_seconds},
        **fields,
    }
    (root / "parrot").mkdir(parents=True)
    (root / "parrot" / "tool_config.yaml").write_text(yaml.safe_dump(config))
    write_folder(root, "parrot/src/sub_graphs/echo")
    return root / "parrot"


def parrot(settings: Settings) -> ToolFolder:
    store = ApprovalStore.of(settings)
    [node] = discover_approved_first(settings, store).nodes
    return node.folder


class Answers:
    """Yes to every question, each kept as (name, status)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Status]] = []

    def __call__(self, folder: ToolFolder, status: Status) -> bool:
        self.asked.append((folder.name, status))
        return True


async def test_a_level_runs_on_the_remote_settings(tmp_path: Path, scripted):
    remote = {"instructions": "You are {name}, told remotely."}
    with ConfigServer(remote) as server:
        remote_agent(tmp_path / "sub_graphs", server.url, llm={})
        model = scripted(
            call_tools(("parrot_ask", {"request": "say hi"})), "parrot done", "all done"
        )
        runtime = Orchestrator.create(settings_for(tmp_path), model=model, ask=Answers())

        await runtime.session(user_id="u").run("ask the parrot")

    system = model.received[1][0]
    assert isinstance(system, SystemMessage) and system.text == "You are parrot, told remotely."


def test_remote_then_cached_copy_then_the_new_remote_values(tmp_path: Path):
    settings = settings_for(tmp_path)
    first = {"llm": {"model": "openai:remote-model"}, "limits": {"max_iterations": 7}}
    with ConfigServer(first) as server:
        remote_agent(tmp_path / "sub_graphs", server.url)
        live = parrot(settings)
    assert live.config.llm.model == "openai:remote-model"
    assert live.config.limits.max_iterations == 7
    assert live.config.instructions == LOCAL_INSTRUCTIONS, "what the document leaves out: the file's"
    assert live.remote is not None and live.remote.source == Source.REMOTE
    assert live.remote.line("parrot") == f"parrot: configuration from {server.url} (remote)"
    assert stat.S_IMODE((tmp_path / "data" / "remote_config").stat().st_mode) == 0o700

    gone = parrot(settings)  # the server is gone: its last copy is used, and said so
    assert gone.config.llm.model == "openai:remote-model"
    assert gone.remote is not None and gone.remote.source == Source.CACHED
    line = gone.remote.line("parrot")
    assert line.startswith(f"parrot: configuration from {server.url} (cached copy from ")
    assert ", remote unreachable: ConnectError" in line

    with ConfigServer({"llm": {"model": "openai:newer-model"}}, port=server.port):
        back = parrot(settings)
    assert back.config.llm.model == "openai:newer-model"
    assert back.config.limits.max_iterations == 3, "the new copy no longer sets it: the file's"
    assert back.remote is not None and back.remote.source == Source.REMOTE


def test_a_remote_change_of_config_values_is_a_new_content_for_cached_results(tmp_path: Path):
    settings = settings_for(tmp_path)
    with ConfigServer({"config": {"units": "metric"}}) as server:
        remote_agent(tmp_path / "sub_graphs", server.url)
        metric = parrot(settings)
    with ConfigServer({"config": {"units": "imperial"}}, port=server.port):
        imperial = parrot(settings)
    with ConfigServer({"config": {"units": "imperial"}}, port=server.port):
        again = parrot(settings)

    assert metric.digest == imperial.digest, "the files are the same"
    # What `dispatch.result_cache` keys results by: a result made under metric is not reused.
    assert metric.content != imperial.content == again.content


def test_with_no_cached_copy_the_local_file_is_in_force_and_said(tmp_path: Path):
    url = f"http://127.0.0.1:{free_port()}/config"
    remote_agent(tmp_path / "sub_graphs", url)

    folder = parrot(settings_for(tmp_path))

    assert folder.config.llm.model == "openai:local-model"
    assert folder.remote is not None and folder.remote.source == Source.LOCAL
    assert folder.remote.line("parrot").startswith(
        f"parrot: configuration from {url} (local file, remote unreachable and no cached copy: "
    )


@pytest.mark.parametrize(
    ("document", "status", "why"),
    [
        ("llm: [unclosed\n", 200, "invalid YAML"),
        ({"requires_approval": "perhaps"}, 200, "requires_approval: Input should be a valid boolean"),
        ({"name": "other"}, 200, "the document sets name, which only the folder's file may set"),
        ({"unknown_field": 1}, 200, "unknown_field: Extra inputs are not permitted"),
        ("- a list\n", 200, "expected a mapping of fields"),
        ({"llm": {"model": "openai:x"}}, 500, "HTTP 500"),
        ("instructions: " + "x" * (1024 * 1024) + "\n", 200, "larger than 1,048,576 bytes"),
    ],
    ids=["yaml", "invalid", "name", "unknown", "list", "http-500", "too-large"],
)
def test_an_unusable_document_is_treated_as_unreachable(tmp_path: Path, document, status, why):
    settings = settings_for(tmp_path)
    with ConfigServer({"llm": {"model": "openai:remote-model"}}) as server:
        remote_agent(tmp_path / "sub_graphs", server.url)
        assert parrot(settings).config.llm.model == "openai:remote-model"
        server.document = document if isinstance(document, str) else yaml.safe_dump(document)
        server.status = status

        folder = parrot(settings)

    assert folder.config.llm.model == "openai:remote-model", "the last good copy"
    assert folder.remote is not None and folder.remote.source == Source.CACHED
    assert why in (folder.remote.reason or "")


def test_a_copy_younger_than_refresh_seconds_is_used_without_fetching(tmp_path: Path):
    settings = settings_for(tmp_path)
    with ConfigServer({"llm": {"model": "openai:remote-model"}}) as server:
        remote_agent(tmp_path / "sub_graphs", server.url, refresh_seconds=3600)
        parrot(settings)
        server.document = yaml.safe_dump({"llm": {"model": "openai:changed-model"}})
        again = parrot(settings)
        assert server.requests == 1
    assert again.config.llm.model == "openai:remote-model"
    assert again.remote is not None and again.remote.source == Source.REMOTE
    assert "(remote, fetched " in again.remote.line("parrot")


def test_a_remote_change_to_what_approval_covers_asks_again_and_a_new_model_does_not(
    tmp_path: Path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the parrot's own model is built, never called
    settings = settings_for(tmp_path)
    with ConfigServer({"llm": {"model": "openai:remote-model"}}) as server:
        remote_agent(tmp_path / "sub_graphs", server.url)

        def start() -> tuple[list[tuple[str, Status]], Orchestrator]:
            answers = Answers()
            runtime = Orchestrator.create(settings, model=ScriptedChatModel(), ask=answers)
            return answers.asked, runtime

        assert start()[0] == [("parrot", Status.NEW), ("echo", Status.NEW)]

        server.document = yaml.safe_dump({"llm": {"model": "openai:other-model"}, "limits": {"max_iterations": 9}})
        asked, runtime = start()
        assert asked == [], "a new model and limits are not asked about"
        assert [loaded.folder.config.llm.model for loaded in runtime.sub_agents] == ["openai:other-model"]

        server.document = yaml.safe_dump({"requires_approval": True})
        assert start()[0] == [("parrot", Status.CHANGED)]
        assert start()[0] == [], "approved as it is now"

        endpoint = {"llm": {"base_url": "https://models.example.com/v1"}, "requires_approval": True}
        server.document = yaml.safe_dump(endpoint)
        assert start()[0] == [("parrot", Status.CHANGED)], "a new endpoint is asked about"

        server.document = yaml.safe_dump({**endpoint, "sandbox": {"connect": [443]}})
        assert start()[0] == [("parrot", Status.CHANGED)], "a new sandbox is asked about"

    assert start()[0] == [], "the server gone: the cached copy, as approved"


def test_the_question_shows_what_the_remote_copy_sets_and_what_it_was(tmp_path: Path):
    settings = settings_for(tmp_path)
    with ConfigServer({"requires_approval": False}) as server:
        remote_agent(
            tmp_path / "sub_graphs", server.url, sandbox={"write": ["${workdir}"]}, config={"workdir": "/tmp"}
        )
        ApprovalStore.of(settings).decide(parrot(settings), approved=True)
        server.document = yaml.safe_dump({"requires_approval": True, "config": {"workdir": "/s3cret"}})
        changed = parrot(settings)

    shows = io.StringIO()
    screen = Console(file=shows, width=300)
    prompt = ApprovalPrompt(
        err=screen, stdin=io.StringIO("n\n"), history=FolderHistory.of(settings)
    )
    assert prompt(changed, ApprovalStore.of(settings).status(changed)) is False

    said = shows.getvalue()
    assert "Changed since you decided on it" in said
    assert f"configuration from {server.url} (remote)" in said
    assert "the remote copy sets requires_approval: true" in said
    assert "the remote copy's requires_approval was false when you decided" in said
    assert 'the remote copy sets config: ["workdir"]' in said, "the value the sandbox names is covered"
    assert "s3cret" not in said, "config: values are never shown"


def test_unanswered_a_remote_change_holds_the_folder_with_one_line(tmp_path: Path, capsys):
    from orchestrator.cli.startup import prepare_unattended

    settings = settings_for(tmp_path)
    with ConfigServer({"llm": {"model": "openai:remote-model"}}) as server:
        remote_agent(tmp_path / "sub_graphs", server.url)
        store = ApprovalStore.of(settings)
        store.decide(parrot(settings), approved=True)

        prepare_unattended(settings, None, model_at_first_use=True)
        assert f"parrot: configuration from {server.url} (remote)" in capsys.readouterr().err

        server.document = yaml.safe_dump({"requires_approval": True})
        held = prepare_unattended(settings, None, model_at_first_use=True)
        said = " ".join(capsys.readouterr().err.split())
        assert run_cli("tools", "approve", "parrot", cwd=tmp_path).returncode == 0
        approved = prepare_unattended(settings, None, model_at_first_use=True)

    assert "parrot" not in held.reviewed.approved
    assert (
        f"note: parrot is held: its remote configuration ({server.url}) changed what your "
        "approval covers; `orchestrator tools approve parrot` approves it as it is now"
    ) in said
    assert "parrot" in approved.reviewed.approved


def test_tools_show_says_which_copy_is_in_force(tmp_path: Path):
    with ConfigServer({"llm": {"model": "openai:remote-model"}, "requires_approval": True}) as server:
        remote_agent(tmp_path / "sub_graphs", server.url)
        text = run_cli("tools", "show", "parrot", cwd=tmp_path)
        shown = json.loads(run_cli("tools", "show", "parrot", "--json", cwd=tmp_path).stdout)

    assert text.returncode == 0, text.stderr
    assert f"  configuration from {server.url} (remote)" in text.stdout
    assert shown["remote_config"]["source"] == "remote"
    assert shown["remote_config"]["url"] == server.url
    assert shown["remote_config"]["reason"] is None
    assert shown["remote_config"]["approval_covers"] == ["requires_approval"]
    assert shown["model"]["model"] == "openai:remote-model"


def test_the_url_is_https_but_to_this_machine():
    base = "name: t\ndescription: d\nversion: '1'\nremote_config: {url: %s}\n"
    for url in ("https://config.example.com/t.yaml", "http://127.0.0.1:8000/t", "http://localhost/t"):
        ref = parse_tool_config((base % url).encode()).remote_config
        assert ref is not None and ref.refresh_seconds == 300, "the documented default"
    for url in ("http://config.example.com/t.yaml", "ftp://127.0.0.1/t", "not a url"):
        with pytest.raises(ToolConfigError, match="must be an https:// URL"):
            parse_tool_config((base % url).encode())


def test_a_redirect_is_followed_on_its_host_only():
    with ConfigServer("llm: {model: openai:x}\n") as target, ConfigServer("") as server:
        server.redirect = f"http://127.0.0.1:{target.port}/config"
        assert fetch_document(server.url) == b"llm: {model: openai:x}\n"
        server.redirect = f"http://localhost:{target.port}/config"
        with pytest.raises(RemoteConfigError, match="redirected to another host"):
            fetch_document(server.url)


def test_a_server_that_does_not_answer_is_unreachable():
    assert FETCH_TIMEOUT_SECONDS == 10, "as docs/folders.md says"
    with socket.socket() as silent:  # connections are taken (the backlog), never answered
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/config"
        with pytest.raises(RemoteConfigError, match=r"^no answer in 0.2 s$"):
            fetch_document(url, timeout=0.2)


async def test_a_worker_reads_the_folder_file_alone(tmp_path: Path, database):
    from orchestrator.jobs.trust import record_local_decisions, reviewed_by_database

    settings = settings_for(tmp_path)
    with ConfigServer({"llm": {"model": "openai:remote-model"}, "requires_approval": True}) as server:
        remote_agent(tmp_path / "sub_graphs", server.url)
        ApprovalStore.of(settings).decide(parrot(settings), approved=True)
        await record_local_decisions(database, settings)
        reviewed = await reviewed_by_database(database, settings)
        fetched = server.requests

    [node] = reviewed.tree.nodes
    assert node.folder.remote is None and node.folder.config.llm.model == "openai:local-model"
    assert not node.folder.config.requires_approval
    assert "parrot" in reviewed.approved, "the database approves the folder's files"
    assert fetched == 1, "only the approval fetched it"
