"""Hold this process to a sandbox, then execute the command: `launcher.py POLICY -- COMMAND ARGS`.

The orchestrator runs it by path (`python -S -s -E .../launcher.py`), so
it starts in milliseconds with the standard library only; the sandbox, once
applied, holds the command it executes and everything that command starts.
POLICY is a JSON object (see `policy.Policy.as_json`). A sandbox that cannot be
applied is one line on standard error and exit status 126, the command not run.
"""

from __future__ import annotations

import json
import os
import resource
import sys

if __package__:
    from orchestrator.sandbox import landlock
else:  # run by path: this folder is sys.path[0]
    import landlock

MIB = 1024 * 1024
CANNOT = 126  # as a shell says of a command it found but cannot run


def apply(policy: dict[str, object]) -> None:
    """Set the resource limits, then the Landlock rules the kernel can enforce."""
    _limits(policy)
    abi = landlock.abi_version()
    if abi == 0:
        return  # said at approval; refused before starting under ORCHESTRATOR_REQUIRE_SANDBOX
    connect = policy.get("connect")
    landlock.restrict(
        read=[*_strings(policy.get("read")), "/proc/self"],  # its own process (the same after exec)
        write=_strings(policy.get("write")),
        connect=[int(port) for port in connect] if isinstance(connect, list) else None,
        abi=abi,
        listed=_strings(policy.get("listed")),
    )


def _limits(policy: dict[str, object]) -> None:
    memory, cpu, files = policy.get("memory_mb"), policy.get("cpu_seconds"), policy.get("max_files")
    if isinstance(memory, int):
        _limit(resource.RLIMIT_AS, memory * MIB)
    if isinstance(cpu, int):
        _limit(resource.RLIMIT_CPU, cpu, hard=cpu + 1)  # SIGXCPU first, then SIGKILL
    if isinstance(files, int):
        _limit(resource.RLIMIT_NOFILE, files)


def _limit(which: int, value: int, *, hard: int | None = None) -> None:
    _, ceiling = resource.getrlimit(which)
    cap = (lambda v: v) if ceiling == resource.RLIM_INFINITY else (lambda v: min(v, ceiling))
    resource.setrlimit(which, (cap(value), cap(hard if hard is not None else value)))


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else []


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: launcher.py POLICY -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    try:
        apply(json.loads(argv[0]))
    except (OSError, ValueError) as error:
        print(f"sandbox: cannot apply it: {error}", file=sys.stderr)
        return CANNOT
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as error:
        print(f"sandbox: cannot run {argv[2]}: {error}", file=sys.stderr)
        return CANNOT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
