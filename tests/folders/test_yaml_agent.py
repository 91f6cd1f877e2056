"""A YAML-only agent: `kind: agent` and `instructions:` in tool_config.yaml, no Python at all."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import yaml
from langchain_core.messages import SystemMessage

from orchestrator.folders.approvals import ApprovalStore, Status
from orchestrator.folders.discovery import discover_tree
from orchestrator.runtime import Orchestrator
from orchestrator.settings import Settings, load_settings
from orchestrator.testing import ScriptedChatModel, call_tools
from orchestrator.tools import AgentTool
from tests.helpers import run_cli
from tests.tool_folders import AGENT_TOOL, ECHO_TOOL, write_folder

INSTRUCTIONS = "You are {name}: {description}. Repeat what you are asked to with your echo tool.\nKeep {braces} as they are."


def yaml_agent(root: Path, directory: str = "parrot", **fields: object) -> Path:
    """A folder holding only its tool_config.yaml (and, below it, its own tools)."""
    folder = root / directory
    folder.mkdir(parents=True)
    config = {
        "name": directory.rsplit("/", 1)[-1],
        "description": "Repeats things.",
        "version": "1.0",
        "kind": "agent",
        "instructions": INSTRUCTIONS,
        **fields,
    }
    (folder / "tool_config.yaml").write_text(yaml.safe_dump(config))
    return folder


def settings_for(tmp_path: Path) -> Settings:
    return load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")


def approve_all(folder: object, status: object) -> bool:
    return True


async def test_a_yaml_only_agent_answers_through_its_sub_tools(tmp_path: Path, scripted):
    root = tmp_path / "sub_graphs"
    parrot = yaml_agent(root)
    write_folder(root, "parrot/src/sub_graphs/echo")
    model = scripted(
        call_tools(("parrot_ask", {"request": "say hello twice"})),
        call_tools(("echo_say", {"text": "hello", "times": 2})),  # the parrot's own turn
        "It said: hello hello",
        "The parrot says hello hello.",
    )
    runtime = Orchestrator.create(settings_for(tmp_path), model=model, ask=approve_all)

    result = await runtime.session(user_id="u").run("make the parrot say hello twice")

    assert result.answer == "The parrot says hello hello."
    assert sorted(p.name for p in parrot.iterdir()) == ["src", "tool_config.yaml"], "no Python of its own"
    [loaded] = runtime.sub_agents
    assert type(loaded.tool) is AgentTool
    assert [t.name for t in loaded.tool.tools] == ["echo_say"]
    system, request = model.received[1][:2]
    assert isinstance(system, SystemMessage)
    assert system.text == (
        "You are parrot: repeats things. Repeat what you are asked to with your echo tool.\n"
        "Keep {braces} as they are."
    )
    assert request.text == "say hello twice"
    echoed = json.loads(model.received[2][-1].text)
    assert echoed["message"] == "hello hello"
    parrot_reply = json.loads(model.received[3][-1].text)
    assert parrot_reply["message"] == "It said: hello hello"
    assert parrot_reply["data"] == {"tool_calls": ["echo_say"]}


def test_a_yaml_only_agent_is_approved_for_its_config(tmp_path: Path):
    root = tmp_path / "sub_graphs"
    parrot = yaml_agent(root)
    settings = settings_for(tmp_path)
    store = ApprovalStore.of(settings)
    [node] = discover_tree(root).nodes
    store.decide(node.folder, approved=True)

    (parrot / "tool_config.yaml").write_text(
        (parrot / "tool_config.yaml").read_text().replace("Repeat what", "Forget what")
    )

    [changed] = discover_tree(root).nodes
    assert store.status(node.folder) == Status.APPROVED
    assert store.status(changed.folder) == Status.CHANGED, "new instructions are asked about again"


async def test_a_kind_agent_folder_with_an_entry_point_uses_its_class_and_the_config_instructions(
    tmp_path: Path, scripted
):
    root = tmp_path / "sub_graphs"
    code = AGENT_TOOL.format(name="Parrot") + "    instructions = 'the class prompt'\n"
    write_folder(
        root,
        "parrot",
        config={"name": "parrot", "description": "Repeats.", "version": "1", "kind": "agent", "instructions": "From {name}."},
        code=code,
    )
    write_folder(root, "mynah", config={"name": "mynah", "description": "Mimics.", "version": "1", "kind": "agent"}, code=code.replace("Parrot", "Mynah"))
    model = scripted(
        call_tools(("parrot_ask", {"request": "x"})), "parrot ok",
        call_tools(("mynah_ask", {"request": "y"})), "mynah ok",
        "done",
    )
    runtime = Orchestrator.create(settings_for(tmp_path), model=model, ask=approve_all)

    await runtime.session(user_id="u").run("go")

    assert {type(loaded.tool).__name__ for loaded in runtime.sub_agents} == {"Parrot", "Mynah"}
    assert model.received[1][0].text == "From parrot."
    assert model.received[3][0].text == "the class prompt"


def test_folders_that_misuse_kind_or_instructions_are_skipped_with_one_line(tmp_path: Path, caplog):
    root = tmp_path / "sub_graphs"
    base = {"description": "D.", "version": "1"}
    write_folder(root, "not_an_agent", config={"name": "not_an_agent", "kind": "agent", **base}, code=ECHO_TOOL)
    write_folder(root, "told", config={"name": "told", "instructions": "Be nice.", **base}, code=ECHO_TOOL)
    yaml_agent(root, "lost", entry_point="lost_agent.py")
    yaml_agent(root, "fine")

    with caplog.at_level(logging.WARNING):
        runtime = Orchestrator.create(settings_for(tmp_path), model=ScriptedChatModel(), ask=approve_all)

    assert [loaded.folder.name for loaded in runtime.sub_agents] == ["fine"]
    reasons = {
        Path(r.args[0]).name: r.args[1] for r in caplog.records if r.msg == "skipping tool folder %s: %s"
    }
    assert reasons == {
        "not_an_agent": "kind: agent, but Echo is not an AgentTool subclass",
        "told": "instructions are for agents, and Echo is not an AgentTool subclass",
        "lost": "entry point lost_agent.py not found",
    }


def test_tools_show_describes_a_yaml_only_agent(tmp_path: Path):
    yaml_agent(tmp_path / "sub_graphs")

    done = run_cli("tools", "show", "parrot", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "kind: agent (no Python: tool_config.yaml only)" in done.stdout
    assert "status: new" in done.stdout
    assert "instructions (from tool_config.yaml):\n    You are parrot: repeats things." in done.stdout
    assert "parrot_ask: Hand this agent a request in plain words" in done.stdout, "no code to run, so shown"
