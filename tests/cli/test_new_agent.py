"""`orchestrator new-agent NAME --kind tool|agent`: the folders the templates write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli.scaffold import create_agent_folder
from orchestrator.errors import UserError
from orchestrator.folders.tool_config import load_tool_config
from orchestrator.tools.agent import AgentTool
from tests.helpers import run_cli


def files_in(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_an_agent_folder_is_yaml_and_a_place_for_its_tools(tmp_path: Path):
    folder = create_agent_folder("trip_planner", directory=tmp_path, kind="agent")

    assert files_in(folder) == ["README.md", "src/sub_graphs/README.md", "tool_config.yaml"]
    assert not list(folder.rglob("*.py")), "a YAML-only agent has no Python"
    drop_here = (folder / "src/sub_graphs/README.md").read_text()
    assert "Drop this agent's tool folders here" in drop_here
    assert "trip_planner_ask" in (folder / "README.md").read_text()


def test_the_agent_config_loads_as_an_agent_with_instructions(tmp_path: Path):
    folder = create_agent_folder("trip_planner", directory=tmp_path, kind="agent")

    config = load_tool_config(folder / "tool_config.yaml")

    assert (config.kind, config.name, config.version) == ("agent", "trip_planner", "0.1.0")
    assert config.entry_optional, "no entry point: the loader needs no Python file"
    assert config.instructions is not None
    agent = AgentTool(name=config.name, description=config.description)
    prompt = agent.system_prompt(config.instructions)
    assert prompt.startswith(
        "You are trip_planner, an agent that handles trip planner requests with its own tools. "
    )
    assert "{" not in prompt, "the placeholders are filled in"


def test_the_default_kind_is_a_tool_with_its_test(tmp_path: Path):
    folder = create_agent_folder("weather_bot", directory=tmp_path)

    assert files_in(folder) == [
        "README.md",
        "tests/pytest.ini",
        "tests/test_weather_bot.py",
        "tool_config.yaml",
        "weather_bot_tool.py",
    ]
    assert load_tool_config(folder / "tool_config.yaml").kind == "tool"
    # The template shows the short form: the parameter model comes from the annotation.
    code = (folder / "weather_bot_tool.py").read_text()
    assert "    @action\n    async def greet(self, params: Greet," in code


@pytest.mark.parametrize("kind", ["tool", "agent"])
def test_an_existing_folder_or_a_bad_name_is_refused(tmp_path: Path, kind: str):
    create_agent_folder("taken", directory=tmp_path, kind=kind)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="already exists"):
        create_agent_folder("taken", directory=tmp_path, kind=kind)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not a valid tool name"):
        create_agent_folder("Bad-Name", directory=tmp_path, kind=kind)  # type: ignore[arg-type]


def test_new_agent_kind_agent_from_the_command_line(cli, tmp_path: Path):
    created = cli("new-agent", "trip_planner", "--kind", "agent", cwd=tmp_path)

    assert created.returncode == 0, created.stderr
    folder = tmp_path / "sub_graphs" / "trip_planner"
    assert created.stdout.strip() == (
        "created sub_graphs/trip_planner; put its tool folders in "
        "sub_graphs/trip_planner/src/sub_graphs/"
    )
    assert load_tool_config(folder / "tool_config.yaml").kind == "agent"
    listing = json.loads(cli("tools", "list", "--json", cwd=tmp_path).stdout)
    assert [(t["name"], t["status"]) for t in listing["tools"]] == [("trip_planner", "new")]

    unknown = cli("new-agent", "x", "--kind", "robot", cwd=tmp_path)
    assert unknown.returncode != 0 and not (tmp_path / "sub_graphs" / "x").exists()



def test_the_agent_templates_default_description_reads_well(tmp_path: Path):
    folder = create_agent_folder("trip_planner", directory=tmp_path, kind="agent")
    config = load_tool_config(folder / "tool_config.yaml")

    prompt = AgentTool(name=config.name, description=config.description).system_prompt(
        config.instructions
    )

    # What the model above reads to choose the agent, and the agent's own first sentence.
    assert config.description == "Handles trip planner requests with its own tools."
    assert prompt.split(". ")[0] == (
        "You are trip_planner, an agent that handles trip planner requests with its own tools"
    )
    assert "replace" not in config.description and ".." not in prompt


def test_new_agent_in_a_parent_puts_the_folder_under_that_agent(tmp_path: Path):
    run_cli("new-agent", "trip", "--kind", "agent", cwd=tmp_path)

    by_name = run_cli("new-agent", "flights", "--in", "trip", cwd=tmp_path)
    by_path = run_cli("new-agent", "hotels", "--in", "sub_graphs/trip", "--kind", "agent", cwd=tmp_path)
    nowhere = run_cli("new-agent", "cars", "--in", "no_such_agent", cwd=tmp_path)

    children = tmp_path / "sub_graphs" / "trip" / "src" / "sub_graphs"
    assert by_name.returncode == 0, by_name.stderr
    assert by_name.stdout.startswith("created sub_graphs/trip/src/sub_graphs/flights; ")
    assert (children / "flights" / "flights_tool.py").is_file()
    assert by_path.returncode == 0, by_path.stderr
    assert load_tool_config(children / "hotels" / "tool_config.yaml").kind == "agent"
    listing = json.loads(run_cli("tools", "list", "--json", cwd=tmp_path).stdout)
    assert sorted(t["key"] for t in listing["tools"]) == [
        "trip", "trip/src/sub_graphs/flights", "trip/src/sub_graphs/hotels"
    ]
    assert nowhere.returncode == 1
    assert nowhere.stderr.startswith("error: --in 'no_such_agent': no tool folder there")
    assert not list(tmp_path.rglob("cars"))


def test_the_tool_templates_default_description_reads_well(tmp_path: Path):
    folder = create_agent_folder("weather_bot", directory=tmp_path)

    description = load_tool_config(folder / "tool_config.yaml").description

    # What the model reads to choose the tool: a sentence saying what it does, which is true.
    assert description == "Greets someone by name (an example to replace with what weather bot does)."
