"""A stdio MCP server's launch held by its folder's sandbox (see `folders.sandbox_config`).

The server's command runs under `sandbox/launcher.py`, which applies the
Landlock rules and resource limits to itself and then executes it: its
`HOME`, `TMPDIR` and Python bytecode cache are in the folder's private data
directory. Where this machine cannot enforce a rule, the server starts
without it, unless ORCHESTRATOR_REQUIRE_SANDBOX is set: then it does not start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import JsonValue

from orchestrator.errors import SandboxUnavailableError
from orchestrator.folders.sandbox_config import SandboxConfig, policy, private_environment
from orchestrator.private import private_dir
from orchestrator.sandbox.launchers import launch_needs, node_options
from orchestrator.sandbox.rules import Policy, unenforced

if TYPE_CHECKING:
    from langchain_mcp_adapters.sessions import StdioConnection

REFUSED = (
    "MCP server {name} was not started: ORCHESTRATOR_REQUIRE_SANDBOX is set and this machine "
    "cannot enforce its sandbox ({rules})"
)
# What a program says when the kernel said EACCES (a Landlock denial gives exactly that).
DENIED = re.compile(r"Permission denied|\bEACCES\b|\[Errno 13\]")
DENIAL_NOTE = "permission denied inside the sandbox: a sandbox rule may have refused it"


@dataclass(frozen=True)
class ServerSandbox:
    """The sandbox of one MCP server folder: its section, private directory and settings."""

    config: SandboxConfig
    data: Path
    settings: dict[str, JsonValue] = field(default_factory=dict)
    require: bool = False

    def policy(self, *, command: str, folder: Path) -> Policy:
        """The rules for a launch of `command` now."""
        return policy(
            self.config, folder=folder, data=self.data, command=command, settings=self.settings
        )

    def check(self, *, name: str, command: str, folder: Path) -> None:
        """SandboxUnavailableError if the start must be refused (required, and not enforceable)."""
        if not self.require:
            return
        missing = unenforced(self.policy(command=command, folder=folder))
        if missing:
            raise SandboxUnavailableError(REFUSED.format(name=name, rules="; ".join(missing)))

    def wrap(self, connection: StdioConnection, *, folder: Path) -> StdioConnection:
        """The connection whose process runs the server held by the sandbox."""
        rules = self.policy(command=connection["command"], folder=folder)
        environment = private_environment(self.data)
        for path in environment.values():
            private_dir(Path(path), levels=3)
        command, args = rules.wrap(connection["command"], list(connection["args"]))
        # The launcher's caches and settings, which the private HOME would hide from it.
        needs = launch_needs(connection["command"], folder=folder)
        nowhere = rules.connect is not None and not rules.connect  # no TCP port at all
        launcher = {**needs.env, **(needs.offline if nowhere else {})}
        if rules.memory_mb is not None:  # Node.js, started by the server or its own program
            launcher |= node_options()
        env = {**launcher, **(connection.get("env") or {}), **environment}
        return {**connection, "command": command, "args": args, "env": env}


def denial_note(text: str) -> str | None:
    """The note for the request log when `text` (a result or error) reads as a denial."""
    return DENIAL_NOTE if DENIED.search(text) else None
