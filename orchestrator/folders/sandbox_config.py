"""The `sandbox:` section of a `tool_config.yaml`: what a folder's process may touch.

    sandbox:
      isolation: process        # the default but for shipped folders and agents (see
                                #   `folders.isolation`); inline: unconfined
      read: [~/code/project]    # beyond the defaults; `~` and ${VAR} (from `config:`, then
      write: ["${repo}"]        #   the environment; null in `config:`: left out); relative
                                #   to the folder
      connect: [443]            # TCP ports it may connect to (default: none)
      memory_mb: 4096           # its address space
      cpu_seconds: 600          # CPU time over its whole life (default: no limit)
      max_files: 1024           # open files at once

The section is part of the folder's hash (the file is), so a change is asked
about again. `policy` resolves it, for one launch, to a `sandbox.rules.Policy`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from orchestrator.errors import ConfigError
from orchestrator.sandbox.launchers import launch_needs
from orchestrator.sandbox.rules import DEVICES, PROC_READ, SYSTEM_READ, Policy

VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
UNSET = "sandbox path {path!r}: ${{{name}}} is set neither in the folder's config nor in the environment"
Port = Annotated[int, Field(ge=1, le=65535)]


class SandboxConfig(BaseModel):
    """Where a folder's process runs and what it may reach (see the module's docstring)."""

    model_config = ConfigDict(extra="forbid")

    isolation: Literal["process", "inline"] | None = Field(
        default=None,
        description="process: a sandboxed child process; inline: in the orchestrator, unconfined "
        "(default: process, but inline for a folder shipped with the orchestrator and an agent)",
    )
    read: list[str] = Field(
        default_factory=list, description="Paths it may read, beyond the defaults."
    )
    write: list[str] = Field(default_factory=list, description="Paths it may read and change.")
    connect: list[Port] = Field(default_factory=list, description="TCP ports it may connect to.")
    memory_mb: int = Field(default=4096, ge=16, le=1024 * 1024)
    cpu_seconds: int | None = Field(default=None, ge=1)
    max_files: int = Field(default=1024, ge=16, le=1024 * 1024)


def data_directory(data_dir: Path, key: str) -> Path:
    """The folder's private directory (its HOME, TMPDIR and bytecode cache are in it)."""
    return data_dir / "sandbox" / key.replace("/", "__")


def private_environment(data: Path) -> dict[str, str]:
    """The variables that point the process at its private directory."""
    return {
        "HOME": str(data / "home"),
        "TMPDIR": str(data / "tmp"),
        "PYTHONPYCACHEPREFIX": str(data / "pycache"),
    }


def policy(
    sandbox: SandboxConfig,
    *,
    folder: Path,
    data: Path,
    command: str | None,
    settings: dict[str, JsonValue],
) -> Policy:
    """The rules for one launch of `command` from `folder`, paths resolved now.

    `data` is the folder's private directory; `settings` its `config:`, for
    `${VAR}`. A path naming a variable its `config:` sets to null (a feature
    left off) is left out; ConfigError for a variable set nowhere.
    """
    declared_read = _declared(sandbox.read, folder=folder, settings=settings)
    declared_write = _declared(sandbox.write, folder=folder, settings=settings)
    read = [*SYSTEM_READ, *PROC_READ, *runtimes(), str(folder), *installation(command)]
    # What its launcher needs (a shim's manager, a package's node_modules, a runner's cache).
    needs = launch_needs(command, folder=folder) if command is not None else None
    return Policy(
        read=_unique([*read, *(needs.read if needs else []), *declared_read]),
        write=_unique([*DEVICES, str(data), *(needs.write if needs else []), *declared_write]),
        connect=sorted(set(sandbox.connect)),
        memory_mb=sandbox.memory_mb,
        cpu_seconds=sandbox.cpu_seconds,
        max_files=sandbox.max_files,
    )


def runtimes() -> list[str]:
    """This Python's installation (a virtual environment and the one it was made from)."""
    return _unique(
        [sys.prefix, sys.base_prefix, str(_root(Path(os.path.realpath(sys.executable))))]
    )


def installation(command: str | None) -> list[str]:
    """Where `command` is installed, and the interpreter its `#!` line names (resolved)."""
    if command is None:
        return []
    found = shutil.which(command) or command
    paths = [Path(found), Path(os.path.realpath(found))]
    interpreter = _shebang(Path(found))
    if interpreter is not None:
        paths += [Path(interpreter), Path(os.path.realpath(interpreter))]
    return _unique([str(_root(path)) for path in paths])


def _root(path: Path) -> Path:
    """A program's installation: the folder above its `bin/`, unless that is `/` or a home."""
    if path.parent.name not in ("bin", "sbin"):
        return path.parent if path.parent != Path.home() else path
    root = path.parent.parent
    return path if root in (Path("/"), Path.home()) else root


def _shebang(path: Path) -> str | None:
    try:
        with path.open("rb") as file:
            line = file.readline(256)
    except OSError:
        return None
    if not line.startswith(b"#!"):
        return None
    words = line[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:
        return shutil.which(words[-1])
    return words[0]


def _declared(texts: list[str], *, folder: Path, settings: dict[str, JsonValue]) -> list[str]:
    """The section's paths resolved, less those a null `config:` value leaves off."""
    return [
        str(_path(text, folder=folder, settings=settings))
        for text in texts
        if not any(_off(name, settings) for name in VARIABLE.findall(text))
    ]


def _off(name: str, settings: dict[str, JsonValue]) -> bool:
    return name in settings and settings[name] is None and name not in os.environ


def _path(text: str, *, folder: Path, settings: dict[str, JsonValue]) -> Path:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        found = settings.get(name)
        if isinstance(found, str | int | float) and not isinstance(found, bool):
            return str(found)
        if name in os.environ:
            return os.environ[name]
        raise ConfigError(UNSET.format(path=text, name=name))

    expanded = Path(os.path.expanduser(VARIABLE.sub(value, text)))
    return expanded if expanded.is_absolute() else folder / expanded


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
