"""What a command needs of the user's files to start, read from how it is installed.

People start MCP servers through launchers: a version manager's shim (pyenv, asdf,
mise), a package runner with a cache (`uvx`, `npx`, `pipx run`), a project's
`node_modules/.bin`. Under a sandbox whose `HOME` is private, each needs a few of
the user's paths, and no more:

- a shim (a program in a `shims/` folder): the manager's root above it (its
  installed versions, its own scripts), the root a pyenv shim names, and the
  manager's program its `exec` line runs; asdf and mise are pointed at their
  data and settings, since the private `HOME` hides them;
- a program inside `node_modules`: that whole `node_modules` tree (its dependencies);
- `uvx`/`uv`, `npx`/`npm`, `pipx` (which runs `uv` where it is installed): their
  caches (written: that is what a cache is for) and their settings, where their
  environment variables say, else where they keep them by default; the variables
  are set for the process, so that the private `HOME` does not hide them; where it
  may connect nowhere, `uv` and `npm` are told to work offline, from the cache
  (asking the registry first would only fail).

Paths that do not exist are left out.

`node_options` is for any process held to an address-space limit: Node.js reserves
guard regions far beyond the limit for each WebAssembly instance (its own HTTP
client's parser is one), so `fetch` fails there ("Out of memory: Cannot allocate Wasm
memory") unless told to check bounds instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

# A pyenv shim names its root; an asdf (or any bash) shim ends with the manager it runs.
PYENV_ROOT = re.compile(r'^export PYENV_ROOT="([^"]+)"', re.MULTILINE)
EXEC = re.compile(r'^\s*exec\s+"?(/[^"\s]+)"?', re.MULTILINE)
SHIM_BYTES = 4096  # shims are a few lines; a longer file is not read further
NODE_WASM_FLAG = "--disable-wasm-trap-handler"  # Node.js 20.15 and 22.2 on
NODE_CHECK_SECONDS = 10.0


@dataclass(frozen=True)
class LaunchNeeds:
    """Paths to read, paths to read and write, and variables for one command's launch.

    `offline`: the variables that keep a package runner to its cache, for a process
    that may connect nowhere (asking the registry first would only fail).
    """

    read: list[str] = field(default_factory=list)
    write: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    offline: dict[str, str] = field(default_factory=dict)


def launch_needs(
    command: str, *, folder: Path, environ: Mapping[str, str] | None = None
) -> LaunchNeeds:
    """What `command`, run from `folder`, needs beyond the system and its own installation."""
    environ = os.environ if environ is None else environ
    home = Path(environ.get("HOME") or Path.home())
    program = locate(command, folder=folder, environ=environ)
    read: list[Path] = []
    write: list[Path] = []
    env: dict[str, str] = {}
    if program is not None:
        read += _node_modules(program)
        shim = _shim(program, home=home, environ=environ)
        read += shim.read
        env |= shim.env
    cache = _cache(Path(program or command).name, home=home, environ=environ)
    read += cache.read
    write += cache.write
    env |= cache.env
    return LaunchNeeds(
        read=_existing(read), write=_existing(write), env=env, offline=cache.offline
    )


def node_options(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """NODE_OPTIONS letting Node.js run WebAssembly under an address-space limit; empty
    when no Node.js is on PATH, or it does not know the flag (it would refuse to start)."""
    environ = os.environ if environ is None else environ
    node = shutil.which("node", path=environ.get("PATH"))
    if node is None or not _knows_wasm_flag(os.path.realpath(node)):
        return {}
    return {"NODE_OPTIONS": NODE_WASM_FLAG}


@cache
def _knows_wasm_flag(node: str) -> bool:
    try:
        done = subprocess.run(
            [node, NODE_WASM_FLAG, "--version"],
            capture_output=True,
            timeout=NODE_CHECK_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def locate(command: str, *, folder: Path, environ: Mapping[str, str]) -> Path | None:
    """The program `command` names: a path (relative to `folder`), else found on PATH."""
    if os.sep in command:
        path = Path(command)
        return path if path.is_absolute() else folder / path
    found = shutil.which(command, path=environ.get("PATH"))
    return Path(found) if found else None


def _node_modules(program: Path) -> list[Path]:
    """The outermost `node_modules` holding the program (or what its link points to)."""
    found = []
    for path in (program, Path(os.path.realpath(program))):
        parts = path.parts
        if "node_modules" in parts:
            found.append(Path(*parts[: parts.index("node_modules") + 1]))
    return found


@dataclass(frozen=True)
class _Found:
    read: list[Path] = field(default_factory=list)
    write: list[Path] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    offline: dict[str, str] = field(default_factory=dict)


def _shim(program: Path, *, home: Path, environ: Mapping[str, str]) -> _Found:
    """A version manager's shim: its root, the manager it runs, where its settings are."""
    root = program.parent.parent
    if program.parent.name != "shims" or root in (home, Path("/")):
        return _Found()  # not a shim; or one whose "root" would be all your files
    read = [root]
    text = _head(program)
    named = PYENV_ROOT.search(text)
    if named:
        read.append(Path(named.group(1)))
    ran = EXEC.search(text)
    if ran:
        manager = Path(os.path.realpath(ran.group(1)))
        read.append(manager.parent.parent if manager.parent.name == "bin" else manager.parent)
    env: dict[str, str] = {}
    config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    if _is_asdf(root, text):
        env["ASDF_DATA_DIR"] = str(root)
        versions = home / ".tool-versions"
        env |= _asdf_versions(versions)
        read.append(versions)
    elif root.name == "mise" or os.path.realpath(program).endswith("/mise"):
        env["MISE_DATA_DIR"] = str(root)
        env["MISE_CONFIG_DIR"] = environ.get("MISE_CONFIG_DIR") or str(config / "mise")
        read += [Path(env["MISE_CONFIG_DIR"]), home / ".tool-versions"]
        env["MISE_GLOBAL_CONFIG_FILE"] = str(Path(env["MISE_CONFIG_DIR"]) / "config.toml")
    return _Found(read=read, env=env)


