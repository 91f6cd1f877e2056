"""Servers started the ways people install them, under the default sandbox, and what a
refused start says.

Real processes held by real Landlock rules: a Python server behind this machine's
pyenv shim, a Node.js package in a project's `node_modules` that needs its
dependency (and fetches, within the memory limit), servers `uvx`, `npx` and `pipx run`
ran once from a package index or npm registry on 127.0.0.1 that is gone when they
start again. The launchers this machine lacks (asdf, mise, nvm) are laid out as they
install themselves, and what a launch of each may touch is read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.sandbox import landlock
from orchestrator.sandbox.launchers import launch_needs
from orchestrator.sandbox.refusals import refusal
from orchestrator.sandbox.rules import Policy
from tests.mcp.test_folders import Person, call, server_folder, started, warnings_about

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers"
SHIM = shutil.which("python3")
needs_landlock = pytest.mark.skipif(
    landlock.abi_version() < 4, reason="needs Landlock ABI 4 or later"
)


def stdlib_folder(sub_graphs: Path, name: str, command: str, *files: Path) -> Path:
    """A folder running the standard-library server with `command` (a Python), reading `files`."""
    folder = server_folder(
        sub_graphs, name, {"command": command, "args": ["stdlib_server.py", *map(str, files)]}
    )
    shutil.copy(SERVERS / "stdlib_server.py", folder / "stdlib_server.py")
    return folder


def node_project(path: Path) -> Path:
    """A project with the echo server installed in its node_modules, and its dependency."""
    modules = path / "node_modules"
    package, dependency = modules / "echo-server", modules / "echo-dep"
    package.mkdir(parents=True)
    dependency.mkdir()
    shutil.copy(SERVERS / "echo_server.js", package / "cli.js")
    (package / "cli.js").chmod(0o755)
    (package / "package.json").write_text('{"name": "echo-server", "bin": "cli.js"}')
    (dependency / "package.json").write_text('{"name": "echo-dep", "main": "index.js"}')
    (dependency / "index.js").write_text("exports.shout = (text) => text.toUpperCase() + '!';\n")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "echo-server").symlink_to("../echo-server/cli.js")
    return modules / ".bin" / "echo-server"


@needs_landlock
@pytest.mark.process
@pytest.mark.skipif(
    SHIM is None or Path(SHIM).parent.name != "shims",
    reason="this machine's python3 is not behind a version manager's shim",
)
async def test_a_server_run_by_a_shims_python_starts_under_the_default_sandbox(tmp_path: Path):
    stdlib_folder(tmp_path / "sub_graphs", "shim", "python3")

    async with started(Person()) as runtime:
        said = await call(runtime, "shim_echo", {"text": "hello"})

    assert said.status == "success", said.message
    root = Path(SHIM or "").parent.parent  # the manager's root: its versions are below it
    assert said.message.startswith("hello (from ") and str(root) in said.message


@needs_landlock
@pytest.mark.process
@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
async def test_a_package_in_node_modules_reads_its_own_dependencies(tmp_path: Path):
    program = node_project(tmp_path / "project")
    server_folder(tmp_path / "sub_graphs", "echo", {"command": str(program)})

    async with started(Person()) as runtime:
        said = await call(runtime, "echo_echo", {"text": "hello"})

    assert (said.status, said.message) == ("success", "HELLO!")


@pytest.fixture
def page() -> Iterator[tuple[int, str]]:
    """A page served on 127.0.0.1: its port, and its text."""
    body = b"a page on this machine"

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], body.decode()
    finally:
        server.shutdown()
        server.server_close()


@needs_landlock
@pytest.mark.process
@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
async def test_a_node_server_fetches_within_the_default_memory_limit(
    tmp_path: Path, page: tuple[int, str]
):
    port, text = page
    program = node_project(tmp_path / "project")
    server_folder(
        tmp_path / "sub_graphs", "echo", {"command": str(program)}, sandbox={"connect": [port]}
    )

    async with started(Person()) as runtime:
        got = await call(runtime, "echo_get", {"url": f"http://127.0.0.1:{port}/"})

    assert (got.status, got.message) == ("success", text)


@needs_landlock
@pytest.mark.process
async def test_a_refused_start_names_the_path_and_the_option_that_allows_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    settings = tmp_path / "elsewhere" / "settings.txt"
    settings.parent.mkdir()
    settings.write_text("its settings")
    stdlib_folder(tmp_path / "sub_graphs", "picky", sys.executable, settings)

    with caplog.at_level(logging.WARNING):
        async with started(Person()) as runtime:
            failed = await call(runtime, "picky_echo", {"text": "hello"})

    [line] = [m for m in warnings_about(caplog, "MCP server picky") if "did not start" in m]
    assert "\n" not in line
    assert f"the sandbox refused reading {settings}" in line
    assert f"`--read {settings}` to `orchestrator mcp add`" in line
    assert failed.status == "failure"


def test_what_programs_say_they_were_refused_is_read_with_the_option_to_allow_it():
    policy = Policy(read=["/usr", "/home/me/project"], write=[])
    said = {
        "/root/.pyenv/shims/python3: line 12: /root/.pyenv/libexec/pyenv: Permission denied": (
            "read",
            "/root/.pyenv/libexec/pyenv",
        ),
        "PermissionError: [Errno 13] Permission denied: '/home/me/project/out.txt'": (
            "write",
            "/home/me/project/out.txt",
        ),
        "python3: can't open file '/opt/server.py': [Errno 13] Permission denied": (
            "read",
            "/opt/server.py",
        ),
        "Error: EACCES: permission denied, open '/home/me/.config/app.json'": (
            "read",
            "/home/me/.config/app.json",
        ),
        "Error: connect EACCES 127.0.0.1:5432\n    at TCPConnectWrap": ("connect", "5432"),
    }
    for output, (option, target) in said.items():
        found = refusal(f"starting\n{output}\n", policy)
        assert found is not None, output
        assert (found.option, found.target) == (option, target)
        assert f"`--{option} {target}`" in found.advice()
    assert refusal("ModuleNotFoundError: No module named 'x'", policy) is None


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_asdf_and_mise_shims_read_their_manager_and_the_users_versions(tmp_path: Path):
    home = tmp_path / "home"
    asdf = home / ".asdf"
    _script(asdf / "bin" / "asdf", "#!/usr/bin/env bash\n")
    _script(
        asdf / "shims" / "python",
        f'#!/usr/bin/env bash\n# asdf-plugin: python 3.12.1\nexec {asdf}/bin/asdf exec "python" "$@"\n',
    )
    (asdf / "installs" / "python" / "3.12.1" / "bin").mkdir(parents=True)
    (home / ".tool-versions").write_text("python 3.12.1\nnodejs 20.1.0  # the LTS\n")
    mise = home / ".local" / "share" / "mise"
    binary = _script(tmp_path / "usr" / "bin" / "mise", "")
    (mise / "shims").mkdir(parents=True)
    (mise / "shims" / "node").symlink_to(binary)
    (home / ".config" / "mise").mkdir(parents=True)
    path = f"{asdf / 'shims'}:{mise / 'shims'}"
    environ = {"HOME": str(home), "PATH": path}

    by_asdf = launch_needs("python", folder=tmp_path, environ=environ)
    by_mise = launch_needs("node", folder=tmp_path, environ=environ)

    assert str(asdf) in by_asdf.read and str(home / ".tool-versions") in by_asdf.read
    assert by_asdf.env["ASDF_DATA_DIR"] == str(asdf)
    assert by_asdf.env["ASDF_PYTHON_VERSION"] == "3.12.1"
    assert by_asdf.env["ASDF_NODEJS_VERSION"] == "20.1.0"
    assert str(mise) in by_mise.read and str(home / ".config" / "mise") in by_mise.read
    assert by_mise.env["MISE_DATA_DIR"] == str(mise)
    assert not by_asdf.write and not by_mise.write


def test_package_runners_get_their_caches_where_their_variables_say(tmp_path: Path):
    home = tmp_path / "home"
    uv_cache, npm_cache, pipx_home = tmp_path / "uv-cache", home / ".npm", home / ".local" / "pipx"
    uv_pythons = home / ".local" / "share" / "uv" / "python"
    pipx_caches = (pipx_home / ".cache", home / ".cache" / "pipx")
    for folder in (uv_cache, npm_cache, pipx_home, uv_pythons, *pipx_caches):
        folder.mkdir(parents=True)
    bin_dir = tmp_path / "bin"
    for name in ("uvx", "npx", "pipx"):
        _script(bin_dir / name, "#!/bin/sh\n")
    environ = {"HOME": str(home), "PATH": str(bin_dir), "UV_CACHE_DIR": str(uv_cache)}

    uvx = launch_needs("uvx", folder=tmp_path, environ=environ)
    npx = launch_needs("npx", folder=tmp_path, environ=environ)
    pipx = launch_needs("pipx", folder=tmp_path, environ=environ)

    assert uvx.write == [str(uv_cache)] and uvx.env["UV_CACHE_DIR"] == str(uv_cache)
    assert str(home / ".local" / "share" / "uv" / "python") in uvx.read
    assert npx.write == [str(npm_cache)] and npx.env["npm_config_cache"] == str(npm_cache)
    # pipx: its home and cache where it keeps them by default, and uv's (`pipx run` runs uv)
    assert str(pipx_home) in pipx.read and "PIPX_HOME" not in pipx.env
    assert pipx.write == [str(home / ".cache" / "pipx"), str(uv_cache)]
    assert pipx.offline == {"UV_OFFLINE": "1"}
    named = launch_needs("pipx", folder=tmp_path, environ={**environ, "PIPX_HOME": str(pipx_home)})
    assert named.env["PIPX_HOME"] == str(pipx_home) and named.env["UV_CACHE_DIR"] == str(uv_cache)
    assert named.write == [str(pipx_home / ".cache"), str(uv_cache)]
    assert uvx.offline == {"UV_OFFLINE": "1"} and npx.offline == {"npm_config_offline": "true"}
    elsewhere = launch_needs("uvx", folder=tmp_path, environ={**environ, "UV_CACHE_DIR": "/none"})
    assert elsewhere.write == [] and "UV_CACHE_DIR" not in elsewhere.env  # it keeps its own


def test_a_global_package_under_nvm_reads_its_node_version(tmp_path: Path):
    version = tmp_path / "home" / ".nvm" / "versions" / "node" / "v20.1.0"
    cli = _script(version / "lib" / "node_modules" / "@scope" / "server" / "dist" / "cli.js", "")
    (version / "bin").mkdir()
    (version / "bin" / "server").symlink_to(os.path.relpath(cli, version / "bin"))

    needs = launch_needs("server", folder=tmp_path, environ={"PATH": str(version / "bin")})

    assert needs.read == [str(version / "lib" / "node_modules")]


def stdlib_wheel(folder: Path) -> Path:
    """A wheel of the standard-library server, `stdlib-echo` (its program of that name)."""
    server = (SERVERS / "stdlib_server.py").read_text()
    start = "import runpy, pathlib\n\ndef main():\n    runpy.run_path(str(pathlib.Path(__file__).with_name('stdlib_echo_server.py')), run_name='__main__')\n"
    info = "stdlib_echo-1.0.dist-info"
    files = {
        "stdlib_echo.py": start,
        "stdlib_echo_server.py": server,
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: stdlib-echo\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[console_scripts]\nstdlib-echo = stdlib_echo:main\n",
    }
    record = []
    for name, text in files.items():
        digest = hashlib.sha256(text.encode()).digest()
        encoded = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{name},sha256={encoded},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    folder.mkdir(parents=True)
    wheel = folder / "stdlib_echo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


@contextmanager
def package_index(wheel: Path) -> Iterator[str]:
    """A package index (PEP 503) on 127.0.0.1 offering `wheel`: its URL."""
    listing = f'<a href="/files/{wheel.name}">{wheel.name}</a>'.encode()

    class Index(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_error(405)  # uv asks whether it may read parts: it may not

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/simple/stdlib-echo":
                body, kind = listing, "text/html"
            elif self.path == f"/files/{wheel.name}":
                body, kind = wheel.read_bytes(), "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


@needs_landlock
@pytest.mark.process
async def test_a_server_run_once_by_uvx_starts_again_from_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    uvx = shutil.which("uvx", path=str(Path(sys.executable).parent)) or shutil.which("uvx")
    if uvx is None:
        pytest.skip("uv is not installed (a dev dependency)")
    cache = tmp_path / "uv-cache"
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    monkeypatch.setenv("TEST_UV_PYTHON", sys.executable)
    wheel = stdlib_wheel(tmp_path / "wheels")
    with package_index(wheel) as index:
        # The person ran it once (online): the package is in their cache.
        first = subprocess.run(
            [uvx, "--index-url", index, "stdlib-echo"],
            input="",
            capture_output=True,
            text=True,
            env={**os.environ, "UV_PYTHON": sys.executable},
            timeout=120,
            check=False,
        )
        assert first.returncode == 0, first.stderr
    # The index is gone: the server, which may connect nowhere, starts from the cache.
    server_folder(
        tmp_path / "sub_graphs",
        "uvecho",
        {
            "command": "uvx",
            "args": ["--index-url", index, "stdlib-echo"],
            "env": {"UV_PYTHON": "TEST_UV_PYTHON"},
        },
    )

    async with started(Person()) as runtime:
        said = await call(runtime, "uvecho_echo", {"text": "hello"})

    assert said.status == "success", said.message
    assert said.message.startswith("hello (from ") and str(cache) in said.message


def npm_packages(folder: Path) -> dict[str, Path]:
    """Tarballs (`npm pack`) of the echo server and its dependency, by package name."""
    sources = {
        "echo-dep": {
            "package.json": '{"name": "echo-dep", "version": "1.0.0", "main": "index.js"}',
            "index.js": "exports.shout = (text) => text.toUpperCase() + '!';\n",
        },
        "echo-server": {
            "package.json": '{"name": "echo-server", "version": "1.0.0", "bin": {"echo-server": '
            '"cli.js"}, "dependencies": {"echo-dep": "1.0.0"}}',
            "cli.js": (SERVERS / "echo_server.js").read_text(),
        },
    }
    tarballs = {}
    for name, files in sources.items():
        source = folder / "sources" / name
        source.mkdir(parents=True)
        for file, text in files.items():
            (source / file).write_text(text)
        packed = subprocess.run(
            ["npm", "pack", "--silent", "--pack-destination", str(folder), str(source)],
            capture_output=True,
            text=True,
            env={**os.environ, "npm_config_cache": str(folder / "pack-cache")},
            timeout=120,
            check=True,
        )
        tarballs[name] = folder / packed.stdout.strip().splitlines()[-1]
    return tarballs


@contextmanager
def npm_registry(tarballs: dict[str, Path]) -> Iterator[str]:
    """An npm registry on 127.0.0.1 offering the tarballs (version 1.0.0 each): its URL."""

    class Registry(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            name = self.path.strip("/")
            files = {f"/-/{tarball.name}": tarball for tarball in tarballs.values()}
            if name in tarballs:
                body = json.dumps(_packument(name, tarballs[name], base)).encode()
            elif self.path in files:
                body = files[self.path].read_bytes()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _packument(name: str, tarball: Path, base: str) -> dict[str, object]:
    data = tarball.read_bytes()
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/package.json")
        assert member is not None
        manifest = json.loads(member.read())
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    dist = {
        "tarball": f"{base}/-/{tarball.name}",
        "shasum": hashlib.sha1(data).hexdigest(),
        "integrity": integrity,
    }
    return {
        "name": name,
        "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {**manifest, "dist": dist}},
    }


@needs_landlock
@pytest.mark.process
@pytest.mark.skipif(shutil.which("npx") is None, reason="npm (npx) is not installed")
async def test_a_server_run_once_by_npx_starts_again_from_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    cache = tmp_path / "npm-cache"
    monkeypatch.setenv("npm_config_cache", str(cache))
    tarballs = npm_packages(tmp_path / "packages")
    with npm_registry(tarballs) as registry:
        # The person ran it once (online): the package is in their cache.
        first = subprocess.run(
            ["npx", "--yes", "--registry", registry, "echo-server"],
            input="",
            capture_output=True,
            text=True,
            env={**os.environ, "npm_config_cache": str(cache)},
            timeout=120,
            check=False,
        )
        assert first.returncode == 0, first.stderr
    # The registry is gone: the server, which may connect nowhere, starts from the cache.
    server_folder(
        tmp_path / "sub_graphs",
        "npxecho",
        {"command": "npx", "args": ["--yes", "--registry", registry, "echo-server"]},
    )

    async with started(Person()) as runtime:
        said = await call(runtime, "npxecho_echo", {"text": "hello"})

    assert (said.status, said.message) == ("success", "HELLO!")


@needs_landlock
@pytest.mark.process
async def test_a_server_pipx_ran_once_starts_again_from_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    pipx = shutil.which("pipx", path=str(Path(sys.executable).parent)) or shutil.which("pipx")
    if pipx is None:
        pytest.skip("pipx is not installed (a dev dependency)")
    pipx_home, cache = tmp_path / "pipx", tmp_path / "uv-cache"
    monkeypatch.setenv("PIPX_HOME", str(pipx_home))
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    wheel = stdlib_wheel(tmp_path / "wheels")
    with package_index(wheel) as index:
        # The person ran it once (online): pipx ran it through uv, which keeps it cached.
        first = subprocess.run(
            [pipx, "run", "--index-url", index, "stdlib-echo"],
            input="",
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=300,
            check=False,
        )
        assert first.returncode == 0, first.stderr
    server_folder(
        tmp_path / "sub_graphs",
        "pipxecho",
        {"command": pipx, "args": ["run", "--index-url", index, "stdlib-echo"]},
    )

    async with started(Person()) as runtime:
        said = await call(runtime, "pipxecho_echo", {"text": "hello"})

    assert said.status == "success", said.message
    assert said.message.startswith("hello (from ") and str(cache) in said.message
