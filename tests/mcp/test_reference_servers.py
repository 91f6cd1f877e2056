"""The reference MCP servers as people add them: one `orchestrator mcp add`, then
`tools approve` (no chat), then called from `ask` (the model: the local
OpenAI-compatible test server) and from `run`, under the default sandbox.

From PyPI (dev dependencies): `mcp-server-time`, `mcp-server-git`, `mcp-server-fetch`
(on a page served on 127.0.0.1). From npm, where Node.js is installed
(`scripts/setup.sh` puts them in `.venv/npm/node_modules`, run from its `.bin` as from a
project's own): `@modelcontextprotocol/server-filesystem` and `server-everything`.
Nothing reaches beyond this machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from orchestrator import as_node
from orchestrator.actions.host import close_hosts
from orchestrator.settings import load_settings
from orchestrator.store.logins import Logins
from orchestrator.testing import OpenAICompatibleServer
from tests.helpers import server_env
from tests.mcp.test_folders import git_repo, tool_messages

Cli = Callable[..., subprocess.CompletedProcess[str]]
NPM_BIN = Path(sys.prefix) / "npm" / "node_modules" / ".bin"
PAGE = (
    b"<html><head><title>Loopback</title></head><body><h1>A loopback page</h1>"
    b"<p>The zebra sleeps at noon.</p></body></html>"
)
READABILITY = "readabilipy's Node.js packages are not installed (scripts/setup.sh installs them)"

pytestmark = pytest.mark.process  # sandboxed where Landlock is; unconfined, and said, elsewhere


def npm_server(name: str) -> Path:
    """The npm reference server's program; the test is skipped, saying why, without it."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: the npm reference servers cannot run")
    program = NPM_BIN / name
    if not program.exists():
        pytest.skip(f"{program} is not installed (scripts/setup.sh installs it where npm is)")
    return program


def added(cli: Cli, home: Path, name: str, *arguments: str) -> None:
    """`mcp add NAME ARGUMENTS...`, then `tools approve NAME`: both succeed."""
    add = cli("mcp", "add", name, *arguments, cwd=home)
    assert add.returncode == 0, add.stdout + add.stderr
    approve = cli("tools", "approve", name, cwd=home)
    assert approve.returncode == 0, approve.stdout + approve.stderr
    assert "approved: the MCP server's" in approve.stdout, approve.stdout


def run_json(cli: Cli, home: Path, folder: str, action: str, arguments: dict[str, object]) -> dict:
    """`run FOLDER ACTION --json ARGUMENTS`: its envelope (it succeeded)."""
    done = cli("run", folder, action, "--json", json.dumps(arguments), cwd=home)
    envelope = json.loads(done.stdout)
    assert done.returncode == 0 and envelope["success"], done.stdout + done.stderr
    assert envelope["metadata"]["operation"] == f"{folder}.{action}"
    return envelope


def asked(cli: Cli, home: Path, tool: str, arguments: dict[str, object]) -> dict:
    """`ask`, the model calling `tool` once: what the tool answered the model."""
    script = [[(tool, arguments)], "Done."]
    with OpenAICompatibleServer(script, strict=True) as model:
        done = cli("ask", "Please do it.", cwd=home, env_extra=server_env(model))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().endswith("Done.")
    answer = json.loads(tool_messages(model.requests[1])[tool])
    assert answer["status"] == "success", answer
    return answer


