"""The `sandbox:` section, its resolution to paths and ports, and what a kernel cannot enforce.

No process here: what the kernel does with the rules is in `test_sandboxed_servers`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator import SandboxUnavailableError
from orchestrator.errors import ConfigError, McpServerError, ToolConfigError
from orchestrator.folders.approvals import ApprovalStore, Status
from orchestrator.folders.discovery import ToolFolder, discover_tree
from orchestrator.folders.isolation import in_process
from orchestrator.folders.sandbox_config import (
    data_directory,
    installation,
    policy,
    private_environment,
)
from orchestrator.folders.tool_config import ToolConfig, parse_tool_config
from orchestrator.sandbox import landlock
from orchestrator.sandbox.rules import Policy, unenforced
from orchestrator.settings import load_settings
from orchestrator.sources.mcp.sandboxed import DENIAL_NOTE, ServerSandbox, denial_note
from orchestrator.terminal.folder_reach import describe_folder, sandbox_lines

TIME = {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}


def config(**fields: object):
    whole = {"name": "srv", "description": "A server.", "version": "1", **fields}
    return parse_tool_config(yaml.safe_dump(whole).encode())


def folder_of(section: ToolConfig) -> ToolFolder:
    """A folder (not shipped, with no folders of its own) of that configuration."""
    return ToolFolder(path=Path("/nonexistent/srv"), key="srv", config=section, digest="0")


def test_the_section_is_checked_and_defaults_hold_an_mcp_stdio_server_and_a_python_folder():
    server = config(mcp=TIME)
    python = config()
    remote = config(mcp={"url": "http://127.0.0.1:9/mcp"})
    unconfined = config(mcp=TIME, sandbox={"isolation": "inline"})

    assert in_process(folder_of(server)) and in_process(folder_of(python))
    assert not in_process(folder_of(remote)) and not in_process(folder_of(unconfined))
    assert (server.sandbox.connect, server.sandbox.memory_mb, server.sandbox.cpu_seconds) == (
        [],
        4096,
        None,
    )
    for wrong in ({"connect": [70000]}, {"reads": ["/x"]}, {"isolation": "vm"}, {"memory_mb": 1}):
        with pytest.raises(ToolConfigError, match="sandbox"):
            config(mcp=TIME, sandbox=wrong)
    assert in_process(folder_of(config(sandbox={"isolation": "process"})))
    assert not in_process(folder_of(config(sandbox={"isolation": "inline"})))  # a choice
    with pytest.raises(ToolConfigError, match="an agent runs inline"):
        config(kind="agent", sandbox={"isolation": "process"})


def test_paths_take_home_variables_from_the_folders_config_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("SANDBOX_TEST_CACHE", "/var/cache/x")
    section = config(
        mcp=TIME,
        config={"repo": "/srv/repo"},
        sandbox={"read": ["~/notes", "${repo}/docs", "data"], "write": ["${SANDBOX_TEST_CACHE}"]},
    )
    folder, data = tmp_path / "srv", tmp_path / "data" / "sandbox" / "srv"

    rules = policy(section.sandbox, folder=folder, data=data, command=None, settings=section.config)

    assert {str(Path("~/notes").expanduser()), "/srv/repo/docs", str(folder / "data")} <= set(
        rules.read
    )
    assert str(folder) in rules.read and "/usr" in rules.read and sys.prefix in rules.read
    assert rules.write[-2:] == [str(data), "/var/cache/x"]
    assert rules.connect == [] and rules.memory_mb == 4096
    unset = config(mcp=TIME, sandbox={"read": ["${SANDBOX_TEST_NOWHERE}"]})
    with pytest.raises(ConfigError, match=r"\$\{SANDBOX_TEST_NOWHERE\} is set neither"):
        policy(unset.sandbox, folder=folder, data=data, command=None, settings={})


def test_the_commands_installation_and_its_interpreter_are_readable(tmp_path: Path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    script = venv / "bin" / "some-server"
    script.write_text(f"#!{sys.executable}\nprint('hi')\n")

    found = installation(str(script))

    assert str(venv) in found
    assert str(Path(os.path.realpath(sys.executable)).parent.parent) in found


def test_what_the_kernel_cannot_enforce_is_named_by_abi():
    rules = Policy(read=[], write=[], connect=[443])

    assert unenforced(rules, abi=7) == []
    assert unenforced(rules, abi=4) == []
    assert [rule.split(":")[0] for rule in unenforced(rules, abi=3)] == [
        "TCP connections (to any port)"
    ]
    assert len(unenforced(rules, abi=1)) == 3
    none = unenforced(rules, abi=0)
    assert [rule.split(" (")[0] for rule in none] == ["file access", "TCP connections"]
    assert all("Landlock is not available" in rule for rule in none)


def test_this_kernel_offers_landlock():
    abi = landlock.abi_version()

    if abi == 0:
        pytest.skip("no Landlock on this machine")
    assert landlock.fs_rights(abi) & landlock.READ == landlock.READ


def test_the_approval_question_shows_what_it_may_touch_and_what_will_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    sub_graphs = tmp_path / "sub_graphs"
    folder = sub_graphs / "srv"
    folder.mkdir(parents=True)
    section = {"read": ["~/code"], "write": ["${repo}"], "connect": [443], "cpu_seconds": 60}
    whole = {"name": "srv", "description": "d", "version": "1", "mcp": TIME, "sandbox": section}
    (folder / "tool_config.yaml").write_text(yaml.safe_dump(whole))
    [node] = discover_tree(sub_graphs).nodes

    holding = describe_folder(node.folder)
    monkeypatch.setattr(landlock, "abi_version", lambda: 3)
    older = describe_folder(node.folder)

    assert "sandbox: reads the system, its folder, its program, ~/code" in holding
    assert "writes its own data directory, ${repo}" in holding
    assert "connects to TCP ports: 443" in holding and "60 s of CPU" in holding
    assert "not enforced" not in holding
    assert (
        "[red]not enforced on this machine: TCP connections (to any port): Landlock ABI 3 < 4"
        in older
    )
    unconfined = config(mcp=TIME, sandbox={"isolation": "inline"})
    assert "sandbox: none (isolation: inline)" in sandbox_lines(folder_of(unconfined))[0]
    assert sandbox_lines(folder_of(config()))[0] == (
        "  sandbox: reads the system, its folder, its program"  # a Python folder: held
    )


def test_a_changed_sandbox_section_is_a_changed_folder(tmp_path: Path):
    sub_graphs = tmp_path / "sub_graphs"
    folder = sub_graphs / "srv"
    folder.mkdir(parents=True)
    whole = {"name": "srv", "description": "d", "version": "1", "mcp": TIME}
    (folder / "tool_config.yaml").write_text(yaml.safe_dump(whole))
    settings = load_settings(sub_graphs_dir=sub_graphs)
    store = ApprovalStore.of(settings)
    [node] = discover_tree(sub_graphs).nodes
    store.decide(node.folder, approved=True)

    (folder / "tool_config.yaml").write_text(
        yaml.safe_dump({**whole, "sandbox": {"write": ["/home"]}})
    )
    [changed] = discover_tree(sub_graphs).nodes

    assert store.status(node.folder) == Status.APPROVED
    assert store.status(changed.folder) == Status.CHANGED


def test_a_required_sandbox_the_kernel_cannot_hold_refuses_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    section = config(mcp=TIME, sandbox={"connect": [443]}).sandbox
    data = data_directory(tmp_path / "data", "srv")
    monkeypatch.setattr(landlock, "abi_version", lambda: 3)

    ServerSandbox(config=section, data=data).check(name="srv", command="true", folder=tmp_path)
    with pytest.raises(SandboxUnavailableError) as refused:
        ServerSandbox(config=section, data=data, require=True).check(
            name="srv", command="true", folder=tmp_path
        )

    assert isinstance(refused.value, McpServerError) and not refused.value.recoverable
    assert "\n" not in str(refused.value)
    assert "ORCHESTRATOR_REQUIRE_SANDBOX" in str(refused.value) and "TCP connections" in str(
        refused.value
    )


def test_the_private_directory_and_denials_read_in_results(tmp_path: Path):
    data = data_directory(tmp_path, "agent/sub_graphs/srv")

    assert data == tmp_path / "sandbox" / "agent__sub_graphs__srv"
    assert private_environment(data)["HOME"] == str(data / "home")
    assert denial_note("Error: [Errno 13] Permission denied: '/etc/shadow'") == DENIAL_NOTE
    assert denial_note("it is sunny") is None


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    assert load_settings().require_sandbox is False
    monkeypatch.setenv("ORCHESTRATOR_REQUIRE_SANDBOX", "1")
    assert load_settings().require_sandbox is True
