"""Where the warm process listens and what a command and it say to each other.

The standard library only: the command loads this before anything else, to
hand itself over in a few milliseconds or go on as usual.

A request is one message: a 4-byte length, a JSON object, and the command's
standard streams, working directory and controlling terminal (when it has one)
as descriptors (SCM_RIGHTS). The warm
process answers one byte (taken or declined); once taken, the command forwards
the signals it gets, a byte each, and the warm process ends with the command's
exit status, 4 bytes (negative: killed by that signal).
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import stat
import struct
import sys
from pathlib import Path

# The commands worth handing over: short ones, run many times a day from shells and
# scripts, and the MCP server, which a client starts and waits for. `chat` loads once
# per session, so a fork would save it little.
COMMANDS = (("ask",), ("run",), ("mcp", "serve"))
SERVE_FLAG = "--serve-warm"  # the entry point's hidden start of a warm process (see `launch`)
MINUTES_VARIABLE = "ORCHESTRATOR_WARM_MINUTES"
TAKEN = b"+"
DECLINED = b"-"
STATUS = struct.Struct("!i")
LENGTH = struct.Struct("!I")
MAX_REQUEST = 4 * 1024 * 1024
DESCRIPTORS = 5  # stdin, stdout, stderr, the working directory and, if any, the terminal
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM)


def runtime_dir(*, create: bool) -> Path | None:
    """This user's folder for the warm process's socket, or None when it is not safely ours.

    `$XDG_RUNTIME_DIR` where the session has one, else a folder of ours in
    `$TMPDIR` or /tmp. Another user's folder, or one others may write, is never
    used: the request carries the command's environment, keys included.
    """
    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"  # noqa: S108 (checked below)
    # Not the embedded server's `orchestrator-UID`: as root, its server user must pass through that one.
    folder = Path(base) / f"orchestrator-warm-{os.getuid()}"
    if create:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return None
    try:
        found = os.lstat(folder)
    except OSError:
        return None
    private = stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and not found.st_mode & 0o077
    return folder if private else None


def installation_key() -> str:
    """One warm process per interpreter and installed package: neither can serve another's commands."""
    package = Path(__file__).resolve().parent.parent
    return hashlib.sha256(f"{sys.executable}\0{package}".encode()).hexdigest()[:12]


def path_in(folder: Path, suffix: str) -> Path:
    """The warm process's file with `suffix` (sock, lock, json, log, modules) in `folder`."""
    return folder / f"warm-{installation_key()}.{suffix}"


def minutes_from_environment() -> float | None:
    """`ORCHESTRATOR_WARM_MINUTES` as the environment sets it, None when unset or unreadable."""
    text = os.environ.get(MINUTES_VARIABLE)
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def interpreter_options() -> list[object]:
    """Python's options that a command and the warm process must share.

    All of `sys.flags` but `safe_path`: the warm process is started with `-P`, so
    that nothing of the folder it was started from is on its import path.
    """
    flags = [[name, getattr(sys.flags, name)] for name in type(sys.flags).__match_args__ if name != "safe_path"]
    return [*flags, *sys.warnoptions]


def send_request(connection: socket.socket, request: bytes, descriptors: list[int]) -> None:
    """The request and the descriptors, in one message as far as the kernel allows."""
    message = LENGTH.pack(len(request)) + request
    sent = connection.sendmsg(
        [message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(descriptors)}i", *descriptors))]
    )
    connection.sendall(message[sent:])


def receive_exactly(connection: socket.socket, size: int) -> bytes:
    """`size` bytes, or fewer when the other end closed first."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = connection.recv(size)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)
