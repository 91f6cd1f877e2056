"""The `mcp:` section of a `tool_config.yaml`: how to launch or reach an MCP server.

    mcp:
      command: mcp-server-time          # stdio: the server runs as a child process
      args: [--local-timezone, UTC]
      env: {API_KEY: TIME_API_KEY}      # its API_KEY is our TIME_API_KEY (never in the file)
      cwd: .                            # relative to the folder
    # or
    mcp:
      url: http://127.0.0.1:8000/mcp    # streamable HTTP
      headers: {Authorization: TIME_AUTH}
    # either way
      pool: 4                           # sessions (stdio: processes) for calls at once

Secrets stay in the environment: `env` and `headers` name the variables that
hold their values, and only those names are part of what is approved.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator

from orchestrator.errors import ConfigError

if TYPE_CHECKING:  # the SDK is loaded when a server starts, not to read a tool_config.yaml
    from langchain_mcp_adapters.sessions import Connection

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
MISSING_ENV = "environment variable {variable} is not set (for its {what} {key})"
NOT_FOUND = "command {command!r} not found (not on PATH, nor beside this Python)"


class McpServerConfig(BaseModel):
    """How to reach one MCP server: a command over stdio, or a streamable-HTTP URL."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(
        default_factory=dict,
        description="The server's variable: the name of ours holding its value.",
    )
    cwd: str | None = None
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(
        default_factory=dict, description="A header: the name of the variable holding its value."
    )
    startup_timeout_seconds: float = Field(default=30.0, gt=0, le=600, allow_inf_nan=False)
    pool: int = Field(
        default=1,
        ge=1,
        le=16,
        description="Sessions kept with the server (for a stdio server, processes) for calls at once.",
    )

    @field_validator("env", "headers")
    @classmethod
    def _variable_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key, variable in value.items():
            if not ENV_NAME.fullmatch(variable):
                raise ValueError(f"{key}: {variable!r} is not an environment variable name")
        return value

    @field_validator("headers")
    @classmethod
    def _header_names(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not HEADER_NAME.fullmatch(key):
                raise ValueError(f"{key!r} is not a header name")
        return value

    @field_validator("cwd")
    @classmethod
    def _inside_folder(cls, value: str | None) -> str | None:
        if value is not None and (
            PurePosixPath(value).is_absolute() or ".." in PurePosixPath(value).parts
        ):
            raise ValueError("must be a relative path inside the folder")
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of `command` (stdio) and `url` (streamable HTTP)")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("`args`, `env` and `cwd` are for a `command`, not a `url`")
        if self.command is not None and self.headers:
            raise ValueError("`headers` are for a `url`, not a `command`")
        return self

    @property
    def transport(self) -> Literal["stdio", "streamable_http"]:
        """How the server is reached."""
        return "stdio" if self.command is not None else "streamable_http"

    def launch(self) -> dict[str, JsonValue]:
        """How the server is launched or reached, as approved: variable names, not values."""
        return self.model_dump(
            mode="json", exclude={"startup_timeout_seconds", "pool"}, exclude_defaults=True
        )

    def connection(self, *, folder: Path) -> Connection:
        """The connection langchain-mcp-adapters opens, the values read from the environment now.

        Raises ConfigError for a variable that is not set or a command that cannot be found.
        """
        if self.url is not None:
            headers = _values(self.headers, what="header")
            return {"transport": "streamable_http", "url": self.url, "headers": headers}
        assert self.command is not None
        return {
            "transport": "stdio",
            "command": _executable(self.command),
            "args": list(self.args),
            # The SDK adds a safe minimum (PATH, HOME, ...) to these; nothing else of ours leaks.
            "env": _values(self.env, what="variable"),
            "cwd": str(folder / self.cwd) if self.cwd else str(folder),
        }


def _values(names: dict[str, str], *, what: str) -> dict[str, str]:
    values = {}
    for key, variable in names.items():
        value = os.environ.get(variable)
        if value is None:
            raise ConfigError(MISSING_ENV.format(variable=variable, what=what, key=key))
        values[key] = value
    return values


def _executable(command: str) -> str:
    """The command as given if it is a path or on PATH; else the one beside this interpreter.

    Run as `.venv/bin/orchestrator`, the virtual environment is not on PATH, but
    servers installed into it (`pip install mcp-server-time`) are beside Python.
    """
    if os.sep in command or shutil.which(command):
        return command
    beside = shutil.which(command, path=str(Path(sys.executable).parent))
    if beside is None:
        raise ConfigError(NOT_FOUND.format(command=command))
    return beside
