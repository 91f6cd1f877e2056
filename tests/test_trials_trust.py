"""Issue 27, folder trust: what is used is what was approved, and what is approved is shown.

Each test drives the defect the trials found deterministically (a writer is
simulated by a hook at the exact point between two reads, never by a race).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.errors import McpServerError
from orchestrator.settings import Settings, load_settings
from orchestrator.tools import discovery
from orchestrator.tools.approval import ApprovalStore, Status, review_folders
from orchestrator.tools.discovery import ToolFolder, discover
from orchestrator.tools.mcp.config import McpServerConfig
from orchestrator.tools.mcp.definitions import ServerDefinition
from orchestrator.tools.mcp.server import McpServer
from orchestrator.tools.mcp.thread import McpThread
from tests.tool_folders import write_folder

FIXTURE = Path(__file__).parent / "mcp_servers" / "fixture_server.py"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(sub_graphs_dir=tmp_path / "sub_graphs", data_dir=tmp_path / "data")


def nobody(folder: ToolFolder, status: Status) -> bool | None:
    raise AssertionError(f"{folder.name} was asked about ({status}), but it is approved")


def approve_as_is(settings: Settings, name: str) -> ToolFolder:
    store = ApprovalStore.of(settings)
    [folder] = [n.folder for n in discover(settings.sub_graphs_dir).nodes if n.folder.name == name]
    store.decide(folder, approved=True)
    return folder


# --- item 2: tool_config.yaml is parsed from the bytes that were hashed ------------------------


def config_text(*, sensitive: bool) -> str:
    config = {"name": "mail", "description": "Mail.", "version": "1", "requires_approval": sensitive}
    return yaml.safe_dump(config)


def test_a_config_flipped_between_two_reads_is_never_used_with_the_other_ones_approval(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
):
    folder = write_folder(settings.sub_graphs_dir, "mail", config=config_text(sensitive=True))
    approve_as_is(settings, "mail")
    config = folder / "tool_config.yaml"
    config.write_text(config_text(sensitive=False))  # the writer's version, never approved
    hashing = discovery.snapshot

    def flip_back_then_hash(path: Path, **options: object) -> object:
        # The writer puts the approved text back just before the folder is hashed.
        config.write_text(config_text(sensitive=True))
        return hashing(path, **options)

    monkeypatch.setattr(discovery, "snapshot", flip_back_then_hash)

    reviewed = review_folders(settings, nobody)

    [node] = reviewed.tree.nodes
    assert node.folder.key in reviewed.approved
    assert node.folder.config.requires_approval, "the approved bytes say every call is asked"


def fixture_config(control: Path) -> McpServerConfig:
    control.mkdir(exist_ok=True)
    return McpServerConfig(command=sys.executable, args=[str(FIXTURE), "--control", str(control)])


async def test_an_mcp_launch_other_than_the_pinned_one_starts_no_process(tmp_path: Path):
    approved = fixture_config(tmp_path / "approved")
    pinned = ServerDefinition(launch=approved.launch())
    thread = McpThread()
    server = McpServer(
        name="acct",
        config=fixture_config(tmp_path / "other"),
        folder=tmp_path,
        thread=thread,
        errlog=tmp_path / "acct.log",
    )
    server.pinned = pinned
    try:
        with pytest.raises(McpServerError, match="not the one approved"):
            await server.start()
    finally:
        await server.close()
        thread.stop()
    assert not (tmp_path / "other" / "pids").exists(), "no server process was started"
