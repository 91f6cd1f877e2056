"""`orchestrator tools show` and `tools list` on an MCP server folder: never starting the server.

What is shown of its tools comes from the definition pinned in the approval
store (written here with `pins.decide`, as a start would after the person's
answer); the server's command would leave a marker if anything ran it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from orchestrator.folders.approvals import ApprovalStore
from orchestrator.folders.sensitivity import WHY_SERVER
from orchestrator.folders.tool_config import load_tool_config
from orchestrator.settings import load_settings
from orchestrator.sources.mcp.definitions import ServerDefinition, ToolDefinition
from orchestrator.sources.mcp.pins import decide
from tests.helpers import run_cli
from tests.tool_folders import write_folder

FIXED_VALUE = "fixed-zone-secret-7"
ENV_VALUE = "env-secret-value-8"
HEADER_VALUE = "Bearer header-secret-9"
SECRETS = (FIXED_VALUE, ENV_VALUE, HEADER_VALUE, "pw-in-url")
TOOLS = {
    "get_time": ToolDefinition(
        name="get_time",
        description="Get the current time.\nIn the zone given, as ISO 8601.",
        inputSchema={
            "type": "object",
            "properties": {
                "timezone": {"type": "string", "description": "An IANA zone name."},
                "format": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["timezone"],
        },
    ),
    "wipe": ToolDefinition(
        name="wipe",
        description="Forget every saved zone.",
        inputSchema={"type": "object", "properties": {}},
        annotations={"destructiveHint": True},
    ),
}


def clock_folder(home: Path, marker: Path) -> Path:
    """An MCP folder `clock` whose server, if anything started it, would write `marker`."""
    folder = home / "sub_graphs" / "clock"
    folder.mkdir(parents=True)
    config = {
        "name": "clock",
        "description": "The clock server.",
        "version": "1",
        "timeout_seconds": 12,
        "parameters": {"timezone": {"value": FIXED_VALUE}},
        "mcp": {
            "command": sys.executable,
            "args": ["-c", f"open({str(marker)!r}, 'w')"],
            "env": {"ZONE_KEY": "CLOCK_ZONE_KEY"},
            "cwd": "work",
        },
    }
    (folder / "tool_config.yaml").write_text(yaml.safe_dump(config))
    return folder


def pin(home: Path, folder: Path, *, approved: bool, launch: dict[str, object] | None = None) -> str:
    """Record the person's answer about the clock server's tools; its digest."""
    server = load_tool_config(folder / "tool_config.yaml").mcp
    assert server is not None
    definition = ServerDefinition(
        launch=launch if launch is not None else server.launch(),
        server_info={"name": "clock", "version": "0.1"},
        tools=TOOLS,
    )
    settings = load_settings(sub_graphs_dir=home / "sub_graphs", data_dir=home / "data")
    decide(ApprovalStore.of(settings), "clock", name="clock", definition=definition, approved=approved)
    return definition.digest


def show(home: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    done = run_cli("tools", "show", "clock", *flags, cwd=home, env=env)
    assert done.returncode == 0, done.stderr
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr
    return done.stdout


def test_an_mcp_folder_is_shown_as_a_server_before_and_after_its_tools_are_pinned(tmp_path: Path):
    marker = tmp_path / "server-started"
    folder = clock_folder(tmp_path, marker)

    new = show(tmp_path)
    assert run_cli("tools", "approve", "clock", cwd=tmp_path).returncode == 0
    approved_folder = show(tmp_path)
    digest = pin(tmp_path, folder, approved=True)
    pinned = show(tmp_path)

    assert "  kind: MCP server over stdio\n" in new
    assert f"    runs: {sys.executable} -c " in new
    assert "    in: sub_graphs/clock/work\n" in new, "relative to the working directory"
    assert "no Python" not in new and "clock_ask" not in new
    assert "model" not in new and "instructions" not in new and "database" not in new
    assert "  limits (of the calls made at its level, below it):\n" in new
    assert "  calls of it: timeout 12 s (its tool_config.yaml)" in new
    assert "  status: new\n" in new
    assert (
        "  tool definitions: not decided yet: asked at the next start once the folder is approved"
        in new
    )
    assert "  actions: not known yet (the server is not started here)" in new
    assert "  tool definitions: not decided yet: asked at the next start\n" in approved_folder
    assert f"  tool definitions: approved (pinned digest {digest[:12]}…)\n" in pinned
    assert "    clock_get_time: Get the current time.\n" in pinned
    assert "In the zone given" not in pinned, "the first line of the description only"
    assert "      timezone: string, required, set by tool_config.yaml\n" in pinned
    assert "      format: string | null, optional, set by the model\n" in pinned
    assert "    clock_wipe: Forget every saved zone.\n" in pinned
    assert not marker.exists(), "the server was started"


def test_a_destructive_tool_needs_a_decision_and_only_it(tmp_path: Path):
    folder = clock_folder(tmp_path, tmp_path / "server-started")
    pin(tmp_path, folder, approved=True)

    report = json.loads(show(tmp_path, "--json"))
    text = show(tmp_path)

    needs = {action["name"]: action["needs_decision"] for action in report["actions"]}
    assert needs == {"clock_get_time": None, "clock_wipe": WHY_SERVER}
    assert f"    clock_wipe: Forget every saved zone.\n      needs your decision: {WHY_SERVER}" in text


def test_an_environment_variable_is_named_set_or_not_and_its_value_never_shown(tmp_path: Path):
    folder = clock_folder(tmp_path, tmp_path / "server-started")
    pin(tmp_path, folder, approved=True)

    unset = show(tmp_path)
    given = show(tmp_path, env={"CLOCK_ZONE_KEY": ENV_VALUE})
    given_json = json.loads(show(tmp_path, "--json", env={"CLOCK_ZONE_KEY": ENV_VALUE}))

    assert "    env ZONE_KEY: from CLOCK_ZONE_KEY (not set)\n" in unset
    assert "    env ZONE_KEY: from CLOCK_ZONE_KEY (set)\n" in given
    assert given_json["mcp"]["env"] == [{"name": "ZONE_KEY", "variable": "CLOCK_ZONE_KEY", "set": True}]


def test_json_carries_the_server_its_pin_and_its_tools(tmp_path: Path):
    marker = tmp_path / "server-started"
    folder = clock_folder(tmp_path, marker)
    digest = pin(tmp_path, folder, approved=True)

    report = json.loads(show(tmp_path, "--json"))

    assert report["kind"] == "mcp" and report["agent"] is False
    assert report["model"] is None and report["instructions"] is None and report["database"] is None
    assert report["calls"]["timeout_seconds"] == 12
    server = report["mcp"]
    assert server["transport"] == "stdio" and server["command"] == sys.executable
    assert server["args"][0] == "-c" and server["url"] is None and server["headers"] == []
    assert server["cwd"] == str(folder / "work")
    assert server["definitions"] == {
        "status": "approved",
        "digest": digest,
        "launch_changed": False,
        "server_info": {"name": "clock", "version": "0.1"},
    }
    get_time = next(a for a in report["actions"] if a["name"] == "clock_get_time")
    assert get_time["tool"] == "get_time"
    assert [(p["name"], p["type"], p["required"], p["set_by"]) for p in get_time["parameters"]] == [
        ("timezone", "string", True, "tool_config.yaml"),
        ("format", "string | null", False, "the model"),
    ]
    assert get_time["parameters"][0]["description"] == "An IANA zone name."
    assert not marker.exists()


def test_a_denied_or_outdated_pin_is_said_so(tmp_path: Path):
    folder = clock_folder(tmp_path, tmp_path / "server-started")

    pin(tmp_path, folder, approved=False)
    denied = show(tmp_path)
    pin(tmp_path, folder, approved=True, launch={"command": "an-older-clock"})
    outdated = show(tmp_path)

    assert "  tool definitions: denied\n" in denied
    assert "  actions: none offered: the server's tool definitions were denied" in denied
    assert "how it is launched changed since: asked again at the next start" in outdated
    assert "clock_get_time" in outdated, "the approved tools, until the next start asks again"


def test_an_http_server_names_its_header_variables_and_hides_a_password_in_its_url(tmp_path: Path):
    folder = tmp_path / "sub_graphs" / "remote"
    folder.mkdir(parents=True)
    config = {
        "name": "remote",
        "description": "A remote server.",
        "version": "1",
        "mcp": {"url": "http://me:pw-in-url@127.0.0.1:9/mcp", "headers": {"Authorization": "REMOTE_AUTH"}},
    }
    (folder / "tool_config.yaml").write_text(yaml.safe_dump(config))

    done = run_cli("tools", "show", "remote", cwd=tmp_path, env={"REMOTE_AUTH": HEADER_VALUE})
    report = json.loads(run_cli("tools", "show", "remote", "--json", cwd=tmp_path).stdout)

    assert done.returncode == 0, done.stderr
    assert "  kind: MCP server over streamable HTTP\n" in done.stdout
    assert "    connects to: http://me:***@127.0.0.1:9/mcp\n" in done.stdout
    assert "    header Authorization: from REMOTE_AUTH (set)\n" in done.stdout
    assert HEADER_VALUE not in done.stdout and "pw-in-url" not in done.stdout
    assert report["mcp"]["headers"] == [{"name": "Authorization", "variable": "REMOTE_AUTH", "set": False}]
    assert report["mcp"]["command"] is None and report["mcp"]["cwd"] is None


def test_tools_list_marks_an_mcp_folder(tmp_path: Path):
    clock_folder(tmp_path, tmp_path / "server-started")
    write_folder(tmp_path / "sub_graphs", "echo")

    done = run_cli("tools", "list", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert lines["clock"].endswith("(MCP server)")
    assert "MCP" not in lines["echo"]
