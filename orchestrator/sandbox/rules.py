"""What a sandboxed process may touch, resolved to paths and ports; what this kernel can hold.

A `Policy` is built from a folder's approved `sandbox:` section (see
`folders.sandbox_config`) and handed to the launcher as JSON on its command
line. `unenforced` names, in words for the person, the rules this machine
cannot enforce: they are shown at approval, and refuse the start under
ORCHESTRATOR_REQUIRE_SANDBOX=1.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from orchestrator.sandbox import landlock

LAUNCHER = Path(__file__).with_name("launcher.py")
# Read (and execute) for every sandboxed process: the system's programs, libraries, settings.
SYSTEM_READ = (
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc",
    "/sys/devices/system/cpu",
)
# Read and written (no files made there): the devices programs expect.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
# Of /proc, only what describes the machine (a process's own directory is added at launch).
PROC_READ = ("/proc/meminfo", "/proc/cpuinfo", "/proc/stat", "/proc/loadavg", "/proc/version")


@dataclass(frozen=True)
class Policy:
    """Paths the process may read, paths it may change, TCP ports it may connect to, limits.

    `listed` folders may be listed, not their files read (what Python's import
    needs of the folder above a package on `sys.path`).

    `connect` None means TCP is not restricted (never the case for a folder's
    sandbox, whose default is no port at all).
    """

    read: list[str]
    write: list[str]
    connect: list[int] | None = field(default_factory=list)
    listed: list[str] = field(default_factory=list)  # folders it may list, not read files of
    memory_mb: int | None = None
    cpu_seconds: int | None = None
    max_files: int | None = None

    def as_json(self) -> str:
        """The policy as the launcher reads it."""
        return json.dumps(asdict(self), separators=(",", ":"))

    def wrap(self, command: str, args: list[str]) -> tuple[str, list[str]]:
        """The command and arguments that run `command args` held by this policy."""
        launcher = [*_interpreter_flags(), str(LAUNCHER), self.as_json(), "--", command, *args]
        return sys.executable, launcher


def _interpreter_flags() -> list[str]:
    # No site-packages, no user site, no PYTHON* variables: the launcher needs only the stdlib.
    return ["-S", "-s", "-E"]


def unenforced(policy: Policy, *, abi: int | None = None) -> list[str]:
    """The rules of `policy` this machine cannot enforce, in words; empty when all hold."""
    abi = landlock.abi_version() if abi is None else abi
    if abi == 0:
        why = "Landlock is not available (not Linux, or disabled in this kernel)"
        return [f"file access (reads and writes anywhere you can): {why}"] + (
            [f"TCP connections (to any port): {why}"] if policy.connect is not None else []
        )
    missing = []
    if abi < landlock.NET_ABI and policy.connect is not None:
        missing.append(f"TCP connections (to any port): Landlock ABI {abi} < {landlock.NET_ABI}")
    if abi < 2:
        missing.append("moving or linking files between its folders: Landlock ABI 1")
    if abi < 3:
        missing.append(f"truncating files it may read: Landlock ABI {abi} < 3")
    return missing
