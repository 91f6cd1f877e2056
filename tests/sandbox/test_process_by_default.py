"""Every Python tool folder not shipped with the orchestrator runs in a held process by default.

Real processes under real Landlock (skipped where the kernel has no ABI 4):
a third-party folder that declares nothing reads nothing of yours, one that
declares a path reads it; `isolation: inline` is said in red at approval; the
shipped folders run inline, as shipped, and say what they use.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.cli.tool_show_sandbox import sandbox_lines as show_lines
from orchestrator.cli.tool_show_sandbox import sandbox_report
from orchestrator.folders.discovery import ToolFolder, discover_tree, walk
from orchestrator.folders.isolation import isolation_of
from orchestrator.sandbox import landlock
from orchestrator.settings import load_settings
from orchestrator.terminal.folder_reach import describe_folder
from tests.helpers import run_cli
from tests.mcp.test_folders import Person, call, names, started, warnings_about
from tests.sandbox.test_process_isolation import HELD_TOOL
from tests.tool_folders import copy_shipped, write_folder

held = pytest.mark.skipif(landlock.abi_version() < 4, reason="needs Landlock ABI 4 or later")


def third_party(sub_graphs: Path, name: str, **fields: object) -> Path:
    """HELD_TOOL's folder under `name`, its config as given: no `sandbox:` unless given."""
    config = {"name": name, "description": "A folder from elsewhere.", "version": "1", **fields}
    code = HELD_TOOL.replace("Held", name.title())
    return write_folder(sub_graphs, name, config=config, code=code, isolation=None)


def folders(sub_graphs: Path) -> dict[str, ToolFolder]:
    return {node.folder.name: node.folder for node in walk(discover_tree(sub_graphs).nodes)}


def on_a_terminal(markup: str) -> str:
    """`markup` as rich prints it to a colour terminal (ANSI codes and all)."""
    buffer = io.StringIO()
    Console(file=buffer, force_terminal=True, color_system="standard", highlight=False).print(markup)
    return buffer.getvalue()


@held
@pytest.mark.process
async def test_a_third_party_folder_runs_held_and_reads_only_what_it_declares(tmp_path: Path):
    sub_graphs = tmp_path / "sub_graphs"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("declared")
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret")
    third_party(sub_graphs, "plain")  # no sandbox section at all
    third_party(sub_graphs, "reader", config={"notes": str(notes)}, sandbox={"read": ["${notes}"]})

    async with started(Person()) as runtime:
        where = await call(runtime, "plain_who", {})
        stolen = await call(runtime, "plain_read", {"path": str(secret)})
        declared = await call(runtime, "reader_read", {"path": str(notes / "todo.txt")})
        also_stolen = await call(runtime, "reader_read", {"path": str(secret)})

    assert where.status == "success" and where.data["pid"] != os.getpid()
    assert stolen.status == "failure" and "Permission denied" in stolen.message
    assert declared.status == "success" and declared.message == "declared"
    assert also_stolen.status == "failure" and "the user's secret" not in also_stolen.message


@held
@pytest.mark.process
async def test_inline_is_a_choice_that_runs_in_the_orchestrator(tmp_path: Path):
    sub_graphs = tmp_path / "sub_graphs"
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's secret")
    third_party(sub_graphs, "trusted", sandbox={"isolation": "inline"})

    async with started(Person()) as runtime:
        where = await call(runtime, "trusted_who", {})
        read = await call(runtime, "trusted_read", {"path": str(secret)})

    assert where.status == "success", where.message
    assert where.data["pid"] == os.getpid()
    assert read.message == "the user's secret"


@pytest.mark.process
async def test_a_folder_with_tables_of_its_own_is_not_started_held_and_says_how_to_run_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    import logging

    folder = third_party(tmp_path / "sub_graphs", "tables")
    (folder / "migrations").mkdir()
    (folder / "migrations" / "001_rows.sql").write_text("CREATE TABLE rows (id int);\n")

    with caplog.at_level(logging.WARNING):
        async with started(Person()) as runtime:
            offered = names(runtime)

    assert not any(name.startswith("tables_") for name in offered)
    [said] = warnings_about(caplog, "tables")
    assert "tables of its own" in said and "isolation: inline" in said


def test_inline_is_said_in_red_at_approval_and_in_tools_show(tmp_path: Path):
    sub_graphs = tmp_path / "sub_graphs"
    third_party(sub_graphs, "trusted", sandbox={"isolation": "inline", "connect": [443]})
    third_party(sub_graphs, "plain")
    found = folders(sub_graphs)

    asked = describe_folder(found["trusted"])
    shown = show_lines(sandbox_report(load_settings(data_dir=tmp_path / "data"), found["trusted"]))
    held_question = describe_folder(found["plain"])

    assert "[red]sandbox: none (isolation: inline): it runs with all you can reach[/red]" in asked
    assert "it says it uses: reads the system" in asked and "connects to TCP ports: 443" in asked
    assert "\x1b[31msandbox: none (isolation: inline)" in on_a_terminal(asked)
    assert shown[0].startswith("  [red]sandbox: none (isolation: inline)")
    assert "\x1b[31m" in on_a_terminal(shown[0])
    assert "sandbox: reads the system, its folder, its program" in held_question
    assert "isolation: inline" not in held_question


@held
@pytest.mark.process
def test_tools_show_lists_a_held_folders_actions_as_its_process_gives_them(tmp_path: Path):
    import json
    import sys

    third_party(tmp_path / "sub_graphs", "plain", sensitive_actions=["read"])
    approved = run_cli("tools", "approve", "plain", cwd=tmp_path)
    imported = set(sys.modules)
    shown = run_cli("tools", "show", "plain", "--json", cwd=tmp_path)
    imported_now = [m for m in set(sys.modules) - imported if m.startswith("orchestrator_sub_graphs")]

    assert approved.returncode == 0, approved.stderr
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    actions = {action["name"]: action for action in report["actions"]}
    assert {"plain_who", "plain_read", "plain_slow", "plain_crash"} <= set(actions)
    assert actions["plain_read"]["description"] == "Read a file."
    assert [(p["name"], p["type"], p["required"], p["set_by"]) for p in actions["plain_read"]["parameters"]] == [
        ("path", "string", True, "the model")
    ]
    assert actions["plain_read"]["needs_decision"] and not actions["plain_who"]["needs_decision"]
    assert report["actions_note"] is None
    assert imported_now == [], "its code ran only in its process"


@pytest.mark.process  # git ls-files, for the shipped files
def test_the_shipped_folders_run_inline_and_say_what_they_use_a_changed_copy_does_not(
    tmp_path: Path,
):
    sub_graphs = copy_shipped(tmp_path)
    shipped = folders(sub_graphs)

    kinds = {name: isolation_of(folder) for name, folder in shipped.items()}
    email = describe_folder(shipped["email_agent"])
    with (sub_graphs / "slack_agent" / "tool_config.yaml").open("a") as config:
        config.write("# changed\n")
    changed = folders(sub_graphs)["slack_agent"]

    agents = {"research_agent", "personal_assistant_agent"}
    assert {name: kind for name, kind in kinds.items() if name in agents} == dict.fromkeys(
        agents, "agent"
    )
    assert {kind for name, kind in kinds.items() if name not in agents} == {"shipped"}
    assert "sandbox: none: shipped with the orchestrator, it runs inside it" in email
    assert "connects to TCP ports: 25, 143, 443, 465, 587, 993" in email
    assert "[red]" not in email
    assert isolation_of(changed) == "process"
