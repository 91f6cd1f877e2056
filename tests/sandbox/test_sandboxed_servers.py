"""MCP stdio servers held by the kernel: real servers, real Landlock rules, real limits.

The probe server (`tests/mcp_servers/probe_server.py`, copied into its folder:
a folder's own files are readable) tries what its sandbox may deny, and says
so or fails with the OS's error. Listeners on 127.0.0.1 stand for services it
may or may not connect to.
"""

from __future__ import annotations

import logging
import shutil
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from sqlalchemy import select

from orchestrator.sandbox import landlock
from orchestrator.settings import load_settings
from orchestrator.sources.mcp.sandboxed import DENIAL_NOTE
from orchestrator.store import Database
from orchestrator.store.models import requests
from orchestrator.usage.meter import UsageMeter
from tests.helpers import logged_context
from tests.mcp.test_folders import (
    Person,
    call,
    git_repo,
    names,
    reference_servers,
    server_folder,
    started,
    warnings_about,
)

PROBE = Path(__file__).resolve().parents[1] / "mcp_servers" / "probe_server.py"

pytestmark = pytest.mark.skipif(landlock.abi_version() < 4, reason="needs Landlock ABI 4 or later")


def probe_folder(sub_graphs: Path, name: str = "probe", **sandbox: object) -> Path:
    """A folder running the probe server from inside it, with the `sandbox:` section given."""
    folder = server_folder(
        sub_graphs,
        name,
        {"command": sys.executable, "args": ["probe_server.py"]},
        **({"sandbox": sandbox} if sandbox else {}),
    )
    shutil.copy(PROBE, folder / "probe_server.py")
    return folder


@contextmanager
def listening() -> Iterator[int]:
    """A TCP port of 127.0.0.1 that accepts connections (the kernel's backlog: no thread)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@pytest.mark.process
async def test_a_server_is_denied_outside_its_folder_and_data_and_still_answers(
    tmp_path: Path, database: Database
):
    secret, shared = tmp_path / "secret.txt", tmp_path / "shared"
    secret.write_text("the user's secret")
    shared.mkdir()
    (shared / "notes.txt").write_text("declared")
    probe_folder(tmp_path / "sub_graphs", read=[str(shared)])
    context = replace(logged_context(database, "s-sandbox"), usage=UsageMeter())

    async with started(Person()) as runtime:
        stolen = await call(runtime, "probe_read", {"path": str(secret)}, context=context)
        planted = await call(
            runtime,
            "probe_write",
            {"path": str(tmp_path / "planted.txt"), "text": "x"},
            context=context,
        )
        declared = await call(runtime, "probe_read", {"path": str(shared / "notes.txt")})
        echoed = await call(runtime, "probe_echo", {"text": "still here"})
        own = await call(runtime, "probe_where", {})

    assert stolen.status == "failure" and "Permission denied" in stolen.message
    assert "the user's secret" not in stolen.message
    assert planted.status == "failure" and "Permission denied" in planted.message
    assert not (tmp_path / "planted.txt").exists()
    assert (declared.status, declared.message) == ("success", "declared")
    assert (echoed.status, echoed.message) == ("success", "still here")
    data = tmp_path / "data" / "sandbox" / "probe"
    assert own.status == "success", own.message
    assert own.data["home"] == str(data / "home") and own.data["tmp"] == str(data / "tmp")
    assert (data / "home" / "probe.txt").read_text() == "mine"
    async with database.user_transaction("u1") as connection:
        logged = (
            await connection.execute(
                select(requests.c.call_name, requests.c.error).where(
                    requests.c.session_id == "s-sandbox"
                )
            )
        ).all()
    assert sorted(name for name, _ in logged) == ["probe_read", "probe_write"]
    assert all(error["metadata"]["sandbox"] == DENIAL_NOTE for _, error in logged)


@pytest.mark.process
async def test_only_the_ports_in_connect_are_reached(tmp_path: Path):
    with listening() as allowed, listening() as other:
        probe_folder(tmp_path / "sub_graphs", connect=[allowed])
        async with started(Person()) as runtime:
            reached = await call(runtime, "probe_connect", {"port": allowed})
            refused = await call(runtime, "probe_connect", {"port": other})

    assert (reached.status, reached.message) == ("success", "connected")
    assert refused.status == "failure" and "Permission denied" in refused.message


@pytest.mark.process
async def test_a_memory_limit_stops_a_runaway_server_and_the_session_goes_on(tmp_path: Path):
    probe_folder(tmp_path / "sub_graphs", memory_mb=512)

    async with started(Person()) as runtime:
        runaway = await call(runtime, "probe_hog", {"megabytes": 4096})
        after = await call(runtime, "probe_echo", {"text": "after"})
        small = await call(runtime, "probe_hog", {"megabytes": 64})

    assert runaway.status == "failure"
    assert (after.status, after.message) == ("success", "after")
    assert (small.status, small.message) == ("success", "held 64 MB")


@pytest.mark.process
async def test_the_reference_servers_work_under_the_default_sandbox(tmp_path: Path):
    sub_graphs = tmp_path / "sub_graphs"
    repo = git_repo(tmp_path / "repo")
    reference_servers(sub_graphs, repo, access="write")
    (repo / "new.txt").write_text("new")

    async with started(Person()) as runtime:
        now = await call(runtime, "time_get_current_time", {"timezone": "Europe/Paris"})
        added = await call(runtime, "git_git_add", {"repo_path": str(repo), "files": ["new.txt"]})
        status = await call(runtime, "git_git_status", {"repo_path": str(repo)})
        homes = _server_homes()

    assert now.status == "success" and now.data["timezone"] == "Europe/Paris"
    assert added.status == "success", added.message
    assert status.status == "success" and "new file:   new.txt" in status.message
    data = tmp_path / "data" / "sandbox"
    assert sorted(homes) == [str(data / "git" / "home"), str(data / "time" / "home")]


def _server_homes() -> list[str]:
    """The HOME of each reference server running below this process."""
    homes = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any("mcp-server-" in part for part in child.cmdline()):
                homes.append(child.environ()["HOME"])
        except psutil.Error:
            continue
    return homes


@pytest.mark.process
async def test_a_required_sandbox_this_machine_cannot_hold_is_not_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    probe_folder(tmp_path / "sub_graphs")
    monkeypatch.setattr(landlock, "abi_version", lambda: 3)  # as a kernel without TCP rules
    settings = load_settings(require_sandbox=True)

    with caplog.at_level(logging.WARNING):
        async with started(Person(), settings) as runtime:
            offered = names(runtime)

    assert not any(name.startswith("probe_") for name in offered)
    [logged] = [m for m in warnings_about(caplog, "MCP server probe") if "not started" in m]
    assert "ORCHESTRATOR_REQUIRE_SANDBOX" in logged and "TCP connections" in logged
    assert not (tmp_path / "data" / "sandbox" / "probe").exists(), "nothing was launched"


@pytest.mark.process
async def test_an_unconfined_server_reads_what_a_sandboxed_one_cannot(tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("readable")
    probe_folder(tmp_path / "sub_graphs", isolation="inline")

    async with started(Person()) as runtime:
        read = await call(runtime, "probe_read", {"path": str(secret)})

    assert (read.status, read.message) == ("success", "readable")