def _is_asdf(root: Path, text: str) -> bool:
    return root.name == ".asdf" or "asdf-plugin" in text or " asdf exec " in text


def _asdf_versions(path: Path) -> dict[str, str]:
    """The user's global versions, as asdf reads them from `~/.tool-versions` (hidden by HOME)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    env = {}
    for line in lines:
        words = line.split("#", 1)[0].split()
        if len(words) >= 2:
            tool = re.sub(r"[^A-Za-z0-9]", "_", words[0]).upper()
            env[f"ASDF_{tool}_VERSION"] = words[1]
    return env


def _cache(name: str, *, home: Path, environ: Mapping[str, str]) -> _Found:
    """A package runner's cache (written) and settings (read), and the variables naming them."""
    cache_home = Path(environ.get("XDG_CACHE_HOME") or home / ".cache")
    data_home = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    if name in ("uv", "uvx"):
        cache = Path(environ.get("UV_CACHE_DIR") or cache_home / "uv")
        pythons = Path(environ.get("UV_PYTHON_INSTALL_DIR") or data_home / "uv" / "python")
        tools = Path(environ.get("UV_TOOL_DIR") or data_home / "uv" / "tools")
        env = _named({"UV_CACHE_DIR": cache, "UV_PYTHON_INSTALL_DIR": pythons})
        read = [pythons, tools, config_home / "uv"]
        return _Found(read=read, write=[cache], env=env, offline={"UV_OFFLINE": "1"})
    if name in ("npm", "npx"):
        cache = Path(environ.get("npm_config_cache") or home / ".npm")
        settings = Path(environ.get("npm_config_userconfig") or home / ".npmrc")
        env = _named({"npm_config_cache": cache, "npm_config_userconfig": settings})
        offline = {"npm_config_offline": "true"}
        return _Found(read=[settings], write=[cache], env=env, offline=offline)
    if name == "pipx":
        return _pipx(home=home, environ=environ, uv=_cache("uv", home=home, environ=environ))
    return _Found()


def _pipx(*, home: Path, environ: Mapping[str, str], uv: _Found) -> _Found:
    """pipx: its home read (its shared libraries), its cache and logs written; and uv's
    needs, since `pipx run` runs `uv tool run` where uv is installed."""
    named = environ.get("PIPX_HOME")
    if named:
        pipx_home = Path(named)
        written = [pipx_home / ".cache", pipx_home / "logs"]
    else:
        legacy = home / ".local" / "pipx"
        data_home = Path(environ.get("XDG_DATA_HOME") or home / ".local" / "share")
        cache_home = Path(environ.get("XDG_CACHE_HOME") or home / ".cache")
        state_home = Path(environ.get("XDG_STATE_HOME") or home / ".local" / "state")
        pipx_home = legacy if legacy.is_dir() else data_home / "pipx"
        written = [cache_home / "pipx", state_home / "pipx" / "log"]
    # Its home is passed only where you set it: set for you, it would move pipx's cache.
    env = {**uv.env, **({"PIPX_HOME": named} if named else {})}
    return _Found(
        read=[pipx_home, *uv.read], write=[*written, *uv.write], env=env, offline=uv.offline
    )


def _named(paths: dict[str, Path]) -> dict[str, str]:
    """The variables naming the paths that exist (else the tool keeps to its private HOME)."""
    return {name: str(path) for name, path in paths.items() if path.exists()}


def _head(path: Path) -> str:
    try:
        with path.open("rb") as file:
            return file.read(SHIM_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _existing(paths: list[Path]) -> list[str]:
    return list(dict.fromkeys(str(path) for path in paths if path.exists()))