@pytest.fixture
def page() -> Iterator[int]:
    """A page served on 127.0.0.1 (robots.txt: not found): its port."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = self.path == "/page.html"
            body = PAGE if found else b"not found"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "text/html" if found else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_mcp_server_time(cli: Cli, tmp_path: Path):
    added(cli, tmp_path, "time", "--", "mcp-server-time", "--local-timezone", "UTC")

    now = run_json(cli, tmp_path, "time", "get_current_time", {"timezone": "Asia/Tokyo"})
    words = cli(
        "run", "time", "convert_time",
        "source_timezone: UTC, time: 12:00, target_timezone: Asia/Tokyo", cwd=tmp_path,
    )  # fmt: skip
    answer = asked(cli, tmp_path, "time_get_current_time", {"timezone": "Europe/Paris"})

    assert now["data"]["timezone"] == "Asia/Tokyo" and now["data"]["datetime"].endswith("+09:00")
    assert words.returncode == 0 and "T21:00:00+09:00" in words.stdout, words.stdout + words.stderr
    assert answer["data"]["timezone"] == "Europe/Paris"


def test_mcp_server_git(cli: Cli, tmp_path: Path):
    repo = git_repo(tmp_path / "repo")
    added(
        cli, tmp_path, "git", "--read", str(repo), "--", "mcp-server-git", "--repository", str(repo)
    )

    status = run_json(cli, tmp_path, "git", "git_status", {"repo_path": str(repo)})
    words = cli("run", "git", "git_log", f"repo_path: {repo}, max_count: 1", cwd=tmp_path)
    answer = asked(cli, tmp_path, "git_git_log", {"repo_path": str(repo), "max_count": 1})

    assert "untracked.txt" in status["message"]
    assert words.returncode == 0 and "the first commit" in words.stdout, words.stdout + words.stderr
    assert "the first commit" in answer["message"]


def test_mcp_server_fetch_on_a_loopback_page(cli: Cli, tmp_path: Path, page: int):
    readabilipy = pytest.importorskip("readabilipy")
    javascript = Path(readabilipy.__file__).parent / "javascript"
    if shutil.which("node") is not None and not (javascript / "node_modules").exists():
        pytest.skip(READABILITY)  # it would run `npm install` at the first fetch
    url = f"http://127.0.0.1:{page}/page.html"
    added(cli, tmp_path, "fetch", "--connect", str(page), "--", "mcp-server-fetch")

    fetched = run_json(cli, tmp_path, "fetch", "fetch", {"url": url})
    answer = asked(cli, tmp_path, "fetch_fetch", {"url": url})

    for text in (fetched["message"], answer["message"]):
        assert "A loopback page" in text and "The zebra sleeps at noon." in text


def test_npm_server_filesystem(cli: Cli, tmp_path: Path):
    program = npm_server("mcp-server-filesystem")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("from the shared folder")
    added(cli, tmp_path, "files", "--read", str(shared), "--", str(program), str(shared))

    listed = run_json(cli, tmp_path, "files", "list_directory", {"path": str(shared)})
    words = cli("run", "files", "read_text_file", f"path: {shared / 'notes.txt'}", cwd=tmp_path)
    answer = asked(cli, tmp_path, "files_read_text_file", {"path": str(shared / "notes.txt")})

    assert "[FILE] notes.txt" in listed["message"]
    assert words.returncode == 0 and "from the shared folder" in words.stdout, words.stderr
    assert "from the shared folder" in answer["message"]


def test_npm_server_everything(cli: Cli, tmp_path: Path):
    program = npm_server("mcp-server-everything")
    added(cli, tmp_path, "everything", "--", str(program))

    echoed = run_json(cli, tmp_path, "everything", "echo", {"message": "hello"})
    summed = cli("run", "everything", "get-sum", "a: 2, b: 40", cwd=tmp_path)  # numbers from words
    answer = asked(cli, tmp_path, "everything_get-sum", {"a": 1, "b": 2})

    assert "hello" in echoed["message"]
    assert summed.returncode == 0 and "42" in summed.stdout, summed.stdout + summed.stderr
    assert "3" in answer["message"]


@pytest.fixture
def closing_hosts() -> Iterator[None]:
    """The orchestrator behind `as_node` closed after the test (its servers stopped)."""
    yield
    close_hosts()


class Now(TypedDict, total=False):
    zone: str
    now: dict[str, object]


def test_an_mcp_servers_tool_is_a_node_of_a_workflow(
    cli: Cli, tmp_path: Path, database_logins: Logins, closing_hosts: None
):
    added(cli, tmp_path, "time", "--", "mcp-server-time", "--local-timezone", "UTC")
    settings = load_settings(
        database_url=database_logins.owner_url,
        database_app_url=database_logins.app_url,
        data_dir=tmp_path / "data",
        sub_graphs_dir=tmp_path / "sub_graphs",
        embeddings="none",
    )
    builder = StateGraph(Now)
    node = as_node(
        "time", "get_current_time", inputs={"timezone": "zone"}, output_key="now", settings=settings
    )
    builder.add_node("now", node)
    builder.add_edge(START, "now")
    builder.add_edge("now", END)

    done = builder.compile().invoke({"zone": "Asia/Tokyo"})

    envelope = done["now"]
    assert envelope["success"], envelope
    assert envelope["metadata"]["operation"] == "time.get_current_time"
    assert envelope["data"]["timezone"] == "Asia/Tokyo"
