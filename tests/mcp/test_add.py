"""`orchestrator mcp add NAME -- COMMAND ARGS` and `--url URL`: an MCP server's folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.folders.discovery import discover_tree
from orchestrator.folders.tool_config import load_tool_config
from tests.helpers import run_cli

ASKED_AT_CHAT = "`orchestrator chat` asks you to approve it at its next start"


def config_of(home: Path, name: str) -> dict[str, object]:
    return yaml.safe_load((home / "sub_graphs" / name / "tool_config.yaml").read_text())


def test_a_stdio_server_is_a_folder_with_its_command_arguments_and_variable_names(tmp_path: Path):
    done = run_cli(
        "mcp", "add", "time_server", "--env", "TZ_KEY=MY_TIME_KEY",
        "--", "mcp-server-time", "--local-timezone", "UTC",
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"created sub_graphs/time_server; {ASKED_AT_CHAT}"
    assert config_of(tmp_path, "time_server") == {
        "name": "time_server",
        "description": "MCP server: mcp-server-time --local-timezone UTC",
        "version": "1",
        "mcp": {
            "command": "mcp-server-time",
            "args": ["--local-timezone", "UTC"],
            "env": {"TZ_KEY": "MY_TIME_KEY"},
        },
    }
    folder = tmp_path / "sub_graphs" / "time_server"
    config = load_tool_config(folder / "tool_config.yaml")
    assert config.mcp is not None and config.mcp.transport == "stdio"
    assert [p.name for p in folder.iterdir()] == ["tool_config.yaml"]  # no Python to approve
    tree = discover_tree(tmp_path / "sub_graphs")
    assert (tree.problems, [node.folder.name for node in tree.nodes]) == ([], ["time_server"])


def test_an_http_server_is_a_folder_with_its_url_and_header_variable_names(tmp_path: Path):
    done = run_cli(
        "mcp", "add", "search", "--url", "https://mcp.example.com/mcp",
        "--header", "Authorization=SEARCH_AUTH", "--description", "Searches the web.",
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    assert config_of(tmp_path, "search") == {
        "name": "search",
        "description": "Searches the web.",
        "version": "1",
        "mcp": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "SEARCH_AUTH"}},
    }
    config = load_tool_config(tmp_path / "sub_graphs" / "search" / "tool_config.yaml")
    assert config.mcp is not None and config.mcp.transport == "streamable_http"


def test_a_folder_that_exists_is_left_as_it_is(tmp_path: Path):
    existing = tmp_path / "sub_graphs" / "taken"
    existing.mkdir(parents=True)
    (existing / "tool_config.yaml").write_text("name: taken\n")

    done = run_cli("mcp", "add", "taken", "--", "some-server", cwd=tmp_path)

    assert done.returncode == 1
    assert done.stderr.strip() == "error: sub_graphs/taken already exists"
    assert (existing / "tool_config.yaml").read_text() == "name: taken\n"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["Time-Server", "--", "x"],
            "error: 'Time-Server' is not a valid tool name: lowercase letters, digits and _, "
            "starting with a letter, at most 40 characters",
        ),
        (
            ["both", "--url", "http://127.0.0.1:8000/mcp", "--", "x"],
            "error: give the server's command after `--` (stdio) or --url URL "
            "(streamable HTTP), not both",
        ),
        (
            ["neither"],
            "error: give the server's command after `--` (stdio) or --url URL "
            "(streamable HTTP), not both",
        ),
        (
            ["pair", "--env", "NO_EQUALS", "--", "x"],
            "error: --env 'NO_EQUALS': expected NAME=ENVNAME",
        ),
        (
            ["mixed", "--header", "Authorization=AUTH", "--", "x"],
            "error: not written: mcp: Value error, `headers` are for a `url`, not a `command`",
        ),
        (
            ["value", "--env", "KEY=not a name", "--", "x"],
            "error: not written: mcp.env: Value error, KEY: 'not a name' is not an environment "
            "variable name",
        ),
    ],
)
def test_what_cannot_be_a_server_folder_is_one_line_and_writes_nothing(
    tmp_path: Path, args: list[str], error: str
):
    done = run_cli("mcp", "add", *args, cwd=tmp_path)

    assert done.returncode == 1
    assert done.stderr.strip() == error
    assert not (tmp_path / "sub_graphs").exists() or not any((tmp_path / "sub_graphs").iterdir())


def test_relative_paths_are_from_where_the_command_is_given(tmp_path: Path):
    done = run_cli(
        "mcp", "add", "files", "--read", "notes", "--write", "~/out", "--read", "${REPO}",
        "--", "./node_modules/.bin/mcp-server-filesystem", "notes",
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    written = config_of(tmp_path, "files")
    assert written["mcp"] == {
        "command": str(tmp_path / "node_modules" / ".bin" / "mcp-server-filesystem"),
        "args": ["notes"],  # the server's own: it reads them from its folder
    }
    assert written["sandbox"] == {"read": [str(tmp_path / "notes"), "${REPO}"], "write": ["~/out"]}
